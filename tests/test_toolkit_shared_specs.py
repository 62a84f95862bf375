"""Function-tool specs are built once per function and shared by every Toolkit."""

from __future__ import annotations

import functools

from agentkit import Toolkit
from agentkit.tools._function import FunctionTool


def lookup(city: str, limit: int = 3, api_key: str = "") -> str:
    """Look a city up.

    Args:
        city: The city.
        limit: How many results.
        api_key: Hidden.
    """
    return f"{city}:{limit}"


def _tool(toolkit: Toolkit, **kwargs: object) -> FunctionTool:
    tool = toolkit.register_tool_function(lookup, **kwargs)  # type: ignore[arg-type]
    assert isinstance(tool, FunctionTool)
    return tool


def test_two_toolkits_share_the_spec_and_the_compiled_checks() -> None:
    first, second = _tool(Toolkit()), _tool(Toolkit())
    assert first is not second
    assert first.spec is second.spec
    validator = first.get_validator()
    assert second.get_validator() is validator  # compiled once, for both toolkits


def test_options_that_change_the_schema_get_their_own_spec() -> None:
    plain = _tool(Toolkit())
    described = _tool(Toolkit(), description="Other words.")
    preset = _tool(Toolkit(), preset_kwargs={"api_key": "k"})
    renamed = _tool(Toolkit(), name="find")
    specs = {id(t.spec) for t in (plain, described, preset, renamed)}
    assert len(specs) == 4
    assert described.description == "Other words."
    assert "api_key" not in preset.parameters["properties"]
    assert "api_key" in plain.parameters["properties"]
    # Preset values do not change the schema: the same keys share one spec.
    assert _tool(Toolkit(), preset_kwargs={"api_key": "other"}).spec is preset.spec


def test_partials_are_described_afresh_and_still_work() -> None:
    bound = functools.partial(lookup, limit=1)
    a = Toolkit().register_tool_function(bound, name="a")
    b = Toolkit().register_tool_function(bound, name="a")
    assert isinstance(a, FunctionTool) and isinstance(b, FunctionTool)
    assert a.parameters == b.parameters


async def test_a_shared_spec_still_validates_per_call() -> None:
    toolkit = Toolkit()
    _tool(Toolkit())
    _tool(toolkit)
    block = {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"city": 3}}
    chunks = [c async for c in toolkit.call_tool_function(block)]  # type: ignore[arg-type]
    assert chunks[-1].is_error
    ok = {"type": "tool_use", "id": "c2", "name": "lookup", "input": {"city": "Oslo"}}
    chunks = [c async for c in toolkit.call_tool_function(ok)]  # type: ignore[arg-type]
    assert not chunks[-1].is_error
    assert chunks[-1].content[0]["text"] == "Oslo:3"  # type: ignore[typeddict-item]


def _per_conversation(user: str, limit: int = 3) -> FunctionTool:
    """A tool defined anew per conversation, closing over the conversation's user."""

    def whoami(prefix: str, count: int = limit) -> str:
        """Say who the tool acts for.

        Args:
            prefix: Text before the name.
            count: How many times.
        """
        return f"{prefix}{user}" * count

    tool = Toolkit().register_tool_function(whoami)
    assert isinstance(tool, FunctionTool)
    return tool


def test_closures_from_one_def_share_the_spec_but_call_their_own_function() -> None:
    alice, bob = _per_conversation("alice"), _per_conversation("bob")
    assert alice.spec is bob.spec  # described once for every conversation
    assert alice.get_validator() is bob.get_validator()


async def test_a_closure_with_other_defaults_gets_its_own_spec() -> None:
    three, five = _per_conversation("a"), _per_conversation("b", limit=5)
    assert three.spec is not five.spec
    assert three.parameters["properties"]["count"]["default"] == 3  # type: ignore[index]
    assert five.parameters["properties"]["count"]["default"] == 5  # type: ignore[index]
    toolkit = Toolkit()
    toolkit.register_tool_function(_per_conversation("carol", limit=1).fn)
    block = {"type": "tool_use", "id": "c", "name": "whoami", "input": {"prefix": "hi "}}
    chunks = [c async for c in toolkit.call_tool_function(block)]  # type: ignore[arg-type]
    assert chunks[-1].content[0]["text"] == "hi carol"  # type: ignore[typeddict-item]


def test_equal_schemas_share_compiled_checks_and_an_edit_does_not_leak() -> None:
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }
    from agentkit.tools._base import ArgumentChecks

    first, second = ArgumentChecks(schema), ArgumentChecks(dict(schema))
    assert first.get_validator() is second.get_validator()
    schema["required"] = []  # the owner edits its dict afterwards
    assert not first.get_validator().is_valid({})  # the shared checks keep the original

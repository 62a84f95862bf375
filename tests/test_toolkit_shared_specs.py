"""Function-tool specs are built once per function and shared by every Toolkit."""

from __future__ import annotations

import functools

from agentkit import Toolkit
from agentkit.tools.function import FunctionTool


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

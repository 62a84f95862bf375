"""Registration, namesakes, groups, the meta tool, state."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agentkit.exceptions import StateError, ToolGroupError, ToolRegistrationError
from agentkit.testing import tool_use
from agentkit.tools import Tool, ToolContext, Toolkit, ToolResponse


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def sub(a: int, b: int) -> int:
    """Subtract."""
    return a - b


def names(tk: Toolkit) -> list[str]:
    return [d.name for d in tk.get_tool_definitions()]


async def final(tk: Toolkit, name: str, **args: Any) -> ToolResponse:
    return [c async for c in tk.call_tool_function(tool_use(name, **args))][-1]


class EchoTool(Tool):
    """A hand-written Tool implementation (as the MCP bridge writes them)."""

    def __init__(self, name: str = "echo", **kwargs: Any) -> None:
        super().__init__(
            name,
            "Echo the text.",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            **kwargs,
        )

    async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
        yield ToolResponse.text(arguments["text"], is_last=False)
        yield ToolResponse.text(arguments["text"] + "!")


# ----------------------------------------------------------------- registration


def test_decorator_forms_return_the_function() -> None:
    tk = Toolkit()

    @tk.tool
    def one() -> str:
        """One."""
        return "1"

    @tk.tool(name="second", timeout=2.5, sequential=True, requires_approval=True)
    async def two() -> str:
        """Two."""
        return "2"

    assert one() == "1"
    assert list(tk.tools) == ["one", "second"]
    tool = tk.get_tool("second")
    assert tool is not None
    assert (tool.timeout, tool.sequential, tool.requires_approval, tool.group) == (
        2.5,
        True,
        True,
        "basic",
    )


async def test_register_any_tool_implementation() -> None:
    tk = Toolkit()
    tool = tk.register_tool(EchoTool())
    assert tk.get_tool("echo") is tool
    chunks = [c async for c in tk.call_tool_function(tool_use("echo", text="hi"))]
    assert [(c.get_text(), c.is_last) for c in chunks] == [("hi", False), ("hi!", True)]
    bad = await final(tk, "echo", text=3)
    assert bad.metadata == {"error": "invalid_arguments"}


async def test_tool_without_final_chunk_gets_one() -> None:
    class Partial(EchoTool):
        async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
            yield ToolResponse.text("a", is_last=False)
            yield ToolResponse.text("b", is_last=False)

    tk = Toolkit()
    tk.register_tool(Partial())
    chunks = [c async for c in tk.call_tool_function(tool_use("echo", text="x"))]
    assert [(c.get_text(), c.is_last) for c in chunks] == [("a", False), ("b", False), ("ab", True)]


async def test_tool_with_context_override() -> None:
    class Ctx(EchoTool):
        async def invoke_with_context(
            self, arguments: dict[str, Any], context: ToolContext
        ) -> AsyncIterator[ToolResponse]:
            yield ToolResponse.text(f"{context.call_id}:{context.data}")

    tk = Toolkit()
    tk.register_tool(Ctx())
    chunks = [
        c async for c in tk.call_tool_function(tool_use("echo", "c1", text="x"), context="agent")
    ]
    assert chunks[-1].get_text() == "c1:agent"


def test_namesake_strategies() -> None:
    tk = Toolkit()
    first = tk.register_tool_function(add, name="calc")
    with pytest.raises(
        ToolRegistrationError, match=r"a tool named 'calc' is already registered; .*namesake"
    ):
        tk.register_tool_function(sub, name="calc")
    assert tk.register_tool_function(sub, name="calc", namesake="skip") is first
    renamed = tk.register_tool_function(sub, name="calc", namesake="rename")
    assert renamed.name == "calc_2"
    assert renamed.tool_definition.name == "calc_2"
    assert tk.register_tool_function(sub, name="calc", namesake="rename").name == "calc_3"
    override = tk.register_tool_function(sub, name="calc", namesake="override")
    assert tk.get_tool("calc") is override is not first
    assert names(tk) == ["calc", "calc_2", "calc_3"]
    with pytest.raises(ToolRegistrationError, match="unknown namesake strategy 'merge'"):
        tk.register_tool_function(sub, name="calc", namesake="merge")  # type: ignore[arg-type]


def test_remove_tools() -> None:
    tk = Toolkit()
    tk.register_tool_function(add)
    tk.register_tool_function(sub)
    assert names(tk) == ["add", "sub"]
    tk.remove_tools(["add", "not-there"])
    assert names(tk) == ["sub"]
    tk.remove_tools("sub")
    assert tk.tools == {} and tk.get_tool_definitions() == []


def test_tools_view_is_read_only() -> None:
    tk = Toolkit()
    tk.register_tool_function(add)
    with pytest.raises(TypeError):
        tk.tools["x"] = tk.tools["add"]  # type: ignore[index]


def test_get_tool_definitions_returns_a_fresh_list_sharing_each_schema() -> None:
    tk = Toolkit()
    tk.register_tool_function(add)
    a, b = tk.get_tool_definitions(), tk.get_tool_definitions()
    assert a == b and a is not b and a[0].parameters is b[0].parameters
    a.clear()
    assert names(tk) == ["add"]


# ----------------------------------------------------------------- groups


def test_groups_control_the_offered_schemas() -> None:
    tk = Toolkit()
    tk.register_tool_function(add)
    tk.create_tool_group("math", "More math.", notes="Prefer integers.")
    tk.register_tool_function(sub, group="math")
    assert names(tk) == ["add"]
    tk.update_tool_groups(["math"], active=True)
    assert names(tk) == ["add", "sub"]
    assert tk.get_active_group_notes() == "## Tool group 'math'\nPrefer integers."
    tk.update_tool_groups(["math"], active=False)
    assert names(tk) == ["add"]
    assert tk.get_active_group_notes() == ""
    tk.remove_tool_groups(["math"])
    assert list(tk.tools) == ["add"]
    assert list(tk.groups) == ["basic"]


def test_group_errors() -> None:
    tk = Toolkit()
    with pytest.raises(
        ToolGroupError, match=r"the tool group 'nope' does not exist; create it first"
    ):
        tk.register_tool_function(add, group="nope")
    tk.create_tool_group("g", "G")
    with pytest.raises(ToolGroupError, match="already exists"):
        tk.create_tool_group("g", "again")
    with pytest.raises(ToolGroupError, match="already exists"):
        tk.create_tool_group("basic", "again")
    with pytest.raises(ToolGroupError, match=r"unknown tool group\(s\) \['x'\]"):
        tk.update_tool_groups(["g", "x"], active=True)
    assert tk.groups["g"].active is False  # all or nothing
    with pytest.raises(ToolGroupError, match="cannot deactivate the 'basic' tool group"):
        tk.update_tool_groups(["basic"], active=False)
    with pytest.raises(ToolGroupError, match="cannot remove the 'basic' tool group"):
        tk.remove_tool_groups(["basic"])
    with pytest.raises(ToolGroupError, match="invalid tool group name"):
        tk.create_tool_group("bad name", "x")
    tk.update_tool_groups(["basic"], active=True)  # harmless


async def test_meta_tool_switches_groups() -> None:
    tk = Toolkit()
    tk.register_tool_function(add)
    tk.create_tool_group("web", "Browse the web.", notes="Cite sources.")
    tk.create_tool_group("files", "Read files.")
    tk.register_tool_function(sub, name="fetch", group="web")
    meta = tk.register_meta_tool()
    Draft202012Validator.check_schema(meta.parameters)
    assert meta.parameters == {
        "type": "object",
        "properties": {
            "web": {"type": "boolean", "description": "Browse the web."},
            "files": {"type": "boolean", "description": "Read files."},
        },
        "additionalProperties": False,
    }
    assert names(tk) == ["add", "reset_equipped_tools"]

    result = await final(tk, "reset_equipped_tools", web=True, files=False)
    assert not result.is_error
    assert result.get_text() == (
        "Equipped tool groups: basic, web. Available tools: add, fetch, reset_equipped_tools."
        "\n\n## Tool group 'web'\nCite sources."
    )
    assert names(tk) == ["add", "fetch", "reset_equipped_tools"]
    assert "web (equipped)" in tk.get_tool_definitions()[2].description

    # "reset": groups left out are put away.
    await final(tk, "reset_equipped_tools", files=True)
    assert [g.name for g in tk.groups.values() if g.active] == ["basic", "files"]


@pytest.mark.parametrize(
    "args",
    [{"web": "yes"}, {"nope": True}, {"basic": False}, {"web": True, "extra": 1}],
    ids=["not-bool", "unknown-group", "basic", "extra"],
)
async def test_meta_tool_invalid_arguments_change_nothing(args: dict[str, Any]) -> None:
    tk = Toolkit()
    tk.create_tool_group("web", "Web.", active=True)
    tk.create_tool_group("files", "Files.")
    tk.register_meta_tool()
    before = tk.state_dict()
    result = await final(tk, "reset_equipped_tools", **args)
    assert result.is_error and result.metadata == {"error": "invalid_arguments"}
    assert tk.state_dict() == before


def test_meta_tool_schema_follows_groups() -> None:
    tk = Toolkit()
    meta = tk.register_meta_tool()
    assert meta.parameters["properties"] == {}
    tk.create_tool_group("web", "Web.")
    assert list(meta.parameters["properties"]) == ["web"]
    assert tk.get_tool_definitions()[0].parameters["properties"] == {
        "web": {"type": "boolean", "description": "Web."}
    }
    tk.remove_tool_groups(["web"])
    assert meta.parameters["properties"] == {}
    tk.remove_tools(["reset_equipped_tools"])
    assert tk.meta_tool_name is None


# ----------------------------------------------------------------- state


def test_state_round_trip() -> None:
    tk = Toolkit()
    tk.create_tool_group("web", "Web.")
    tk.create_tool_group("files", "Files.", active=True)
    state = tk.state_dict()
    assert state == {"version": 1, "active_groups": ["basic", "files"]}

    other = Toolkit()
    other.create_tool_group("web", "Web.", active=True)
    other.create_tool_group("files", "Files.")
    other.load_state_dict(state)
    assert other.state_dict() == state


def test_load_state_skips_unknown_groups(caplog: pytest.LogCaptureFixture) -> None:
    tk = Toolkit()
    with caplog.at_level(logging.WARNING, logger="agentkit.tools"):
        tk.load_state_dict({"version": 1, "active_groups": ["ghost"]})
    assert "ghost" in caplog.text
    assert tk.state_dict() == {"version": 1, "active_groups": ["basic"]}


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"version": 2, "active_groups": []},
        {"version": 1, "active_groups": "web"},
        {"version": 1, "active_groups": [1]},
    ],
)
def test_load_state_rejects_malformed(state: dict[str, Any]) -> None:
    with pytest.raises(StateError):
        Toolkit().load_state_dict(state)


class _Source:
    """A tool source as the Toolkit sees one: followed by copies, saved with the state."""

    state_key = "fake_parts"

    def __init__(self, name: str, toolkit: Toolkit, log: list[str]) -> None:
        self.name, self.toolkit, self.log = name, toolkit, log
        self.part: dict[str, str] = {"seen": "0"}

    def follow(self, copy: Toolkit) -> _Source:
        self.log.append(f"follow {self.name}")
        twin = _Source(self.name, copy, self.log)
        twin.part = dict(self.part)
        return twin

    def save_state(self) -> dict[str, str]:
        return dict(self.part)

    def restore_state(self, saved: Mapping[str, str]) -> None:
        self.log.append(f"restore {self.name} {dict(saved)}")
        self.part = dict(saved)


def test_tool_sources_follow_copies_and_travel_with_the_state() -> None:
    log: list[str] = []
    tk = Toolkit()
    source = _Source("a", tk, log)
    tk.add_tool_source(source)
    tk.add_tool_source(source)  # held once
    source.part["seen"] = "1"
    state = tk.state_dict()
    assert state["fake_parts"] == {"a": {"seen": "1"}}

    clone = tk.copy()
    (twin,) = clone.tool_sources
    assert isinstance(twin, _Source) and twin.toolkit is clone and log == ["follow a"]

    # Loaded before its source is added: the part waits, is saved meanwhile, then handed over.
    fresh = Toolkit()
    fresh.load_state_dict({**state, "fake_parts": {"a": {"seen": "1"}, "b": {"seen": "2"}}})
    assert fresh.state_dict()["fake_parts"] == {"a": {"seen": "1"}, "b": {"seen": "2"}}
    assert fresh.copy().state_dict()["fake_parts"] == {"a": {"seen": "1"}, "b": {"seen": "2"}}
    later = _Source("b", fresh, log)
    fresh.add_tool_source(later)
    assert later.part == {"seen": "2"} and log[-1] == "restore b {'seen': '2'}"
    fresh.remove_tool_source(later)
    assert fresh.tool_sources == () and "b" not in fresh.state_dict()["fake_parts"]

    # Loaded after: restored at once.
    tk.load_state_dict({**state, "fake_parts": {"a": {"seen": "5"}}})
    assert source.part == {"seen": "5"}
    with pytest.raises(StateError, match="fake_parts"):
        tk.load_state_dict({**state, "fake_parts": {"a": {"seen": 5}}})
    assert source.part == {"seen": "5"}  # refused before anything changed


async def test_failing_cleanup_after_the_final_chunk_is_reported_with_the_output(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Tools run to their end (nothing they yield is lost), so a ``finally`` that raises is
    # part of the call: the model gets the output so far and the failure, never a silent drop.
    class Messy(EchoTool):
        async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
            try:
                yield ToolResponse.text("result")
            finally:
                raise RuntimeError("cleanup failed")

    tk = Toolkit()
    tk.register_tool(Messy())
    with caplog.at_level(logging.INFO, logger="agentkit.tools"):
        chunks = [c async for c in tk.call_tool_function(tool_use("echo", text="x"))]
    assert [(c.is_last, c.is_error) for c in chunks] == [(True, True)]
    text = chunks[0].get_text()
    assert text.startswith("result") and "RuntimeError: cleanup failed" in text
    assert "cleanup failed" in caplog.text


def test_schema_change_of_a_registered_tool_is_seen() -> None:
    tk = Toolkit()
    tool = tk.register_tool(EchoTool())
    assert tk.get_tool_definitions()[0].description == "Echo the text."
    tool.description = "Echo it back."
    tool.invalidate_schema()
    assert tk.get_tool_definitions()[0].description == "Echo it back."

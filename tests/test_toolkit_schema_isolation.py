"""One function tool's schema edits stay that tool's own.

Function-tool specs are shared by every tool of one function and across closures of one
``def`` (see ``agentkit.tools._schema``); a user editing ``tool.parameters`` (then calling
``invalidate_schema()``, as the docs say) must change that tool only, and every tool must
keep validating with its own schema.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkit import Toolkit
from agentkit.messages import ToolUseBlock
from agentkit.tools._function import FunctionTool


def _register(fn: Callable[..., object]) -> FunctionTool:
    tool = Toolkit().register_tool_function(fn)
    assert isinstance(tool, FunctionTool)
    return tool


def _factory(user: str) -> Callable[..., str]:
    def lookup(q: str, n: int = 1) -> str:
        """Look something up.

        Args:
            q: The query.
            n: How many.
        """
        return f"{user}:{q}:{n!r}"

    return lookup


async def test_editing_one_tools_parameters_does_not_leak_to_other_tools() -> None:
    first, second = _register(_factory("a")), _register(_factory("b"))
    first.parameters["properties"]["q"]["enum"] = ["only"]  # type: ignore[index]
    first.invalidate_schema()
    assert "enum" not in second.parameters["properties"]["q"]  # type: ignore[index]
    fresh = _register(_factory("c"))
    assert "enum" not in fresh.parameters["properties"]["q"]  # type: ignore[index]
    assert "enum" not in str(Toolkit().register_tool_function(_factory("d")).tool_definition)
    # Each validates with its own schema: the edit binds the edited tool only.
    block = ToolUseBlock(type="tool_use", id="1", name="lookup", input={"q": "other"})
    for tool, refused in ((first, True), (second, False), (fresh, False)):
        toolkit = Toolkit()
        toolkit.register_tool(tool)
        result = await toolkit.execute(block)
        assert bool(result.is_error) is refused, (tool, result)


async def test_a_tool_whose_parameters_were_read_still_validates_and_calls() -> None:
    tool = _register(_factory("a"))
    assert tool.parameters["required"] == ["q"]
    toolkit = Toolkit()
    toolkit.register_tool(tool)
    ok = await toolkit.execute(
        ToolUseBlock(type="tool_use", id="1", name="lookup", input={"q": "x"})
    )
    bad = await toolkit.execute(ToolUseBlock(type="tool_use", id="2", name="lookup", input={}))
    assert not ok.is_error and "a:x:1" in str(ok.content)
    assert bad.is_error


async def test_editing_one_tools_offered_schema_does_not_leak_to_other_tools() -> None:
    first, second = _register(_factory("a")), _register(_factory("b"))
    offered = first.parameters  # this tool's own copy, to edit
    offered["properties"]["q"]["enum"] = ["only"]
    assert "enum" not in str(second.tool_definition)
    assert "enum" not in str(_register(_factory("c")).tool_definition)
    first.invalidate_schema()  # the documented step after an edit: now it validates so
    block = ToolUseBlock(type="tool_use", id="1", name="lookup", input={"q": "other"})
    for tool, refused in ((first, True), (second, False)):
        toolkit = Toolkit()
        toolkit.register_tool(tool)
        assert bool((await toolkit.execute(block)).is_error) is refused


async def test_a_schema_assigned_to_a_function_tool_is_checked_from_then_on() -> None:
    tool = _register(_factory("a"))
    assert tool.checks is tool.spec.checks  # shared until the tool's schema is replaced
    tool.parameters = {
        "type": "object",
        "properties": {"q": {"type": "integer"}},
        "required": ["q"],
    }
    toolkit = Toolkit()
    toolkit.register_tool(tool)
    block = ToolUseBlock(type="tool_use", id="1", name="lookup", input={"q": "text"})
    assert (await toolkit.execute(block)).is_error
    assert _register(_factory("b")).checks is tool.spec.checks  # others keep the shared one

"""One spelling per concept: the old keyword names still work, with a DeprecationWarning."""

from __future__ import annotations

import pytest
from _mcp_helpers import py_stdio

from agentkit import Toolkit
from agentkit.exceptions import UsageError
from agentkit.mcp import MCPClient
from toolkits import python as python_toolkit


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_group_name_is_the_deprecated_spelling_of_group() -> None:
    tk = Toolkit()
    tk.create_tool_group("math", "Math tools")
    with pytest.warns(DeprecationWarning, match="group_name= is deprecated.*use group="):
        tool = tk.register_tool_function(add, group_name="math")
    assert tool.group == "math"
    tk2 = Toolkit()
    tk2.create_tool_group("math", "Math tools")
    assert tk2.register_tool_function(add, group="math").group == "math"  # no warning


def test_the_decorator_takes_both_spellings_too() -> None:
    tk = Toolkit()
    tk.create_tool_group("math", "Math tools")
    with pytest.warns(DeprecationWarning, match="group_name="):

        @tk.tool(group_name="math")
        def mul(a: int, b: int) -> int:
            """Multiply two numbers."""
            return a * b

    assert tk.tools["mul"].group == "math"


def test_both_spellings_with_different_values_is_a_usage_error() -> None:
    tk = Toolkit()
    tk.create_tool_group("math", "Math tools")
    tk.create_tool_group("web", "Web tools")
    with (
        pytest.warns(DeprecationWarning, match="group_name="),
        pytest.raises(UsageError, match="group= only"),
    ):
        tk.register_tool_function(add, group="web", group_name="math")


def test_toolkit_factories_take_group_and_warn_on_group_name() -> None:
    tk = Toolkit()
    python_toolkit.toolkit(into=tk, group="code")
    assert tk.tools["run_python"].group == "code"
    with pytest.warns(DeprecationWarning, match="use group="):
        other = python_toolkit.toolkit(group_name="py")
    assert other.tools["run_python"].group == "py"


async def test_register_mcp_client_old_spellings_still_work() -> None:
    async with MCPClient("py", py_stdio()) as client:
        tk = Toolkit()
        tk.create_tool_group("remote", "Remote tools")
        with pytest.warns(DeprecationWarning, match="deprecated") as warned:
            tools = await tk.register_mcp_client(
                client, group_name="remote", execution_timeout=5.0, enable_funcs=["add"]
            )
        messages = sorted(str(w.message) for w in warned)
        assert any("execution_timeout=" in m and "use timeout=" in m for m in messages)
        assert any("group_name=" in m and "use group=" in m for m in messages)
        assert [(t.group, t.timeout) for t in tools] == [("remote", 5.0)]

"""Open-world taint stays with the conversation that read the content (``Toolkit.copy``).

A chat server registers its MCP clients once on a template Toolkit and gives every
conversation ``template.copy()``. MCP tools are shared by the copies; what a call marks as
untrusted input (``agentkit.mcp._defenses``) must be marked on the toolkit that ran the call,
and a tool's need for approval must be judged on the conversation's own toolkit: one
conversation reading a hostile server's output must not make every other conversation ask
for approval, nor escape its own ``reset_untrusted_content``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator

import pytest

from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.mcp._defenses import is_tainted, reset_untrusted_content
from agentkit.tools import Toolkit
from tests._mcp_helpers import ROOT
from tests._toolkits_helpers import call

RAW = str(ROOT / "tests" / "mcp_servers" / "raw_server.py")
pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def _two_servers() -> AsyncIterator[Toolkit]:
    """A toolkit with two raw MCP servers (stdio) registered, prefixed ``a`` and ``b``."""
    a = MCPClient("a", StdioServer(sys.executable, [RAW]))
    b = MCPClient("b", StdioServer(sys.executable, [RAW]))
    async with a, b:
        toolkit = Toolkit()
        await register_mcp_client(toolkit, a, prefix="a")
        await register_mcp_client(toolkit, b, prefix="b")
        yield toolkit


async def test_taint_marks_the_copy_that_ran_the_call_only() -> None:
    async with _two_servers() as template:
        first, second = template.copy(), template.copy()
        b_ok = template.get_tool("b_ok")
        assert b_ok is not None
        await call(first, "a_greet")  # server a's output, read in the first conversation
        assert is_tainted(first, "b")
        assert not is_tainted(second, "b") and not is_tainted(template, "b")
        assert b_ok.requires_approval_in(first)
        assert not b_ok.requires_approval_in(second)
        assert not b_ok.requires_approval  # judged on the template it was registered in
        reset_untrusted_content(first)  # the first conversation starts over
        assert not b_ok.requires_approval_in(first)


async def test_the_toolkit_the_tool_was_registered_in_still_works_alone() -> None:
    async with _two_servers() as tk:
        b_ok = tk.get_tool("b_ok")
        assert b_ok is not None
        await call(tk, "a_greet")
        assert b_ok.requires_approval and b_ok.requires_approval_in(tk)


async def test_agents_on_copies_ask_for_approval_only_where_the_input_entered() -> None:
    from agentkit import ReActAgent
    from agentkit.testing import ScriptedModel, tool_use

    async with _two_servers() as template:
        read_then_act = [[tool_use("a_greet", "g1", name="x")], [tool_use("b_ok", "o1")], "done"]
        act = [[tool_use("b_ok", "o2")], "done"]
        hostile = ReActAgent("one", "sys", ScriptedModel(read_then_act), toolkit=template.copy())
        other = ReActAgent("two", "sys", ScriptedModel(act), toolkit=template.copy())
        reply = await hostile("go")
        assert [c["id"] for c in reply.metadata["pending_tool_calls"]] == ["o1"]
        reply = await other("go")  # nothing from outside entered this conversation
        assert "pending_tool_calls" not in reply.metadata
        assert reply.get_text() == "done"

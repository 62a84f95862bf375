"""Copies of a toolkit (``Toolkit.copy()``, one per conversation) follow their MCP servers.

A chat server registers its MCP clients once on a template Toolkit and gives each
conversation ``template.copy()``. When a server announces ``tools/list_changed``, every copy
must be brought in line as the template is (new tools added, removed or changed ones
replaced, so no copy keeps offering and validating a stale definition), a copy that
removed the client must stay without it, and a copy no one holds any more is not kept alive
by the client.
"""

from __future__ import annotations

import contextlib
import weakref

import anyio

from agentkit.mcp import MCPClient, register_mcp_client, remove_mcp_clients
from agentkit.testing import tool_use
from agentkit.tools import Toolkit, ToolResponse
from tests._mcp_helpers import py_stdio


async def final(toolkit: Toolkit, name: str, /, **arguments: object) -> ToolResponse:
    async with contextlib.aclosing(toolkit.call_tool_function(tool_use(name, **arguments))) as c:
        return [chunk async for chunk in c][-1]


async def test_copies_follow_list_changed_and_a_removal_sticks() -> None:
    template = Toolkit()
    async with MCPClient("py", py_stdio()) as client:
        await register_mcp_client(template, client, prefix="py")
        first, second, leaving = template.copy(), template.copy(), template.copy()
        copy_of_copy = first.copy()
        await remove_mcp_clients(leaving, [client])
        await final(second, "py_add_tool", name="tripler")  # the server's list changes
        with anyio.fail_after(10):
            while "py_tripler" not in template.tools:
                await anyio.sleep(0.02)
        for toolkit in (first, second, copy_of_copy):
            assert "py_tripler" in toolkit.tools
            assert (await final(toolkit, "py_tripler", x=4)).get_text() == "8"
        assert not [n for n in leaving.tools if n.startswith("py_")]
        # Each toolkit holds its own registration; the client refers to them weakly, so a
        # finished conversation's copy is not kept alive by the server it used.
        assert [r.toolkit for r in client.registrations] == [template, first, second, copy_of_copy]
        finished = weakref.ref(template.copy())
        assert finished() is None
        assert len(list(client.registrations)) == 4

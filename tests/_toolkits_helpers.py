"""Helpers for the ready-made toolkit tests: local calls and the same toolkit over MCP stdio."""

from __future__ import annotations

import sys
from typing import Any

from agentkit.mcp import MCPClient, StdioServer
from agentkit.tools import Toolkit, ToolResponse


async def call(toolkit: Toolkit, name: str, **arguments: Any) -> ToolResponse:
    """Run one call through the Toolkit and return its final chunk."""
    chunks = [
        chunk
        async for chunk in toolkit.call_tool_function(
            {"type": "tool_use", "id": "call-1", "name": name, "input": arguments}
        )
    ]
    assert chunks and chunks[-1].is_last
    assert all(not c.is_last for c in chunks[:-1])
    return chunks[-1]


def stdio_client(module: str, *args: str) -> MCPClient:
    """An agentkit MCP client for ``python -m toolkits.<module> <args>``."""
    return MCPClient(
        module,
        StdioServer(sys.executable, ["-m", f"toolkits.{module}", *args], stderr="devnull"),
        timeout=30,
    )


async def assert_same_over_mcp(
    local: Toolkit, client: MCPClient, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    """The served toolkit lists the same tools (schemas) and gives the same results."""
    remote = {t.name: t for t in await client.list_tools()}
    local_tools = {d.name: d for d in local.get_tool_definitions()}
    assert set(remote) == set(local_tools)
    for name, definition in local_tools.items():
        assert remote[name].input_schema == definition.parameters
        assert remote[name].description == definition.description
    for name, arguments in calls:
        mine = await call(local, name, **arguments)
        theirs = await client.call_tool(name, arguments)
        assert theirs.is_error == mine.is_error, (name, arguments, theirs, mine)
        assert theirs.get_text() == mine.get_text(), (name, arguments)

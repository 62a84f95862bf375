"""The MCP server used by the MCP benchmark: an ``MCPServer`` (mcp package) over stdio with one
trivial tool, so the figure is the client-side cost of a ``tools/call`` round trip.

It also counts the ``tools/list`` requests it answers (tool ``list_count``), so the benchmark
can show that a client does not list tools on every call.

Run: ``python benchmarks/mcp_server.py`` (speaks MCP on stdin/stdout).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer


class CountingServer(MCPServer):
    """An MCPServer that counts the ``tools/list`` requests it answers."""

    list_calls = 0

    async def list_tools(self) -> list[Any]:
        CountingServer.list_calls += 1
        return await super().list_tools()


server = CountingServer("agentkit-bench")


@server.tool()
def echo(i: int) -> str:
    """Echo the call number.

    Args:
        i: Call number.
    """
    return f"echo {i}"


@server.tool()
def list_count() -> int:
    """How many tools/list requests this server has answered."""
    return CountingServer.list_calls


if __name__ == "__main__":
    server.run("stdio")

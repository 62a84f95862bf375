"""The MCP server used by the MCP benchmark: an ``MCPServer`` (mcp package) over stdio with one
trivial tool, so the figure is the client-side cost of a ``tools/call`` round trip.

Run: ``python benchmarks/mcp_server.py`` (speaks MCP on stdin/stdout).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentkit-bench")


@server.tool()
def echo(i: int) -> str:
    """Echo the call number.

    Args:
        i: Call number.
    """
    return f"echo {i}"


if __name__ == "__main__":
    server.run("stdio")

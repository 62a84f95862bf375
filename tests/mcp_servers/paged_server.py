"""A low-level MCP server that lists its 25 tools over 3 ``tools/list`` pages (stdio)."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name=f"tool_{i:02d}",
        description=f"Tool number {i}",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    for i in range(25)
]
PAGE = 10


async def list_tools(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    return types.ListToolsResult(
        tools=TOOLS[start:end], next_cursor=str(end) if end < len(TOOLS) else None
    )


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    x = (params.arguments or {}).get("x", 0)
    return types.CallToolResult(content=[types.TextContent(text=f"{params.name}:{x}")])


server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

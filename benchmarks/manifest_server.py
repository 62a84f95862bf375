"""A stdio MCP server (the mcp SDK's low-level ``Server``) serving one manifest of
``tests/fixtures/mcp_manifests.json``: 20 tools modelled on a real server's (filesystem,
github, slack...), with their real names, descriptions and input schemas. A call answers
with the tool's name and arguments. For the ``mcp_fleet`` benchmark (10 of them at once).

Run: ``python benchmarks/manifest_server.py SERVER`` (e.g. ``github``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MANIFESTS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "mcp_manifests.json"
NAME = sys.argv[1]
ENTRIES: list[dict[str, Any]] = json.loads(MANIFESTS.read_text())["servers"][NAME]
TOOLS = [
    types.Tool(name=e["name"], description=e["description"], input_schema=e["inputSchema"])
    for e in ENTRIES
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = f"{NAME}.{params.name} ran with {json.dumps(params.arguments, sort_keys=True)}"
    return types.CallToolResult(content=[types.TextContent(text=text)])


server = Server(NAME, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

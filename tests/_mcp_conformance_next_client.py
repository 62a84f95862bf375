"""agentkit's MCPClient for the client scenarios of the newest conformance runner.

``python _mcp_conformance_next_client.py URL`` (the runner appends the URL). Like
``tests/_mcp_conformance_client.py`` (whose OAuth login it uses), plus what the
0.2.0-alpha.12 scenarios ask of a client: the tool calls a scenario lists in
``MCP_CONFORMANCE_CONTEXT["toolCalls"]`` are made with exactly those arguments (the
``x-mcp-header`` scenarios), and ``json-schema-2020-12-preservation`` gets the focal tool's
input schema echoed back as it was received.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentkit.mcp import HttpServer, MCPClient
from tests._mcp_conformance_client import arguments, oauth

ECHO = "json_schema_echo"  # the scenario's echo tool: the focal tool's schema goes back to it


async def run(server: HttpServer, calls: list[dict[str, Any]]) -> None:
    client = MCPClient("conformance", server, elicitation_callback=lambda m, s: {})
    async with client:
        tools = await client.list_tools()
        if calls:
            for call in calls:
                result = await client.call_tool(call["name"], dict(call.get("arguments") or {}))
                print(call["name"], result.is_error, result.get_text()[:200])
            return
        if any(t.name == ECHO for t in tools):
            focal = next(t for t in tools if t.name != ECHO)
            result = await client.call_tool(ECHO, {"schema": dict(focal.input_schema)})
            print(ECHO, result.is_error, result.get_text()[:200])
            return
        for tool in tools:
            result = await client.call_tool(tool.name, arguments(dict(tool.input_schema)))
            print(tool.name, result.is_error, result.get_text()[:200])


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as folder:
        login = oauth(folder) if scenario.startswith("auth/") else None
        await run(HttpServer(url, oauth=login), list(context.get("toolCalls") or []))


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1])

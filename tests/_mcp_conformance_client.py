"""agentkit's MCPClient as a conformance-runner client: ``python _mcp_conformance_client.py URL``.

The runner (``client --scenario NAME --command "python this.py"``) appends the server URL.
The client connects, lists the tools and calls each one with arguments made from its input
schema, answering elicitations with an empty form (so schema defaults must be applied).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentkit.mcp import HttpServer, MCPClient

SAMPLES = {"number": 1, "integer": 1, "string": "x", "boolean": True}


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {k: SAMPLES.get(str(v.get("type")), "x") for k, v in props.items()}


async def main(url: str) -> None:
    client = MCPClient("conformance", HttpServer(url), elicitation_callback=lambda m, s: {})
    async with client:
        for tool in await client.list_tools():
            result = await client.call_tool(tool.name, arguments(dict(tool.input_schema)))
            print(tool.name, result.is_error, result.get_text()[:200])


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1])

"""agentkit's MCPClient as a conformance-runner client: ``python _mcp_conformance_client.py URL``.

The runner (``client --scenario NAME --command "python this.py"``) appends the server URL.
The client connects, lists the tools and calls each one with arguments made from its input
schema, answering elicitations with an empty form (so schema defaults must be applied).

For the ``auth/*`` scenarios it connects with ``HttpServer(url, oauth=OAuth(...))``: the
"browser" is httpx2 fetching the authorization URL and following the authorization server's
redirect to agentkit's loopback listener (no human). Pre-registered credentials come from
``MCP_CONFORMANCE_CONTEXT``; tokens go to a temporary folder.
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

from agentkit.mcp import FileTokenStorage, HttpServer, MCPClient, OAuth

SAMPLES = {"number": 1, "integer": 1, "string": "x", "boolean": True}


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {k: SAMPLES.get(str(v.get("type")), "x") for k, v in props.items()}


# The client-ID metadata document URL the runner's auth/basic-cimd scenario expects.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def headless_browser(url: str) -> None:
    """What a user's browser does after "allow": follow the redirects to our listener."""
    import httpx2

    async with httpx2.AsyncClient(follow_redirects=True, timeout=30) as http:
        await http.get(url)


def oauth(folder: str) -> OAuth:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return OAuth(
        client_name="agentkit-conformance",
        token_store=FileTokenStorage(Path(folder) / "tokens.json"),
        browser=headless_browser,
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        client_metadata_url=CIMD_URL,
        login_timeout=30,
    )


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    with tempfile.TemporaryDirectory() as folder:
        server = HttpServer(url, oauth=oauth(folder) if scenario.startswith("auth/") else None)
        await run(server)


async def run(server: HttpServer) -> None:
    client = MCPClient("conformance", server, elicitation_callback=lambda m, s: {})
    async with client:
        for tool in await client.list_tools():
            result = await client.call_tool(tool.name, arguments(dict(tool.input_schema)))
            print(tool.name, result.is_error, result.get_text()[:200])


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1])

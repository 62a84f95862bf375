"""An agentkit MCPApp with task tools (SEP-1686), for tests/test_mcp_tasks.py.

Usage: ``task_server.py stdio`` or ``task_server.py http PORT`` (127.0.0.1).
"""

from __future__ import annotations

import sys

import anyio

from agentkit.mcp import MCPApp, serve

app = MCPApp(name="tasks")


@app.tool(task=True)
async def add(a: int, b: int) -> str:
    """Add two numbers (as a task)."""
    return str(a + b)


@app.tool(task=True)
async def block() -> str:
    """Run until cancelled."""
    await anyio.sleep_forever()
    return "never"


@app.tool(task=True)
async def boom() -> str:
    """Fail."""
    raise ValueError("kaboom")


@app.tool(task="optional")
async def echo(text: str) -> str:
    """Echo, as a task or not."""
    return text


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(serve, app)
    else:
        anyio.run(lambda: serve(app, "streamable_http", port=int(sys.argv[2])))

"""An agentkit MCPApp with task tools (SEP-1686), for tests/test_mcp_tasks.py.

Usage: ``task_server.py stdio``, ``task_server.py http PORT`` (127.0.0.1), or
``task_server.py http-auth PORT``: bearer tokens checked by the SDK's auth middleware, where
``alice-token`` and ``bob-token`` are two principals (two OAuth clients).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anyio

from agentkit.mcp import MCPApp, MCPContext, serve
from agentkit.tools import ToolContext

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

app = MCPApp(name="tasks")


@app.tool(task=True)
async def add(a: int, b: int) -> str:
    """Add two numbers (as a task)."""
    return str(a + b)


ENDED = {"count": 0}  # block tasks stopped so far
CHANGED = {"event": anyio.Event()}


@app.tool(task=True)
async def block() -> str:
    """Run until cancelled."""
    try:
        await anyio.sleep_forever()
    finally:
        ENDED["count"] += 1
        CHANGED["event"].set()
        CHANGED["event"] = anyio.Event()
    return "never"


@app.tool()
async def wait_ended(count: int) -> str:
    """How many block tasks ended, once at least ``count`` did (or after 20 s)."""
    with anyio.move_on_after(20):
        while ENDED["count"] < count:
            await CHANGED["event"].wait()
    return str(ENDED["count"])


@app.tool(task=True)
async def boom() -> str:
    """Fail."""
    raise ValueError("kaboom")


@app.tool(task="optional")
async def echo(text: str) -> str:
    """Echo, as a task or not."""
    return text


def _ask_name(ctx: ToolContext) -> MCPContext:
    mcp = MCPContext.of(ctx)
    assert mcp is not None, "called over MCP only"
    return mcp


GATE = {"open": anyio.Event()}


@app.tool(task=True)
async def gated() -> str:
    """Run until ``release`` is called."""
    await GATE["open"].wait()
    GATE["open"] = anyio.Event()
    return "released"


@app.tool()
async def release() -> str:
    """Let the running ``gated`` task finish."""
    GATE["open"].set()
    return "ok"


NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@app.tool(task="after_input")
async def greet_later(ctx: ToolContext) -> str:
    """Ask the caller's name (before the task exists), then greet as a task."""
    answer = await _ask_name(ctx).elicit("Your name?", NAME, key="user_name")
    return f"hello {(answer['content'] or {}).get('name')}"


@app.tool(task=True)
async def greet_in_task(ctx: ToolContext) -> str:
    """Ask the caller's name from inside the task (input_required, tasks/update)."""
    answer = await _ask_name(ctx).elicit("Your name?", NAME, key="user_name")
    return f"hi {(answer['content'] or {}).get('name')}"


class TwoUsers:
    """A TokenVerifier that knows two tokens, each its own OAuth client."""

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        user = {"alice-token": "alice", "bob-token": "bob"}.get(token)
        return AccessToken(token=token, client_id=user, scopes=[]) if user else None


def serve_with_two_users(port: int) -> None:
    import uvicorn
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings(
        issuer_url=AnyHttpUrl("http://127.0.0.1:1/"),  # never contacted: the verifier decides
        resource_server_url=AnyHttpUrl(url),
        validate_token_resource=False,
    )
    http = app.build_server().streamable_http_app(
        host="127.0.0.1", auth=auth, token_verifier=TwoUsers()
    )
    uvicorn.run(http, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(serve, app)
    elif sys.argv[1] == "http-auth":
        serve_with_two_users(int(sys.argv[2]))
    else:
        anyio.run(lambda: serve(app, "streamable_http", port=int(sys.argv[2])))

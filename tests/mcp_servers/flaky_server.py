"""An MCP test server whose connection drops while a call is running (for safe-retry tests).

Run: ``python flaky_server.py stdio`` | ``python flaky_server.py http PORT [forget]``
(HTTP binds 127.0.0.1 only; resumable SSE streams, so a client that loses a call's stream
tries ``Last-Event-ID`` first).

Every call of a tool appends the tool's name to the file named by ``FLAKY_LOG``: the file
outlives the process, so a test counts how many times a tool really ran across restarts.
A call with ``hang=True`` that is the first run of its tool (one line in the log) never
answers: the test kills the server under it, or, with ``forget``, the server forgets the
session it runs in (its id answers HTTP 404 from then on, as after an expiry) and the call's
stream ends. Every other call answers at once.

Tools: ``lookup`` (``readOnlyHint``), ``put`` (``idempotentHint``), ``charge`` (no hint:
a repeat would charge twice), ``forget_others`` (HTTP: forget every other session), ``pid``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("flaky-test")
FORGET = "forget" in sys.argv[3:]


async def _run(name: str, hang: bool, ctx: Context) -> str:
    log = Path(os.environ["FLAKY_LOG"])
    with log.open("a") as f:
        f.write(name + "\n")
    runs = log.read_text().split().count(name)
    if runs > 1 or not hang:
        return f"{name} ran {runs} times"
    if FORGET:
        request = ctx.request_context.request
        session_id = request.headers.get("mcp-session-id") if request is not None else None
        manager = server.session_manager
        transport = manager._server_instances.get(session_id or "")  # a test server may peek
        if transport is not None:
            await manager._discard_session(session_id or "", transport)
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(key: str, ctx: Context, hang: bool = False) -> str:
    """Look a key up (changes nothing)."""
    return await _run("lookup", hang, ctx)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=True))
async def put(key: str, value: str, ctx: Context, hang: bool = False) -> str:
    """Store a value (the same call twice has the effect of one)."""
    return await _run("put", hang, ctx)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
async def charge(amount: int, ctx: Context, hang: bool = False) -> str:
    """Charge an amount (each call charges again)."""
    return await _run("charge", hang, ctx)


@server.tool()
async def forget_others(ctx: Context) -> int:
    """Forget every session but the caller's, as expiries would; how many were forgotten."""
    request = ctx.request_context.request
    mine = request.headers.get("mcp-session-id") if request is not None else None
    manager = server.session_manager
    others = [(sid, t) for sid, t in manager._server_instances.items() if sid != mine]
    for session_id, transport in others:
        await manager._discard_session(session_id, transport)
    return len(others)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
        return
    from agentkit.mcp._event_store import memory_event_store

    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=int(sys.argv[2]),
        event_store=memory_event_store(),
        retry_interval=50,  # resume a lost stream soon (ms): the test need not wait
    )


if __name__ == "__main__":
    main()

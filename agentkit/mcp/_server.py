"""Serve any ``Toolkit`` as an MCP server, over stdio or streamable HTTP.

The server lists the toolkit's *active* tools with their JSON schemas passed through
unchanged, and runs calls through ``Toolkit.call_tool_function``: the same validation,
timeouts and error conversion as a local call. Progress chunks become MCP progress
notifications when the client asked for them (sent a progress token); an error result
becomes ``isError: true``; text, image and audio blocks become MCP content. A client's
``notifications/cancelled`` cancels the running tool (its subprocesses included).

The mcp SDK is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agentkit.mcp._http_auth import (
    BearerTokenMiddleware,
    check_bind,
    resolve_token,
    security_settings,
    startup_message,
)

if TYPE_CHECKING:
    import uvicorn
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette

    from agentkit.mcp._app import MCPApp
    from agentkit.tools import Toolkit

__all__ = ["build_http_app", "build_server", "serve", "serve_stdio"]

Transport = Literal["stdio", "streamable_http"]
# What a served tool registered with ``requires_approval`` does: "refuse" hides it and refuses
# calls (the server has nobody to ask); "client" serves it, trusting the MCP client's host to
# ask its user before each call (as desktop MCP hosts do).
Approval = Literal["refuse", "client"]
# Seconds an HTTP server waits for open requests (SSE streams) when asked to stop.
_GRACEFUL_SHUTDOWN_S = 3


def build_server(
    toolkit: Toolkit,
    *,
    name: str = "agentkit",
    version: str | None = None,
    instructions: str | None = None,
    approval: Approval = "refuse",
) -> Server:
    """Build (without running) a lowlevel MCP ``Server`` exposing ``toolkit``'s active tools.

    Args:
        toolkit: The tools to serve; group activation changes are seen on the next list.
        name: Server name reported to clients.
        version: Server version reported to clients (default: agentkit's version).
        instructions: Optional instructions for the client's model.
        approval: Tools registered with ``requires_approval``: ``"refuse"`` (default) leaves
            them unlisted and refuses calls to them, since an MCP server has no human to ask;
            ``"client"`` serves them, trusting the MCP client to ask its user first.

    Returns:
        An ``mcp.server.lowlevel.Server``; run it with ``server.run(read, write, ...)``, or use
        :func:`serve` / :func:`build_http_app`.
    """
    from agentkit.mcp._app import MCPApp

    app = MCPApp(toolkit, name=name, version=version, instructions=instructions, approval=approval)
    return app.build_server()


def build_http_app(
    toolkit: Toolkit | MCPApp,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    json_response: bool = False,
    stateless: bool = False,
    name: str = "agentkit",
    instructions: str | None = None,
    approval: Approval = "refuse",
    token: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    resumable: bool = True,
    retry_interval_ms: int | None = None,
) -> Starlette:
    """Build a Starlette (ASGI) app serving ``toolkit`` over streamable HTTP at ``path``.

    ``Host`` and ``Origin`` headers are checked on every bind (DNS-rebinding protection):
    loopback names, ``host`` itself (this machine's names for ``0.0.0.0``) and
    ``allowed_hosts`` are accepted.

    Args:
        toolkit: The tools to serve.
        path: URL path of the MCP endpoint.
        host: Host the app will be served on (see above).
        json_response: Answer with plain JSON instead of SSE streams.
        stateless: No MCP session ids (every request stands alone).
        name: Server name reported to clients.
        instructions: Optional instructions for the client's model.
        approval: Tools registered with ``requires_approval``: see :func:`build_server`.
        token: Require ``Authorization: Bearer <token>`` on every request (401 otherwise).
        allowed_hosts: Extra ``Host`` values to accept (``name`` or ``name:port``), e.g. the
            name a reverse proxy forwards.
        resumable: Keep recent SSE events in memory so a client that lost a stream resumes
            it with ``Last-Event-ID`` (SEP-1699).
        retry_interval_ms: The ``retry:`` reconnection delay sent to SSE clients.

    Returns:
        The app; run it with uvicorn or mount it in your own ASGI application (its lifespan
        must run).
    """
    from agentkit.mcp._event_store import memory_event_store

    server = _server_for(toolkit, name=name, instructions=instructions, approval=approval)
    app = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        host=host,
        transport_security=security_settings(host, allowed_hosts),
        event_store=memory_event_store() if resumable and not stateless else None,
        retry_interval=retry_interval_ms,
    )
    if token:
        app.add_middleware(BearerTokenMiddleware, token=token)
    app.add_middleware(TrimmedHeaderValues)  # outermost: every check sees trimmed values
    return app


class TrimmedHeaderValues:
    """ASGI middleware: header values without the whitespace around them (RFC 9110 5.5).

    HTTP field values exclude leading and trailing optional whitespace (SP, HTAB); not every
    server under uvicorn strips it, and the SDK compares ``Mcp-Name`` with the body's name
    verbatim, so ``Mcp-Name:  tool  `` would be refused. A value that needs its spaces is
    Base64-encoded by the client (SEP-2243), so trimming never changes one.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(name, value.strip(b" \t")) for name, value in scope["headers"]]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def _server_for(
    toolkit: Toolkit | MCPApp, *, name: str, instructions: str | None, approval: Approval
) -> Server:
    from agentkit.mcp._app import MCPApp

    if isinstance(toolkit, MCPApp):
        return toolkit.build_server()
    return build_server(toolkit, name=name, instructions=instructions, approval=approval)


async def serve(
    toolkit: Toolkit | MCPApp,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "agentkit",
    instructions: str | None = None,
    log_level: str = "warning",
    approval: Approval = "refuse",
    token: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    retry_interval_ms: int | None = None,
    json_response: bool = False,
    stateless: bool = False,
) -> None:
    """Serve ``toolkit`` over MCP until the client disconnects (stdio) or cancellation.

    Over HTTP, a bind to anything but loopback is refused without a bearer token, and the
    URL and auth mode are printed to stderr at startup.

    Args:
        toolkit: The tools to serve, or an :class:`~agentkit.mcp._app.MCPApp` (then ``name``,
            ``instructions`` and ``approval`` come from the app).
        transport: ``"stdio"`` (this process's stdin/stdout) or ``"streamable_http"``.
        host: HTTP bind address (streamable HTTP only); loopback by default.
        port: HTTP port (streamable HTTP only).
        path: URL path of the MCP endpoint (streamable HTTP only).
        name: Server name reported to clients.
        instructions: Optional instructions for the client's model.
        log_level: uvicorn log level (streamable HTTP only; logs go to stderr).
        approval: Tools registered with ``requires_approval``: ``"refuse"`` (default: not
            listed, calls refused) or ``"client"`` (served; the MCP client asks its user).
        token: Bearer token required from HTTP clients (default: the
            ``AGENTKIT_MCP_TOKEN`` environment variable; none on loopback if unset).
        allowed_hosts: Extra ``Host`` header values to accept (HTTP only).
        retry_interval_ms: SSE ``retry:`` delay sent to clients (HTTP only).
        json_response: Answer with plain JSON instead of SSE streams (HTTP only).
        stateless: No MCP sessions: every request stands alone (HTTP only).

    Raises:
        ValueError: Unknown transport, or a non-loopback ``host`` without a token.
    """
    if transport == "stdio":
        server = _server_for(toolkit, name=name, instructions=instructions, approval=approval)
        await serve_stdio(server)
        return
    if transport != "streamable_http":
        raise ValueError(f"unknown transport {transport!r}; use 'stdio' or 'streamable_http'")
    token = resolve_token(token)
    check_bind(host, token)
    app = build_http_app(toolkit, path=path, host=host, name=name, instructions=instructions,
                         approval=approval, token=token, allowed_hosts=allowed_hosts,
                         retry_interval_ms=retry_interval_ms, json_response=json_response,
                         stateless=stateless)  # fmt: skip
    await _serve_http_app(app, host, port, path, token, log_level)


async def _serve_http_app(
    app: Starlette, host: str, port: int, path: str, token: str | None, log_level: str
) -> None:
    """Announce the endpoint on stderr, then run ``app`` under uvicorn until cancelled."""
    import uvicorn

    print(startup_message(host, port, path, token), file=sys.stderr, flush=True)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_S,
    )
    await _run_uvicorn(uvicorn.Server(config))


async def serve_stdio(server: Server) -> None:
    """Run ``server`` over this process's stdin/stdout until EOF, SIGINT or SIGTERM.

    The signals stop it at once (running tools are cancelled, their child processes
    killed), even while the client keeps stdin open.
    """
    if sys.platform == "win32":  # pragma: no cover - the SDK transport there
        from mcp.server.stdio import stdio_server
    else:
        from agentkit.mcp._stdio_server import stdio_server

    async with anyio.create_task_group() as tg:
        if threading.current_thread() is threading.main_thread():
            tg.start_soon(_stop_on_signals, tg.cancel_scope)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _run_uvicorn(server: uvicorn.Server) -> None:
    """Run uvicorn until it stops by itself or we are cancelled, then shut it down cleanly.

    Cancelling ``Server.serve()`` directly would skip its shutdown and leak the listening
    socket and open connections; instead it runs shielded in a task of its own, and
    cancellation asks it to exit (``should_exit``), which it does within the grace period.
    """
    stopped = anyio.Event()

    async def run() -> None:
        try:
            with anyio.CancelScope(shield=True):
                await server.serve()
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await stopped.wait()
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(_GRACEFUL_SHUTDOWN_S + 5):
                    await stopped.wait()
                server.force_exit = True  # still running: stop waiting for anything
                await stopped.wait()

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
import uuid
from collections.abc import Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agentkit.mcp.http_auth import (
    BearerTokenMiddleware,
    check_bind,
    resolve_token,
    security_settings,
    startup_message,
)
from agentkit.messages import ToolUseBlock
from agentkit.tools.response import ToolResponse

if TYPE_CHECKING:
    import uvicorn
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette

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
) -> Server[Any]:
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
    from mcp import types
    from mcp.server.lowlevel import Server

    from agentkit import __version__

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schemas = toolkit.get_json_schemas()
        return types.ListToolsResult(
            tools=[_mcp_tool(s) for s in schemas if not refused(s["function"]["name"])]
        )

    def refused(tool_name: str) -> bool:
        tool = toolkit.get_tool(tool_name)
        return approval != "client" and tool is not None and tool.requires_approval

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if refused(params.name):
            text = (
                f"Error: the tool {params.name!r} needs a human's approval before each call, "
                "which this MCP server cannot ask for; it is not served."
            )
            return types.CallToolResult(content=[_text(text)], is_error=True)
        final = await _run_tool(toolkit, ctx, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=_mcp_content(final), is_error=final.is_error)

    return Server(
        name,
        version=version or __version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _run_tool(
    toolkit: Toolkit, ctx: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any]
) -> ToolResponse:
    """Run one call through the Toolkit, relaying its progress chunks to the client."""
    block = ToolUseBlock(type="tool_use", id=f"mcp-{uuid.uuid4().hex}", name=name, input=arguments)
    final: ToolResponse | None = None
    step = 0.0
    async with aclosing(toolkit.call_tool_function(block)) as chunks:
        async for chunk in chunks:
            if chunk.is_last:
                final = chunk
                continue
            step, total = _progress(chunk, step)
            # A no-op unless the client sent a progress token with this call.
            await ctx.session.report_progress(step, total, chunk.get_text() or None)
    # The Toolkit contract promises a final chunk; never answer nothing.
    return final or ToolResponse.error(f"tool {name!r} produced no result")


def build_http_app(
    toolkit: Toolkit,
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

    Returns:
        The app; run it with uvicorn or mount it in your own ASGI application (its lifespan
        must run).
    """
    server = build_server(toolkit, name=name, instructions=instructions, approval=approval)
    app = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        host=host,
        transport_security=security_settings(host, allowed_hosts),
    )
    if token:
        app.add_middleware(BearerTokenMiddleware, token=token)
    return app


async def serve(
    toolkit: Toolkit,
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
) -> None:
    """Serve ``toolkit`` over MCP until the client disconnects (stdio) or cancellation.

    Over HTTP, a bind to anything but loopback is refused without a bearer token, and the
    URL and auth mode are printed to stderr at startup.

    Args:
        toolkit: The tools to serve.
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

    Raises:
        ValueError: Unknown transport, or a non-loopback ``host`` without a token.
    """
    if transport == "stdio":
        server = build_server(toolkit, name=name, instructions=instructions, approval=approval)
        await serve_stdio(server)
    elif transport == "streamable_http":
        import uvicorn

        token = resolve_token(token)
        check_bind(host, token)
        app = build_http_app(
            toolkit,
            path=path,
            host=host,
            name=name,
            instructions=instructions,
            approval=approval,
            token=token,
            allowed_hosts=allowed_hosts,
        )
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
    else:
        raise ValueError(f"unknown transport {transport!r}; use 'stdio' or 'streamable_http'")


async def serve_stdio(server: Server[Any]) -> None:
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


def _progress(chunk: ToolResponse, previous: float) -> tuple[float, float | None]:
    """The chunk's own progress counter if it has one, else one more than the last.

    MCP requires the progress value to increase with every notification.
    """
    meta = chunk.metadata or {}
    value, total = meta.get("progress"), meta.get("total")
    step = float(value) if isinstance(value, int | float) and value > previous else previous + 1
    return step, float(total) if isinstance(total, int | float) else None


def _mcp_tool(schema: dict[str, Any]) -> types.Tool:
    from mcp import types

    fn = schema["function"]
    return types.Tool(
        name=fn["name"],
        description=fn.get("description") or None,
        input_schema=fn.get("parameters") or {"type": "object", "properties": {}},
    )


def _text(text: str) -> types.TextContent:
    from mcp import types

    return types.TextContent(type="text", text=text)


def _mcp_content(response: ToolResponse) -> list[types.ContentBlock]:
    from mcp import types

    out: list[types.ContentBlock] = []
    for block in response.content:
        if block["type"] == "text":
            out.append(types.TextContent(type="text", text=block["text"]))
            continue
        source = block["source"]
        if source["type"] == "url":  # MCP carries media inline only: pass the link as text
            out.append(types.TextContent(type="text", text=f"[{block['type']}: {source['url']}]"))
        elif block["type"] == "image":
            data, mime = source["data"], source["media_type"]
            out.append(types.ImageContent(type="image", data=data, mime_type=mime))
        else:
            data, mime = source["data"], source["media_type"]
            out.append(types.AudioContent(type="audio", data=data, mime_type=mime))
    return out

"""Streaming tool calls: progress notifications become chunks, cancellation reaches the server.

The request runs in a task spawned into the connection's runner task group, and the caller's
async generator only reads a memory stream. That keeps task groups out of the generator (an
async generator must not yield inside a task group or cancel scope it opened), and lets the
generator cancel the request when its consumer is cancelled: the SDK then writes
``notifications/cancelled`` before the task ends.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from agentkit.mcp._convert import result_to_response
from agentkit.mcp._defenses import cap_result
from agentkit.mcp._tasks import requires_tasks
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp import Client

    from agentkit.mcp._client import MCPClient
    from agentkit.mcp._connection import Connection

__all__ = ["call_once", "call_stream"]

_CANCEL_WAIT = 2.0  # bound on waiting for the courtesy notifications/cancelled to be written


def progress_sender(
    send: MemoryObjectSendStream[ToolResponse],
) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    """The SDK's progress callback for one streamed call: each notification becomes a chunk.

    A notification that arrives after the call's final result (the server sent it late) or
    after the caller stopped reading has nowhere to go: it is dropped, never raised inside
    the SDK's callback (where it would break the session's message loop).
    """

    async def progress(value: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait(_progress_chunk(value, total, message))

    return progress


def _progress_chunk(progress: float, total: float | None, message: str | None) -> ToolResponse:
    amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    if message and not total:
        # A bare counter says nothing next to a message (often streamed output, such as a
        # served shell tool's lines): keep the text as sent; the counter stays in metadata.
        text = message
    else:
        text = f"{message} ({amount})" if message else f"progress {amount}"
    return ToolResponse.text(
        text, is_last=False, metadata={"progress": progress, "total": total, "message": message}
    )


def _error_for(exc: Exception, client: MCPClient, conn: Connection, name: str) -> ToolResponse:
    """Map a failed request to an error response; mark the connection broken if it is."""
    from mcp import MCPError as SDKError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    meta: dict[str, object] = {"mcp_server": client.name, "mcp_tool": name}
    if conn.session_lost:
        meta["mcp_session_lost"] = True
        return ToolResponse.error(
            f"MCP server {client.name!r} lost our session ({conn.broken_reason}); "
            "it will be reconnected on the next call",
            metadata=meta,
        )
    if isinstance(exc, SDKError) and exc.code == REQUEST_TIMEOUT:
        return ToolResponse.error(
            f"MCP tool {name!r} timed out (server {client.name!r} did not answer in time)",
            metadata=meta,
        )
    if isinstance(exc, SDKError) and exc.code != CONNECTION_CLOSED:
        text = f"MCP error {exc.code}: {exc.message}"
        urls = _elicitation_urls(exc.data)
        if urls:  # URL_ELICITATION_REQUIRED: the user must open these, then retry
            text += "\nThe user must open: " + ", ".join(urls)
            meta["elicitation_urls"] = urls
        if requires_tasks(exc):  # the server runs this tool only as a task: not run yet
            meta["mcp_requires_tasks"] = True
        return ToolResponse.error(text, metadata=meta)
    lost = (
        isinstance(exc, SDKError | anyio.BrokenResourceError | anyio.ClosedResourceError | OSError)
        or type(exc).__module__.startswith("httpx2")
        or not conn.healthy
    )
    if lost:
        conn.broken = True
        why = conn.broken_reason or str(exc)
        return ToolResponse.error(
            f"MCP server {client.name!r} connection was lost during the call to {name!r} "
            f"({why}); it will be reconnected on the next call",
            metadata=meta,
        )
    return ToolResponse.error(f"MCP tool {name!r} failed: {exc}", metadata=meta)


def _elicitation_urls(data: object) -> list[str]:
    """URLs named by a URL_ELICITATION_REQUIRED error's data, if any."""
    items = data.get("elicitations") if isinstance(data, dict) else None
    return [str(i["url"]) for i in items or [] if isinstance(i, dict) and i.get("url")]


async def _request(
    session: Client,
    name: str,
    arguments: dict[str, object],
    read_timeout: float | None,
    progress: Any,
    meta: dict[str, object] | None,
) -> Any:
    # ``meta`` goes out as the request's ``_meta`` (trace context, app keys) untouched.
    wire_meta: Any = meta  # RequestParamsMeta is a TypedDict with extra items: any JSON dict
    return await session.call_tool(
        name,
        arguments,
        read_timeout_seconds=read_timeout,
        progress_callback=progress,
        meta=wire_meta,
    )


async def call_once(
    client: MCPClient,
    name: str,
    arguments: dict[str, object],
    read_timeout: float | None,
    meta: dict[str, object] | None = None,
) -> ToolResponse:
    """A call without progress streaming, awaited in the caller's task (no extra task).

    A server that forgot our session (HTTP 404: it restarted) never ran the call, so it is
    sent once more on a fresh session.
    """
    for attempt in range(2):
        conn = await client.live_connection()
        session = conn.client
        assert session is not None
        limit = read_timeout if read_timeout is not None else client.timeout
        try:
            result = await _request(session, name, arguments, limit, None, meta)
        except Exception as exc:
            if conn.session_lost and not attempt:
                continue
            return _error_for(exc, client, conn, name)
        return cap_result(result_to_response(result, client.name, name), client.max_result_chars)
    raise AssertionError("unreachable")  # pragma: no cover


async def call_stream(
    client: MCPClient,
    name: str,
    arguments: dict[str, object],
    read_timeout: float | None,
    meta: dict[str, object] | None = None,
) -> AsyncIterator[ToolResponse]:
    """The body of :meth:`MCPClient.call_tool_stream` (one retry on a lost session)."""
    for attempt in range(2):
        final: ToolResponse | None = None
        async for chunk in _stream_once(client, name, arguments, read_timeout, meta):
            if not chunk.is_last:
                yield chunk
            else:
                final = chunk
        assert final is not None
        if (final.metadata or {}).get("mcp_session_lost") and not attempt:
            continue
        yield final
        return


async def _stream_once(
    client: MCPClient,
    name: str,
    arguments: dict[str, object],
    read_timeout: float | None,
    meta: dict[str, object] | None,
) -> AsyncIterator[ToolResponse]:
    conn = await client.live_connection()
    session = conn.client
    assert session is not None
    send, receive = anyio.create_memory_object_stream[ToolResponse](math.inf)
    scope = anyio.CancelScope()
    done = anyio.Event()

    progress = progress_sender(send)

    async def run() -> None:
        try:
            with scope:
                try:
                    limit = read_timeout if read_timeout is not None else client.timeout
                    result = await _request(session, name, arguments, limit, progress, meta)
                    response = cap_result(
                        result_to_response(result, client.name, name), client.max_result_chars
                    )
                except Exception as exc:
                    response = _error_for(exc, client, conn, name)
                send.send_nowait(response)
        finally:
            send.close()
            done.set()

    if not conn.spawn(run):
        send.close()
        receive.close()
        yield ToolResponse.error(f"MCP server {client.name!r} is closing")
        return
    final: ToolResponse | None = None
    try:
        with receive:
            async for chunk in receive:
                if chunk.is_last:
                    final = chunk
                else:
                    yield chunk
    finally:
        if not done.is_set():
            scope.cancel()  # the SDK sends notifications/cancelled (shielded, bounded)
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
                await done.wait()
    if final is None:  # the connection went away under the call
        conn.broken = True
        why = f" ({conn.broken_reason})" if conn.broken_reason else ""
        final = ToolResponse.error(
            f"MCP server {client.name!r} closed the connection during the call to {name!r}"
            f"{why}; it will be reconnected on the next call"
        )
    yield final

"""Streaming tool calls: progress notifications become chunks, cancellation reaches the server.

The request runs in a task spawned into the connection's runner task group, and the caller's
async generator only reads a memory stream. That keeps task groups out of the generator (an
async generator must not yield inside a task group or cancel scope it opened), and lets the
generator cancel the request when its consumer is cancelled: the SDK then writes
``notifications/cancelled`` before the task ends.

Interrupted calls (see :func:`_fate`): a request the server refused with HTTP 404 for a
session it forgot, or whose HTTP connection never opened, never ran, so it is sent again
on a new session. A request that was running when the connection dropped (a killed
server, a stream that ended, a resumed stream answered 404) may have run: it is sent again,
once, only when the server marks the tool ``readOnlyHint`` or ``idempotentHint``;
otherwise it raises ``MCPCallInterrupted``. Every retry is logged, announced by a progress
chunk (streamed calls) and recorded in the final result's ``metadata["mcp_retried"]``,
which a durable run's step log keeps with the result. A call that ``client.close()`` cut
short is neither sent again nor reported as interrupted.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agentkit.exceptions import MCPCallInterrupted
from agentkit.mcp._convert import result_to_response
from agentkit.mcp._defenses import cap_result
from agentkit.mcp._tasks import requires_tasks
from agentkit.mcp._wire import CallWire, watching
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
    if _broke_connection(exc, conn):
        conn.broken = True
        why = conn.broken_reason or str(exc)
        return ToolResponse.error(
            f"MCP server {client.name!r} connection was lost during the call to {name!r} "
            f"({why}); it will be reconnected on the next call",
            metadata=meta,
        )
    return ToolResponse.error(f"MCP tool {name!r} failed: {exc}", metadata=meta)


def _broke_connection(exc: Exception, conn: Connection) -> bool:
    """Whether ``exc`` (no JSON-RPC answer from the server) means the connection is gone."""
    from mcp import MCPError as SDKError

    return (
        isinstance(exc, SDKError | anyio.BrokenResourceError | anyio.ClosedResourceError | OSError)
        or type(exc).__module__.startswith("httpx2")
        or not conn.healthy
    )


Fate = Literal["session_lost", "not_sent", "lost"]


def _fate(exc: Exception | None, conn: Connection, wire: CallWire) -> Fate | None:
    """How a failed ``tools/call`` attempt ended, for the retry decision.

    ``"session_lost"``: the server answered the call's own POST with HTTP 404 for our
    session; ``"not_sent"``: its connection never opened (both: it never ran, see
    :mod:`agentkit.mcp._wire`). ``"lost"``: the connection broke while the call was out
    (``exc`` None: the stream ended without an answer), so it may have run; a 404 to a
    resumed stream (``Last-Event-ID``) of a call in flight is this case. None: the server
    (or our timeout) answered, nothing was interrupted.
    """
    from mcp import MCPError as SDKError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if wire.refused:
        return "session_lost"
    if wire.unsent:
        return "not_sent"
    if exc is None:
        return "lost"
    if isinstance(exc, SDKError) and exc.code == REQUEST_TIMEOUT:
        return None
    if isinstance(exc, SDKError) and exc.code != CONNECTION_CLOSED:
        return None  # a JSON-RPC error the server sent
    return "lost" if _broke_connection(exc, conn) else None


def _decide_retry(
    client: MCPClient,
    name: str,
    fate: Fate | None,
    hint: str | None,
    conn: Connection,
    exc: Exception | None,
    attempt: int,
) -> dict[str, object] | None:
    """The record of a retry to make now, or None (the failure is the call's result).

    Raises:
        MCPCallInterrupted: the call may have run and a repeat is not known to be harmless.
    """
    if fate is None or client.closed:  # closed: the application itself cut the call
        return None
    conn.broken = True  # the next request reconnects (and re-initializes)
    detail = conn.broken_reason or _describe(exc)
    if fate == "lost" and hint is None:
        raise MCPCallInterrupted(client.name, name, detail)
    if attempt:  # once only: a second failure is the call's result
        return None
    why = "it never ran" if fate != "lost" else f"the tool is marked {hint}"
    client.logger.warning(
        "MCP server %r: %s during the call to %r; reconnecting and sending it again (%s)",
        client.name,
        detail,
        name,
        why,
    )
    return {
        "reason": "connection_lost" if fate == "lost" else fate,
        "safe_because": hint if fate == "lost" else "not_run",
        "detail": detail,
    }


def _describe(exc: Exception | None) -> str:
    if exc is None:
        return "the stream ended without an answer"
    return str(getattr(exc, "message", "") or exc) or type(exc).__name__


def _recorded(response: ToolResponse, retried: dict[str, object] | None) -> ToolResponse:
    """``response`` with the retry that led to it in its metadata (kept by durable logs)."""
    if retried is not None:
        response.metadata = {**(response.metadata or {}), "mcp_retried": retried}
    return response


def _retry_note(client: MCPClient, name: str, retried: dict[str, object]) -> ToolResponse:
    """The progress chunk that tells a stream's consumer (a UI, the events) of a retry."""
    why = (
        "it never ran"
        if retried["safe_because"] == "not_run"
        else f"the tool is marked {retried['safe_because']}"
    )
    return ToolResponse.text(
        f"MCP server {client.name!r}: {retried['detail']}; reconnected, calling {name!r} "
        f"again ({why})",
        is_last=False,
        metadata={"mcp_retry": retried},
    )


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

    Interrupted calls are sent again or raise as the module docs say.
    """
    hint = client.retry_hint(name)  # the listing before the call: a reconnect may relist
    retried: dict[str, object] | None = None
    for attempt in range(2):
        conn = await client.live_connection()
        session = conn.client
        assert session is not None
        limit = read_timeout if read_timeout is not None else client.timeout
        try:
            with watching() as wire:
                result = await _request(session, name, arguments, limit, None, meta)
        except Exception as exc:
            fate = _fate(exc, conn, wire)
            record = _decide_retry(client, name, fate, hint, conn, exc, attempt)
            if record is not None:
                retried = record
                continue
            return _recorded(_error_for(exc, client, conn, name), retried)
        response = result_to_response(result, client.name, name)
        return _recorded(cap_result(response, client.max_result_chars), retried)
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class _Attempt:
    """How one streamed attempt failed, if it did (set by its request task)."""

    failed: bool = False
    exc: Exception | None = None
    conn: Connection | None = None
    wire: CallWire = field(default_factory=CallWire)


async def call_stream(
    client: MCPClient,
    name: str,
    arguments: dict[str, object],
    read_timeout: float | None,
    meta: dict[str, object] | None = None,
) -> AsyncIterator[ToolResponse]:
    """The body of :meth:`MCPClient.call_tool_stream` (interrupted calls: module docs)."""
    hint = client.retry_hint(name)
    retried: dict[str, object] | None = None
    for attempt in range(2):
        final: ToolResponse | None = None
        outcome = _Attempt()
        async for chunk in _stream_once(client, name, arguments, read_timeout, meta, outcome):
            if not chunk.is_last:
                yield chunk
            else:
                final = chunk
        assert final is not None
        if outcome.failed and outcome.conn is not None:
            fate = _fate(outcome.exc, outcome.conn, outcome.wire)
            record = _decide_retry(client, name, fate, hint, outcome.conn, outcome.exc, attempt)
            if record is not None:
                retried = record
                yield _retry_note(client, name, record)
                continue
        yield _recorded(final, retried)
        return


async def _stream_once(
    client: MCPClient,
    name: str,
    arguments: dict[str, object],
    read_timeout: float | None,
    meta: dict[str, object] | None,
    outcome: _Attempt,
) -> AsyncIterator[ToolResponse]:
    conn = await client.live_connection()
    outcome.conn = conn
    session = conn.client
    assert session is not None
    send, receive = anyio.create_memory_object_stream[ToolResponse](math.inf)
    scope = anyio.CancelScope()
    done = anyio.Event()

    progress = progress_sender(send)

    async def run() -> None:
        try:
            with scope, watching() as wire:
                outcome.wire = wire
                try:
                    limit = read_timeout if read_timeout is not None else client.timeout
                    result = await _request(session, name, arguments, limit, progress, meta)
                    response = cap_result(
                        result_to_response(result, client.name, name), client.max_result_chars
                    )
                except Exception as exc:
                    outcome.failed, outcome.exc = True, exc
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
        outcome.failed = True
        conn.broken = True
        why = f" ({conn.broken_reason})" if conn.broken_reason else ""
        final = ToolResponse.error(
            f"MCP server {client.name!r} closed the connection during the call to {name!r}"
            f"{why}; it will be reconnected on the next call"
        )
    yield final

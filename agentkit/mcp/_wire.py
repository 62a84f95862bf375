"""What the streamable-HTTP transport saw of the ``tools/call`` request of one call attempt.

Deciding whether an interrupted call may be sent again needs to know whether the server
can have run it. Two HTTP outcomes prove it did not: the server answered the call's own
POST with 404 for our session (it forgot the session: the spec says the request was not
processed), or the connection for that POST could not even be opened. Any other failure
(a stream that ended mid-call, a resumed stream answered 404) may come after the run.

The SDK sends each request from a task running in a copy of the sender's context, so a
call attempt puts a fresh :class:`CallWire` in a context variable and the transport's hooks
(response hook, transport wrapper; see ``agentkit.mcp._config``) record into it. They
record only a POST whose JSON-RPC method is ``tools/call``: other requests a call's context
sends (a reply to the server's sampling request) say nothing about the call itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["CallWire", "note_refused", "note_unsent", "recording_transport", "watching"]


@dataclass
class CallWire:
    """One call attempt's HTTP facts (set by the transport hooks)."""

    refused: bool = False  # its POST got 404 for our session: never run
    unsent: bool = False  # its POST's connection could not be opened: never sent


_CURRENT: contextvars.ContextVar[CallWire | None] = contextvars.ContextVar(
    "agentkit_mcp_call_wire", default=None
)


@contextlib.contextmanager
def watching() -> Iterator[CallWire]:
    """A fresh record for the requests this context sends until the block ends."""
    wire = CallWire()
    token = _CURRENT.set(wire)
    try:
        yield wire
    finally:
        _CURRENT.reset(token)


def _is_tool_call(request: Any) -> bool:
    """Whether an httpx2 request is the POST of a ``tools/call`` (parsed only when needed)."""
    if request.method != "POST":
        return False
    try:
        body = json.loads(request.content)
    except (ValueError, TypeError, RuntimeError):  # RuntimeError: a streamed body
        return False
    return isinstance(body, dict) and body.get("method") == "tools/call"


def note_refused(request: Any) -> None:
    """The server answered ``request`` with 404 for our session."""
    wire = _CURRENT.get()
    if wire is not None and _is_tool_call(request):
        wire.refused = True


def note_unsent(request: Any) -> None:
    """The connection for ``request`` could not be opened: nothing reached the server."""
    wire = _CURRENT.get()
    if wire is not None and _is_tool_call(request):
        wire.unsent = True


def recording_transport() -> Any:
    """httpx2's default transport, noting a ``tools/call`` whose connection never opened."""
    import httpx2

    class _NoteUnsent(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            try:
                return await self._inner.handle_async_request(request)
            except (httpx2.ConnectError, httpx2.ConnectTimeout):  # no byte was sent
                note_unsent(request)
                raise

        async def aclose(self) -> None:
            await self._inner.aclose()

    return _NoteUnsent()

"""The loopback redirect listener of the OAuth authorization-code flow (RFC 8252 §7.3).

After the user approves access in a browser, the authorization server redirects the browser
to ``http://127.0.0.1:PORT/callback?code=...&state=...``. This module listens there, on the
loopback interface only, for exactly that request. What it refuses, and why:

- another path (a browser's ``/favicon.ico``): 404, keep waiting;
- a ``state`` other than the one in the authorization URL we opened: 400, keep waiting. A
  local process that guesses the port cannot end (or hijack) the flow; it never learns the
  state;
- an ``error=`` redirect with the right state (the user clicked *deny*): the flow ends with
  the server's error;
- anything malformed (a target that does not parse, a state that is not ASCII or not even
  UTF-8): 400, keep waiting. Only the real redirect, or the user's denial, ends the flow.

A small hand-written HTTP/1.1 reader is enough: one GET line and its headers, bounded in
size and time, and no dependency on a web framework.
"""

from __future__ import annotations

import contextlib
import html
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

import anyio
import anyio.abc

__all__ = ["CallbackResult", "LoopbackError", "wait_for_redirect"]

_MAX_REQUEST = 16 * 1024  # a request line plus headers; a redirect is far smaller
_READ_TIMEOUT = 10.0  # per connection: a silent client must not stall the listener


class LoopbackError(Exception):
    """The redirect listener could not start, or the authorization server sent an error."""


@dataclass(frozen=True, slots=True)
class CallbackResult:
    """What the authorization server handed back through the browser."""

    code: str
    state: str
    iss: str | None


_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body style='font-family: sans-serif; margin: 3em'><h1>{title}</h1><p>{text}</p>"
    "</body></html>"
)


async def _read_head(stream: anyio.abc.ByteStream) -> bytes:
    data = b""
    with anyio.move_on_after(_READ_TIMEOUT):
        while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST:
            try:
                chunk = await stream.receive(4096)
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                break
            data += chunk
    return data


async def _answer(stream: anyio.abc.ByteStream, status: str, title: str, text: str) -> None:
    body = _PAGE.format(title=html.escape(title), text=html.escape(text)).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    ).encode()
    # The browser may have gone away; the result (if any) still counts.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(head + body)


def _judge(head: bytes, path: str, state: str) -> tuple[str, CallbackResult | str | None]:
    """The HTTP status for one request and what it means for the flow.

    Returns ``(status, outcome)``: a :class:`CallbackResult` (done), an error text from the
    authorization server (done, failed), or None (not for us: keep waiting).
    """
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET":
        return "405 Method Not Allowed", None
    try:
        target = urlparse(parts[1])
    except ValueError:  # e.g. an unclosed "[" host: a stranger's request, not the redirect
        return "400 Bad Request", None
    if target.path != path:
        return "404 Not Found", None
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    # Compared as bytes: compare_digest refuses non-ASCII str, and a forged state must be
    # one more wrong guess, not an exception that ends the login.
    if not secrets.compare_digest(query.get("state", "").encode(), state.encode()):
        return "400 Bad Request", None
    if "error" in query:
        described = query.get("error_description")
        return "200 OK", query["error"] + (f": {described}" if described else "")
    if not query.get("code"):
        return "400 Bad Request", None
    return "200 OK", CallbackResult(query["code"], query["state"], query.get("iss"))


async def wait_for_redirect(
    host: str,
    port: int,
    path: str,
    state: str,
    open_url: Callable[[], Awaitable[None]],
) -> CallbackResult:
    """Listen on ``host:port``, call ``open_url`` and wait for the redirect to ``path``.

    Args:
        host: Loopback address to bind (``127.0.0.1``).
        port: The port registered in the redirect URI.
        path: The redirect URI's path.
        state: The ``state`` of the authorization request: other values are ignored.
        open_url: Shows the authorization URL to the user (runs once the port is bound,
            concurrently with the listener, so a browser that follows the redirect at once
            finds it up).

    It waits as long as it takes: bound it with ``anyio.fail_after`` (the user may be slow).

    Raises:
        LoopbackError: the port cannot be bound, or the user denied access.
    """
    try:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as exc:
        raise LoopbackError(
            f"cannot listen for the OAuth redirect on {host}:{port} ({exc.strerror or exc}); "
            "free the port or choose another with OAuth(redirect_port=...)"
        ) from None
    outcome: list[CallbackResult | str] = []
    failure: list[Exception] = []
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, _handler(path, state, outcome, tg.cancel_scope), tg)
        try:
            await open_url()
        except Exception as exc:  # reported below, with the flow ended
            failure.append(exc)
            tg.cancel_scope.cancel()
    if failure and not outcome:
        raise LoopbackError(f"showing the authorization URL failed: {failure[0]!r}") from (
            failure[0]
        )
    assert outcome  # the task group only ends early through a result or a failure
    if isinstance(outcome[0], str):
        raise LoopbackError(f"the authorization server refused access: {outcome[0]}")
    return outcome[0]


def _handler(
    path: str, state: str, outcome: list[CallbackResult | str], done: anyio.CancelScope
) -> Callable[[anyio.abc.SocketStream], Awaitable[None]]:
    """Answer one connection; on the redirect we wait for, record it and stop listening."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            status, result = _judge(await _read_head(stream), path, state)
            if isinstance(result, CallbackResult):
                await _answer(stream, status, "Authorized", "You can close this tab.")
            elif isinstance(result, str):
                await _answer(stream, status, "Authorization failed", result)
            else:
                await _answer(stream, status, "Not found", "Nothing here.")
                return
        if not outcome:
            outcome.append(result)
        done.cancel()

    return handle

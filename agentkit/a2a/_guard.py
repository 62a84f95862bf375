r"""The A2A endpoint's front door: bearer token, body size, and input that must never be stored.

A pure ASGI middleware in front of the SDK's JSON-RPC route. It reads the whole request
body (up to ``max_body`` bytes), and refuses with a JSON-RPC error, before the SDK sees
anything (so nothing is stored):

* a body over the limit (a 10 MB part): ``-32600`` "payload too large" (HTTP 200, as the
  SDK answers its own JSON-RPC errors);
* JSON that is not valid UTF-8, nests deeper than ``MAX_DEPTH``, or holds a lone surrogate
  (``"\\ud800"``) in a string or a key: ``-32602`` (``-32700`` when it is not JSON at all).

A request without ``Authorization: Bearer <token>`` (when a token is set) is answered 401;
the agent card stays public (it says how to authenticate).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["DEFAULT_MAX_BODY", "MAX_DEPTH", "Guard"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY = 2 * 1024 * 1024
"""Largest accepted request body, in bytes."""
MAX_DEPTH = 64
"""Deepest accepted nesting of JSON arrays and objects in a request."""


class InputRefused(ValueError):
    """A request body refused before the SDK parses it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.request_id: object = None


def check_json(body: bytes) -> Any:
    """Parse ``body``; refuse deep nesting, lone surrogates and invalid UTF-8.

    Raises:
        InputRefused: with the JSON-RPC error code to answer.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRefused(-32700, f"the body is not valid UTF-8: {exc.reason}") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputRefused(-32602, f"the request nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InputRefused(-32700, f"the body is not JSON: {exc}") from None
    try:
        _walk(value)
    except InputRefused as exc:
        exc.request_id = value.get("id") if isinstance(value, dict) else None
        raise
    return value


def _walk(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise InputRefused(-32602, f"the request nests deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputRefused(
            -32602, "the request holds a lone surrogate (text that is not valid Unicode)"
        ) from None


def rpc_error(request_id: object, code: int, message: str) -> bytes:
    """A JSON-RPC 2.0 error response body."""
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body).encode()


class Guard:
    """The ASGI middleware (see the module docs).

    Args:
        app: The app behind it.
        token: The bearer token every request but the agent card must carry (None: none).
        max_body: Largest accepted body, in bytes.
        public_paths: Paths served without the token (the agent card).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body: int = DEFAULT_MAX_BODY,
        public_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.public_paths = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") not in self.public_paths and not self._authorized(scope):
            await _respond(
                send,
                401,
                rpc_error(None, -32600, "a bearer token is required"),
                [(b"www-authenticate", b'Bearer realm="a2a"')],
            )
            return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                text = f"payload too large: the limit is {self.max_body} bytes"
                await _respond(send, 200, rpc_error(None, -32600, text))
                return
            if not message.get("more_body", False):
                break
        try:
            parsed = check_json(bytes(body))
        except InputRefused as exc:
            await _respond(send, 200, rpc_error(exc.request_id, exc.code, str(exc)))
            return
        del parsed  # the SDK parses the body again; this pass only refused what it must not see
        await self.app(scope, _replay(bytes(body), receive), send)

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and secrets.compare_digest(
                    given.strip(), self.token
                )
        return False


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands out ``body`` once, then the client's own messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # http.disconnect, for a streaming response

    return replay


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head + (headers or [])})
    await send({"type": "http.response.body", "body": body})

"""HTTP guards of the serve app: JSON errors, body size cap, Host/Origin checks, tokens.

Every refusal is a JSON body ``{"error": {"code": ..., "message": ...}}`` with a 4xx status.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
from collections.abc import AsyncGenerator, Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from agentkit._text import MAX_JSON_DEPTH, clean_json
from agentkit.serve._convert import ClientInputError

__all__ = [
    "LOOPBACK_HOSTS",
    "EventStreamResponse",
    "Guard",
    "error_response",
    "is_loopback",
    "read_json",
]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_MAX_BODY = 1024 * 1024


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts local connections."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The JSON error body every refusal uses."""
    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


class EventStreamResponse(Response):
    """An SSE response: each chunk of ``stream`` is one body write, encoded once.

    A plain send loop instead of Starlette's ``StreamingResponse``, which under ASGI servers
    before spec 2.4 (uvicorn) runs every response in a task group with a second task
    waiting for the client's disconnect: a task, a cancel scope and a ``receive`` per
    stream, for nothing a run needs (a run does not depend on its readers: one whose client
    left goes on to the run's end, its writes dropped by the server; a server that raises
    ``OSError`` on such a write ends the stream there).

    Args:
        stream: The encoded events, several in one chunk when they were ready together.
    """

    media_type = "text/event-stream"

    def __init__(self, stream: AsyncGenerator[str, None]) -> None:
        self.stream = stream
        self.status_code = 200
        self.background = None
        self.init_headers(_SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the headers, then every chunk as it comes, then the end of the body."""
        stream = self.stream
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in stream:
                await send(
                    {"type": "http.response.body", "body": chunk.encode(), "more_body": True}
                )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # ASGI 2.4: the client is gone
            return
        finally:
            await stream.aclose()


_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


# A JSON string (escapes included), matched without backtracking (possessive quantifiers).
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nests_too_deep(data: bytes) -> bool:
    """Whether JSON text ``data`` nests arrays/objects deeper than ``MAX_JSON_DEPTH``.

    Measured without parsing or recursion, linear in ``data`` and in C loops: strings are
    cut out, then the brackets outside them are summed.
    """
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return False  # the common case: too few brackets to nest that deep
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > (MAX_JSON_DEPTH)


def parse_client_json(data: bytes) -> Any:
    r"""A client's JSON body, bounded in depth and made valid Unicode.

    Nesting is measured before parsing (so neither the parser nor any later walk can run
    out of stack); lone surrogates (``\ud800`` escapes) become U+FFFD, so every text a
    client sends can be stored, sent to a model and streamed back.

    Raises:
        ClientInputError: 400 for malformed JSON or nesting deeper than ``MAX_JSON_DEPTH``.
    """
    if nests_too_deep(data):
        raise ClientInputError(
            400, "too_deep", f"the body nests deeper than {MAX_JSON_DEPTH} levels"
        )
    try:
        return clean_json(json.loads(data or b"null"))
    except ValueError as exc:
        raise ClientInputError(
            400, "malformed_json", f"the body is not valid JSON: {exc}"
        ) from None


async def read_json(request: Request, limit: int) -> Any:
    """The request body parsed by :func:`parse_client_json`, refusing bodies over ``limit``.

    Every JSON body of the API enters here: the one place where client data is bounded
    and cleaned.

    Raises:
        ClientInputError: 413 for an oversized body, 400 for malformed or too deep JSON.
    """
    declared = request.headers.get("content-length")
    too_big = ClientInputError(
        413, "body_too_large", f"request bodies are limited to {limit} bytes"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return parse_client_json(b"".join(chunks))


def _host_name(host_header: str) -> str:
    """``example.com:8000`` -> ``example.com``; ``[::1]:80`` -> ``::1``."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class Guard:
    """Authentication and anti-DNS-rebinding checks shared by every endpoint.

    Args:
        auth_token: None (no token: loopback use), one bearer token, or a mapping
            ``{token: user name}`` (each user owns their own threads).
        allowed_hosts: Host names the ``Host`` header may carry; None: loopback names only
            without a token, any host with one (the token is then the protection). ``"*"``
            accepts any.
        allowed_origins: Extra browser origins allowed to call the API (the page's own
            origin always is). Also the CORS allow-list.
    """

    def __init__(
        self,
        auth_token: str | Mapping[str, str] | None,
        allowed_hosts: Collection[str] | None,
        allowed_origins: Collection[str],
    ) -> None:
        if isinstance(auth_token, str):
            if not auth_token:
                raise ValueError("auth_token must not be empty")
            tokens: dict[str, str | None] = {auth_token: None}
        else:
            tokens = {str(k): str(v) for k, v in (auth_token or {}).items()}
        self.tokens = tokens
        if allowed_hosts is None:
            allowed_hosts = ("*",) if tokens else LOOPBACK_HOSTS
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        self.allowed_origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)

    def check_host(self, request: Request) -> None:
        """Refuse a ``Host`` or ``Origin`` header this server does not serve (403)."""
        host = request.headers.get("host", "")
        if "*" not in self.allowed_hosts and _host_name(host).lower() not in self.allowed_hosts:
            raise ClientInputError(403, "host_not_allowed", f"Host {host!r} is not served here")
        origin = request.headers.get("origin")
        if origin is None or origin.rstrip("/").lower() in self.allowed_origins:
            return
        parts = urlsplit(origin)
        if parts.netloc.lower() != host.lower():
            raise ClientInputError(
                403, "origin_not_allowed", f"requests from origin {origin!r} are not allowed"
            )

    def admit(self, request: Request) -> str:
        """Check the request's host and token; record its owner and user on it; the owner.

        Raises:
            ClientInputError: 403 for a host or origin not served, 401 for a bad token.
        """
        self.check_host(request)
        owner, user = self.owner(request)
        request.state.owner = owner
        request.state.user = user
        return owner

    def owner(self, request: Request) -> tuple[str, str | None]:
        """The owner namespace and user name of an authenticated request.

        Raises:
            ClientInputError: 401 without a valid bearer token (when tokens are configured).
        """
        if not self.tokens:
            return "local", None
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise ClientInputError(401, "missing_token", "send 'Authorization: Bearer <token>'")
        for token, user in self.tokens.items():
            if hmac.compare_digest(token.encode(), given.strip().encode()):
                if user is not None:
                    return f"user-{hashlib.sha256(user.encode()).hexdigest()[:24]}", user
                return f"token-{hashlib.sha256(token.encode()).hexdigest()[:24]}", None
        raise ClientInputError(401, "invalid_token", "the bearer token is not valid")

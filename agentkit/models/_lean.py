"""A lean HTTP path for the adapters: ``httpx2`` straight, without the provider SDK.

The adapters only ever use the SDK's low-level ``post`` with a pre-serialized body, so for a
plain configuration (an API key, a base URL, a timeout, extra headers) the SDK adds nothing
but its import (about a second for ``openai``, which imports every typed model it has) and a
per-request layer of option merging. This module sends the same bytes with the same headers
through one ``httpx2.AsyncClient``: a process that uses only this path never imports the SDK.

Errors are raised as ``LeanStatusError`` / ``LeanConnectionError``, which carry what
``send_with_retries`` reads from the SDK's own errors (``status_code``, ``response``,
``body``), so retries and error mapping are the same on both paths.
"""

from __future__ import annotations

import _thread
import importlib
import json
import os
import ssl
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
from anyio.lowlevel import RunVar

__all__ = [
    "DEFAULT_TIMEOUT",
    "LeanConnectionError",
    "LeanError",
    "LeanHTTP",
    "LeanStatusError",
    "PoolSet",
    "shared_pools",
]

# The openai SDK's defaults (``openai._constants``), so that both paths behave alike.
DEFAULT_TIMEOUT = httpx2.Timeout(timeout=600, connect=5.0)
_MAX_CONNECTIONS = 1000
# In-flight requests one connection pool takes before the next pool gets new requests. The
# pool (httpcore2) scans every connection it holds on each request and each release (and
# polls every idle socket; its idle count tests each connection against a list of them), so
# its cost per request grows faster than its size: at 200 concurrent requests that scan was
# most of the client's CPU. Pools of 16 cut it; pools of 4 cut a run's Python calls by 12%
# more (docs/benchmarks.md, Round 7), for a longer walk over the pools, which ``_pick``
# starts at the first one that may have room.
_POOL_REQUESTS = 4
_POOL_LIMITS = httpx2.Limits(
    max_connections=_POOL_REQUESTS, max_keepalive_connections=_POOL_REQUESTS
)
_MAX_POOLS = _MAX_CONNECTIONS // _POOL_REQUESTS

_ssl_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def _verifying_context() -> ssl.SSLContext:
    """One process-wide certificate-verifying context (loading the CA store takes ~40 ms)."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx2.create_ssl_context()
        return _ssl_context


# What the first request imports: the connection pool and HTTP/1.1 parser (httpx2 loads them
# when its first client is built) and anyio's asyncio backend (loaded on first use). The
# backend first: a first request that comes early sleeps on it while the rest loads.
_WARM_MODULES = (
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "httpcore2",
    "h11",
    "agentkit.models._lean_net",
)
_warm_lock = threading.Lock()
_warm_started = False
_warm_done = threading.Event()


def warm_up(secure: bool) -> None:
    """Import the HTTP stack (and load the CA store for ``secure``) in a background thread.

    Called when a model is built, once per process: construction stays instant, and a first
    request that comes later (a server waiting for its first user) does not stall on the
    imports. A request that comes at once waits on the same import locks: no worse.
    """
    global _warm_started
    with _warm_lock:
        if _warm_started:
            return
        _warm_started = True
    # ``_thread`` rather than ``threading.Thread``: ``Thread.start`` waits until the new thread
    # runs, up to a GIL switch interval (5 ms) on a busy process. Like a daemon thread, it
    # never delays the interpreter's exit.
    try:
        _thread.start_new_thread(_warm, (secure,))
    except RuntimeError:  # no thread to be had: the first request imports what it needs
        _warm_done.set()


def _warm(secure: bool) -> None:
    try:
        for module in _WARM_MODULES:
            importlib.import_module(module)
        if secure:
            _verifying_context()
    except Exception:  # a warm-up only: the request path reports real errors
        return
    finally:
        _warm_done.set()


async def _warmed() -> None:
    """Wait for the warm-up without holding the event loop (a request right after the build).

    Importing what the thread is importing would block the loop on its import locks until
    the thread is done (the first-request stall); sleeping lets other tasks run meanwhile.
    """
    deadline = time.monotonic() + 30  # as the fork's wait: a stuck import must not hang us
    # Polled: the thread cannot set an anyio.Event (no event loop of its own), and handing the
    # wait to a worker thread would cost the first request a thread pool.
    while not _warm_done.is_set() and time.monotonic() < deadline:  # noqa: ASYNC110
        await anyio.sleep(0.002)


def _before_fork() -> None:
    # A child forked while the warm-up holds an import lock would inherit the lock with no
    # thread left to release it, and hang on its first import of that module (a server that
    # builds its models, then forks workers). Let the warm-up finish first.
    if _warm_started:
        _warm_done.wait(30)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)


def _closed_context() -> ssl.SSLContext:
    """A context that verifies certificates but trusts no authority, built in microseconds.

    Used for an ``http://`` base URL, where no TLS handshake is expected: should one happen
    anyway, it fails verification instead of being trusted.
    """
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class LeanError(Exception):
    """Root of the lean path's failures."""


class LeanStatusError(LeanError):
    """An HTTP error answer (what the SDK's ``APIStatusError`` carries)."""

    def __init__(self, message: str, response: httpx2.Response, body: object) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code
        self.body = body


class LeanConnectionError(LeanError):
    """No answer: connection failure or timeout (``__cause__`` is the transport error)."""


class _Release(httpx2.AsyncByteStream):
    """A response body (httpcore2's) that gives its place in ``PoolSet`` back when closed."""

    __slots__ = ("_index", "_pools", "_stream")

    def __init__(self, stream: Any, pools: PoolSet, index: int) -> None:
        self._stream = stream
        self._pools: PoolSet | None = pools
        self._index = index

    def __aiter__(self) -> AsyncIterator[bytes]:
        from agentkit.models._lean_net import response_chunks

        return response_chunks(self._stream)  # its errors as httpx2's, as the transport's

    async def aclose(self) -> None:
        pools, self._pools = self._pools, None
        if pools is not None:
            pools.release(self._index)
        await self._stream.aclose()


class PoolSet(httpx2.AsyncBaseTransport):
    """Connection pools that fill one after another, so that no pool grows large.

    The pools are httpcore2's, as in ``httpx2.AsyncHTTPTransport``, with connections that
    send each request in one write (``agentkit.models._lean_net``); a request and its
    answer are converted as that transport converts them, errors included.

    A request goes to the first pool with fewer than ``_POOL_REQUESTS`` requests in flight
    (a new pool is opened when all are that busy, up to ``_MAX_POOLS``; past that, the
    least busy one queues it). One conversation at a time uses the first pool only, with
    its kept-alive connections, exactly as a single pool would; 200 at once spread over 50
    pools of at most 4 connections, and each request's pool bookkeeping stays that small.
    Used from one event loop (every lean client of a loop shares its set, see
    ``shared_pools``): no locking.

    Args:
        verify: The TLS context of every pool.
    """

    __slots__ = ("_load", "_pools", "_room", "_verify", "users")

    def __init__(self, verify: ssl.SSLContext) -> None:
        self._verify = verify
        self._pools: list[Any] = []  # httpcore2.AsyncConnectionPool, imported with the stack
        self._load: list[int] = []
        # Every pool before this index is full: the walk for a free place starts here.
        self._room = 0
        self.users = 1
        """Clients sharing this set: ``aclose`` closes the pools when the last one closes."""

    def _pick(self) -> int:
        load = self._load
        for index in range(self._room, len(load)):
            if load[index] < _POOL_REQUESTS:
                self._room = index
                return index
        self._room = len(load)
        if len(self._pools) < _MAX_POOLS:
            from agentkit.models._lean_net import new_pool

            limits = _POOL_LIMITS
            self._pools.append(new_pool(self._verify, _POOL_REQUESTS, limits.keepalive_expiry))
            self._load.append(0)
            return len(self._pools) - 1
        return self._load.index(min(self._load))

    @property
    def in_flight(self) -> list[int]:
        """Requests in flight per pool, in the order the pools were opened."""
        return list(self._load)

    def release(self, index: int) -> None:
        """A request of pool ``index`` is over (its response closed)."""
        if index < len(self._load):  # else closed by ``aclose`` meanwhile
            self._load[index] -= 1
            if index < self._room:
                self._room = index

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` through the first pool with room."""
        from agentkit.models._lean_net import send

        index = self._pick()
        self._load[index] += 1
        try:
            answer = await send(self._pools[index], request)
        except BaseException:
            self.release(index)
            raise
        return httpx2.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Release(answer.stream, self, index),
            extensions=answer.extensions,
        )

    @property
    def closed(self) -> bool:
        """Whether every client sharing the set has closed it."""
        return self.users <= 0

    async def aclose(self) -> None:
        """One client is done with the set; the last one closes every pool."""
        self.users -= 1
        if self.users > 0:
            return
        pools, self._pools, self._load, self._room = self._pools, [], [], 0
        for pool in pools:
            await pool.aclose()


# The pool sets of the running event loop (one for https, one for http base URLs): models
# pointed at the same server share their kept-alive connections instead of opening their
# own. A run variable lives and dies with its loop, so no table outlives one.
_POOL_SETS: RunVar[dict[bool, PoolSet]] = RunVar("agentkit_lean_pool_sets")


def shared_pools(loop: object, secure: bool) -> PoolSet:
    """The running loop's pool set for ``secure`` (https) or plain URLs, one more user counted.

    ``loop`` is the running asyncio loop; outside asyncio (``loop`` None: trio) every client
    gets a set of its own.
    """
    if loop is None:
        return PoolSet(_verifying_context() if secure else _closed_context())
    sets = _POOL_SETS.get(None)
    if sets is None:
        sets = {}
        _POOL_SETS.set(sets)
    pools = sets.get(secure)
    if pools is None or pools.closed:
        pools = sets[secure] = PoolSet(_verifying_context() if secure else _closed_context())
    else:
        pools.users += 1
    return pools


class LeanHTTP:
    """A model's requests, built here and handed to the event loop's pool set.

    ``httpx2.AsyncClient.send`` adds, per request, what this path never uses (auth and
    redirect flows, event hooks, a cookie jar, a log record) and wraps the response body in
    a relay that times it, one more generator step per streamed chunk. Its header merge is
    the same for every request of a model: done once here. A request is built with its
    final headers and given to the transport, so the bytes on the wire are the client's
    (``tests/test_lean_wire_bytes.py``) for about a fifth less CPU per request.

    Args:
        base_url: The API root (``https://api.openai.com/v1``).
        headers: Headers of every request (auth, content type...).
        timeout: Seconds, an ``httpx2.Timeout``, or None for none (the SDK's default when
            not given: 600 s, 5 s to connect).
    """

    __slots__ = (
        "_extensions",
        "_loop",
        "_pools",
        "_sent",
        "_urls",
        "base_url",
        "headers",
        "timeout",
    )

    def __init__(
        self, base_url: str, headers: dict[str, str], timeout: Any = DEFAULT_TIMEOUT
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = headers
        self.timeout = httpx2.Timeout(timeout)
        """The timeouts of every request that gives none of its own."""
        self._extensions = {"timeout": self.timeout.as_dict()}
        self._pools: PoolSet | None = None
        self._loop: object = None
        # Parsed once per path: httpx2 parses a string URL again on every request.
        self._urls: dict[str, httpx2.URL] = {}
        self._sent: httpx2.Headers | None = None  # built on first use, with the HTTP stack
        warm_up(self.base_url.startswith("https:"))

    def pools(self, loop: object) -> PoolSet:
        """The pool set of ``loop`` (another one when the last was taken under another loop)."""
        if self._pools is None or self._loop is not loop:
            self._pools = shared_pools(loop, self.base_url.startswith("https:"))
            self._loop = loop
        return self._pools

    def _headers(self) -> httpx2.Headers:
        """Every request's headers in the client's order: Host, httpx2's own, the model's."""
        if self._sent is None:
            # httpx2's defaults (its User-Agent, the encodings of the decoders installed),
            # read where the library sets them: a client never used to send anything.
            merged = httpx2.AsyncClient(transport=httpx2.AsyncBaseTransport()).headers
            merged.update(self.headers)
            host = httpx2.URL(self.base_url).netloc
            self._sent = httpx2.Headers([(b"Host", host), *merged.raw])
        return self._sent

    async def post(
        self,
        loop: object,
        path: str,
        body: bytes,
        *,
        stream: bool,
        headers: dict[str, str] | None = None,
        request_timeout: Any = None,
    ) -> httpx2.Response:
        """POST ``body``; the response (unread when ``stream``), or a ``LeanError``."""
        if not _warm_done.is_set() and _warm_started:
            await _warmed()
        pools = self.pools(loop)
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx2.URL(self.base_url + path)
        sent = self._headers()
        if headers is not None:  # the request's own, after the model's (as the client merges)
            sent = httpx2.Headers(sent)
            sent.update(headers)
        extensions = (
            self._extensions
            if request_timeout is None
            else {"timeout": httpx2.Timeout(request_timeout).as_dict()}
        )
        # ``stream=``: the body as given, no content encoding to choose, no headers added;
        # its length is the one header a body of its own sets.
        request = httpx2.Request(
            "POST", url, headers=sent, stream=httpx2.ByteStream(body), extensions=extensions
        )
        request.headers["Content-Length"] = str(len(body))
        try:
            response = await pools.handle_async_request(request)
            response.request = request  # as the client sets it: an error handler may read it
            if not stream:
                await _read(response)
        except httpx2.TimeoutException as err:
            raise LeanConnectionError("Request timed out.") from err
        except httpx2.RequestError as err:  # transport failures, undecodable bodies...
            raise LeanConnectionError("Connection error.") from err
        if response.status_code >= 400:
            raise await _read_error(response)
        return response

    async def aclose(self, loop: object) -> None:
        """Leave the pool set if it belongs to ``loop`` (another loop's cannot be closed here)."""
        pools, self._pools = self._pools, None
        if pools is not None and self._loop is loop:
            await pools.aclose()


async def _read(response: httpx2.Response) -> None:
    """Read the whole body (which closes the response); closed too when that fails."""
    try:
        await response.aread()
    except BaseException:  # cancelled or broken off: the connection goes back all the same
        await response.aclose()
        raise


async def _read_error(response: httpx2.Response) -> LeanError:
    """The error of an HTTP error answer; the response is closed however this ends."""
    try:
        await response.aread()
    except httpx2.RequestError as err:
        failure = LeanConnectionError("Connection error.")
        failure.__cause__ = err
        return failure
    finally:
        # Shielded: a cancelled caller must still give the connection back, now.
        with anyio.CancelScope(shield=True):
            await response.aclose()
    return _status_error(response)


def _status_error(response: httpx2.Response) -> LeanStatusError:
    """The error of an HTTP error answer, with its decoded body (JSON, else text)."""
    text = response.text
    try:
        body: object = json.loads(text)
    except ValueError:
        body = text or None
    message = f"Error code: {response.status_code} - {body}"
    return LeanStatusError(message, response, body)

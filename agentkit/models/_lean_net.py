"""The lean path's connection pools: httpcore2's, over streams that send a request in one write.

``httpx2.AsyncHTTPTransport`` is httpcore2's connection pool with a conversion on each side
(its request into httpcore2's, the answer into an ``httpx2.Response`` whose body relays
httpcore2's with its errors mapped); ``PoolSet`` (``agentkit.models._lean``) does the same
conversion here, for one reason the transport has no public way to give: the pool's network
backend. httpcore2 writes a request's head and its body with two writes, and each write on
an anyio socket stream is a send system call and a trip through the event loop (anyio's
``send`` ends with a checkpoint): a second wake-up of the server too. ``_Stream`` keeps the
head until the body comes and sends both at once (the bytes are the same; only their split
into writes changes), and answers the pool's "is this idle connection readable" probe from
the socket it keeps, without anyio's attribute table built per probe.

Imported with the HTTP stack (the first pool, or the warm-up thread), never by
``import agentkit``.
"""

from __future__ import annotations

import select
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore2
import httpx2

__all__ = ["new_pool", "response_chunks", "send"]

# httpcore2's errors -> httpx2's, as httpx2's transport maps them (by the most specific).
_ERRORS: dict[type[Exception], type[httpx2.TransportError]] = {
    httpcore2.TimeoutException: httpx2.TimeoutException,
    httpcore2.ConnectTimeout: httpx2.ConnectTimeout,
    httpcore2.ReadTimeout: httpx2.ReadTimeout,
    httpcore2.WriteTimeout: httpx2.WriteTimeout,
    httpcore2.PoolTimeout: httpx2.PoolTimeout,
    httpcore2.NetworkError: httpx2.NetworkError,
    httpcore2.ConnectError: httpx2.ConnectError,
    httpcore2.ReadError: httpx2.ReadError,
    httpcore2.WriteError: httpx2.WriteError,
    httpcore2.ProxyError: httpx2.ProxyError,
    httpcore2.UnsupportedProtocol: httpx2.UnsupportedProtocol,
    httpcore2.ProtocolError: httpx2.ProtocolError,
    httpcore2.LocalProtocolError: httpx2.LocalProtocolError,
    httpcore2.RemoteProtocolError: httpx2.RemoteProtocolError,
}


def _mapped(err: Exception) -> httpx2.TransportError | None:
    """The httpx2 error for httpcore2's ``err`` (None: not one of httpcore2's)."""
    for cls in type(err).__mro__:
        target = _ERRORS.get(cls)
        if target is not None:
            return target(str(err))
    return None


async def response_chunks(stream: Any) -> AsyncIterator[bytes]:
    """The chunks of httpcore2's response body ``stream``, its errors raised as httpx2's."""
    try:
        async for chunk in stream:
            yield chunk
    except Exception as err:
        mapped = _mapped(err)
        if mapped is None:
            raise
        raise mapped from err


async def send(pool: httpcore2.AsyncConnectionPool, request: httpx2.Request) -> httpcore2.Response:
    """Send ``request`` through ``pool``: httpcore2's answer, its errors raised as httpx2's.

    The request converted as ``httpx2.AsyncHTTPTransport`` converts it.
    """
    url = request.url
    sent = httpcore2.Request(
        method=request.method,
        url=httpcore2.URL(
            scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
        ),
        headers=request.headers.raw,
        content=request.stream,
        extensions=request.extensions,
    )
    try:
        return await pool.handle_async_request(sent)
    except Exception as err:
        mapped = _mapped(err)
        if mapped is None:
            raise
        raise mapped from err


def new_pool(
    verify: ssl.SSLContext, size: int, keepalive_expiry: float | None
) -> httpcore2.AsyncConnectionPool:
    """A connection pool of ``size`` connections, as ``httpx2.AsyncHTTPTransport`` builds it.

    HTTP/1.1 only, no proxy, no retries of connects: the transport's defaults. Its
    connections send each request in one write.
    """
    return httpcore2.AsyncConnectionPool(
        ssl_context=verify,
        max_connections=size,
        max_keepalive_connections=size,
        keepalive_expiry=keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=_Backend(),
    )


class _Backend(httpcore2.AsyncNetworkBackend):
    """httpcore2's anyio backend, its streams wrapped in ``_Stream``."""

    def __init__(self) -> None:
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _Stream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return _Stream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _Stream(httpcore2.AsyncNetworkStream):
    r"""A connection that sends a request's head together with the first piece of its body.

    A write after a read (or the first one) that ends a header block (``\r\n\r\n``) is
    held; the next write sends it in front of its own bytes, and a read, a TLS start or a
    close sends it first. So the bytes and their order are those given; a request without
    a body goes out when its answer is read, as it would have.
    """

    def __init__(self, stream: httpcore2.AsyncNetworkStream) -> None:
        self._stream = stream
        self._head: bytes | None = None
        self._fresh = True  # nothing written since the last read
        # A socket, or asyncio's ``TransportSocket`` view of one: either has a ``fileno``.
        self._socket: Any = stream.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._head is not None:
            await self._flush(timeout)
        data = await self._stream.read(max_bytes, timeout)
        self._fresh = True
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        head, self._head = self._head, None
        if head is not None:
            await self._stream.write(head + buffer, timeout)
        elif self._fresh and buffer.endswith(b"\r\n\r\n"):
            self._head = buffer
        else:
            await self._stream.write(buffer, timeout)
        self._fresh = False

    async def _flush(self, timeout: float | None) -> None:  # noqa: ASYNC109 - the write's
        head, self._head = self._head, None
        if head is not None:
            await self._stream.write(head, timeout)

    async def aclose(self) -> None:
        self._head = None  # the connection is going: its unsent request with it
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
    ) -> httpcore2.AsyncNetworkStream:
        await self._flush(timeout)  # a proxy's CONNECT, sent before the handshake
        return _Stream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return _readable(self._socket)
        return self._stream.get_extra_info(info)


def _readable(sock: Any) -> bool:
    """Whether ``sock`` has data (or an end) to read now, as httpcore2's probe decides it."""
    fd = sock.fileno()
    if fd < 0:  # closed: its next read returns the end
        return True
    if not hasattr(select, "poll"):  # Windows
        ready, _, _ = select.select([fd], [], [], 0)
        return bool(ready)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))

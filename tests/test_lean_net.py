"""The lean path's connections: one write per request, httpx2's errors, the idle probe.

``agentkit.models._lean_net`` puts httpcore2's pools over streams that hold a request's head
until its body comes. Checked on httpcore2's own HTTP/1.1 connection over a recording stream
(what is written, in which writes, before which read) and against real local servers that
cut a body short or close an idle connection; by counting, never by timing.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import httpcore2
import httpx2
import pytest

from agentkit.models import _lean_net
from agentkit.models._lean import LeanConnectionError, LeanHTTP, PoolSet

ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class Recorder(httpcore2.AsyncNetworkStream):
    """A connection that records its writes and reads, and answers each request at once."""

    def __init__(self) -> None:
        self.log: list[tuple[str, bytes]] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.log.append(("read", b""))
        return ANSWER

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.log.append(("write", buffer))

    async def aclose(self) -> None:
        self.log.append(("close", b""))

    def get_extra_info(self, info: str) -> object:
        return None


async def _exchange(
    connection: httpcore2.AsyncHTTP11Connection, request: httpcore2.Request
) -> bytes:
    response = await connection.handle_async_request(request)
    body = b"".join([chunk async for chunk in response.aiter_stream()])
    await response.aclose()
    return body


def _connection(recorder: Recorder) -> httpcore2.AsyncHTTP11Connection:
    # What the pool's backend hands httpcore2: the recorder behind the lean path's stream.
    stream = _lean_net._Stream(recorder)
    return httpcore2.AsyncHTTP11Connection(httpcore2.Origin(b"http", b"example.com", 80), stream)


def _request(method: bytes, body: bytes) -> httpcore2.Request:
    headers = [(b"Host", b"example.com")]
    if body:
        headers.append((b"Content-Length", str(len(body)).encode()))
    return httpcore2.Request(method, "http://example.com/v1/x", headers=headers, content=body)


async def test_a_request_with_a_body_goes_out_in_one_write() -> None:
    recorder = Recorder()
    connection = _connection(recorder)
    body = b'{"model": "m", "messages": []}'
    for _ in range(3):  # kept alive: each request of the connection alike
        assert await _exchange(connection, _request(b"POST", body)) == b"{}"
    writes = [data for kind, data in recorder.log if kind == "write"]
    assert len(writes) == 3
    for data in writes:
        head, _, sent = data.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v1/x HTTP/1.1\r\nHost: example.com\r\n")
        assert sent == body
    # Each request is written whole before its answer is read.
    assert [kind for kind, _ in recorder.log] == ["write", "read"] * 3


async def test_a_request_without_a_body_is_sent_before_its_answer_is_read() -> None:
    recorder = Recorder()
    connection = _connection(recorder)
    assert await _exchange(connection, _request(b"GET", b"")) == b"{}"
    assert recorder.log[0][0] == "write"
    assert recorder.log[0][1].startswith(b"GET /v1/x HTTP/1.1\r\n")
    assert recorder.log[0][1].endswith(b"\r\n\r\n")
    assert recorder.log[1][0] == "read"


async def test_closing_drops_an_unsent_head_and_tls_sends_it_first() -> None:
    recorder = Recorder()
    stream = _lean_net._Stream(recorder)
    await stream.write(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
    assert recorder.log == []  # held for a body that may follow
    with pytest.raises(NotImplementedError):  # the recorder has no TLS: sent before trying
        await stream.start_tls(ssl.create_default_context(), "example.com")
    assert recorder.log == [("write", b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")]
    await stream.read(100)
    await stream.write(b"GET / HTTP/1.1\r\n\r\n")  # the next request's head: held
    await stream.aclose()
    assert [kind for kind, _ in recorder.log] == ["write", "read", "close"]  # gone with it


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], object]


async def _serve(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)  # type: ignore[arg-type]
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":", 1)[1]))


async def test_a_body_cut_short_raises_httpx2s_error() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        await writer.drain()
        writer.close()

    async for url in _serve(cut):
        lean = LeanHTTP(url, {})
        loop = asyncio.get_running_loop()
        response = await lean.post(loop, "/x", b"{}", stream=True)
        with pytest.raises(httpx2.RemoteProtocolError):  # httpcore2's, mapped as httpx2 maps it
            async for _chunk in response.aiter_bytes():
                pass
        await response.aclose()
        with pytest.raises(LeanConnectionError) as caught:  # unread: the lean path's error
            await lean.post(loop, "/x", b"{}", stream=False)
        assert isinstance(caught.value.__cause__, httpx2.RemoteProtocolError)
        assert lean.pools(loop).in_flight == [0]
        await lean.aclose(loop)


async def test_a_refused_connection_raises_httpx2s_connect_error() -> None:
    async for served in _serve(lambda reader, writer: writer.close()):
        url = served  # once closed, nothing listens on its port
    pools = PoolSet(ssl.create_default_context())
    request = httpx2.Request("POST", url + "/x", content=b"{}")
    with pytest.raises(httpx2.ConnectError):
        await pools.handle_async_request(request)
    assert pools.in_flight == [0]
    await pools.aclose()


async def test_the_idle_probe_sees_a_connection_the_server_closed() -> None:
    """The pool asks an idle connection whether it is readable: closed by the server, it is."""
    ours, theirs = socket.socketpair()

    class Idle(Recorder):
        def get_extra_info(self, info: str) -> object:
            return ours if info == "socket" else None

    stream = _lean_net._Stream(Idle())
    assert stream.get_extra_info("is_readable") is False
    theirs.close()
    assert stream.get_extra_info("is_readable") is True  # its next read returns the end
    ours.close()
    assert stream.get_extra_info("is_readable") is True  # no descriptor: nothing to reuse


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (files), made with ``cryptography``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def test_requests_over_tls_reuse_the_connection_and_stream(tmp_path: Path) -> None:
    """Real TLS on 127.0.0.1: the held head goes out on the TLS stream, the idle probe of a
    kept-alive TLS connection lets it be reused, and a chunked body streams in pieces."""
    cert_file, key_file = _self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert_file, key_file)
    connections = 0
    bodies: list[bytes] = []
    ended = asyncio.Event()  # the connection's handler returned (the client closed it)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                bodies.append(await reader.readexactly(length))
                if head.startswith(b"POST /v1/stream"):
                    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    for piece in (b"data: 1\n\n", b"data: 2\n\n"):
                        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        await writer.drain()
                    writer.write(b"0\r\n\r\n")
                else:
                    writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()
        finally:
            ended.set()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    client_tls = ssl.create_default_context(cafile=str(cert_file))
    pools = PoolSet(client_tls)
    try:
        async with httpx2.AsyncClient(transport=pools, base_url=f"https://127.0.0.1:{port}") as c:
            for i in range(3):
                response = await c.post("/v1/x", content=b'{"n": %d}' % i)
                assert response.status_code == 200
                assert response.json() == {}
            async with c.stream("POST", "/v1/stream", content=b"{}") as streamed:
                chunks = [chunk async for chunk in streamed.aiter_bytes()]
            assert b"".join(chunks) == b"data: 1\n\ndata: 2\n\n"
            assert pools.in_flight == [0]
        assert bodies == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}', b"{}"]
        assert connections == 1  # the probe found the idle TLS connection reusable
        with anyio.fail_after(30):  # closed by the client's close: the handler is done
            await ended.wait()
    finally:
        await pools.aclose()
        server.close()
        await server.wait_closed()


async def test_a_certificate_that_does_not_verify_is_a_connect_error(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert_file, key_file)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    pools = PoolSet(ssl.create_default_context())  # the system's CAs: ours is not one
    try:
        request = httpx2.Request("POST", f"https://127.0.0.1:{port}/v1/x", content=b"{}")
        with pytest.raises(httpx2.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await pools.handle_async_request(request)
        assert pools.in_flight == [0]
    finally:
        await pools.aclose()
        server.close()
        await server.wait_closed()

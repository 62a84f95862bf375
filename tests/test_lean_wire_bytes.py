"""The lean HTTP path's requests, byte for byte: what a plain ``httpx2.AsyncClient`` sends.

The lean path builds its requests itself (headers merged once, the transport called
directly), so these tests pin its bytes to the reference: an ``httpx2.AsyncClient`` given
the same headers, posting the same body. A raw socket server records each request as it
came (request line, headers in order, body).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest
from _model_calls import ask

from agentkit.messages import Msg
from agentkit.models import OpenAIChatModel
from agentkit.models._lean import LeanHTTP

ANSWER = (
    b'{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}'
)
STREAM = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


class RawServer:
    """Records every request's raw bytes; answers JSON, or SSE when the body asks to stream."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                if b'"stream":true' in body:
                    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(STREAM), STREAM)
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n" + chunked
                    )
                else:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
                    )
                await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[RawServer]:
    async with RawServer() as srv:
        yield srv


HEADERS = {
    "Authorization": "Bearer k",
    "Content-Type": "application/json",
    "Accept": "application/json",
    "OpenAI-Organization": "org-1",
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("extra", [None, {"X-Trace": "t-1", "Accept": "text/plain"}])
async def test_lean_post_sends_what_an_httpx2_client_sends(
    server: RawServer, stream: bool, extra: dict[str, str] | None
) -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"h\xc3\xa9"}]}'
    lean = LeanHTTP(server.url, dict(HEADERS))
    loop = asyncio.get_running_loop()
    response = await lean.post(loop, "/chat/completions", body, stream=stream, headers=extra)
    if stream:
        assert [chunk async for chunk in response.aiter_bytes()] != []
        await response.aclose()
    else:
        assert response.json()["choices"][0]["message"]["content"] == "ok"
    await lean.aclose(loop)
    async with httpx2.AsyncClient(headers=HEADERS, verify=False) as reference:
        answer = await reference.post(server.url + "/chat/completions", content=body, headers=extra)
        assert answer.status_code == 200
    ours, theirs = server.requests
    assert ours == theirs


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_model_request_bytes_are_pinned(server: RawServer, stream: bool) -> None:
    # The whole request of one plain chat turn, as the lean path sent it when pinned.
    model = OpenAIChatModel("m", api_key="k", base_url=server.url, stream=stream)
    assert model._lean is not None  # the path under test
    answer = await ask(model, [Msg("user", "hi", "user")])
    if stream:
        assert [chunk async for chunk in answer][-1].get_text() == "ok"
    else:
        assert answer.get_text() == "ok"
    await model.aclose()
    (raw,) = server.requests
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    port = server.url.split(":")[2].split("/")[0]
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    assert lines[1:] == [
        b"Host: 127.0.0.1:" + port.encode(),
        b"Accept-Encoding: " + _accept_encoding(),
        b"Connection: keep-alive",
        b"User-Agent: python-httpx2/" + httpx2.__version__.encode(),
        b"Authorization: Bearer k",
        b"Content-Type: application/json",
        b"Accept: application/json",
        b"Content-Length: %d" % len(body),
    ]
    expected = (
        b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,'
        b'"stream_options":{"include_usage":true}}'
        if stream
        else b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    )
    assert body == expected


def _accept_encoding() -> bytes:
    """What httpx2 offers (the decoders installed here), read from a client's headers."""
    return (
        httpx2.AsyncClient(transport=httpx2.AsyncBaseTransport())
        .headers["Accept-Encoding"]
        .encode()
    )

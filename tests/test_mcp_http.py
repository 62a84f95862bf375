"""MCPClient over streamable HTTP and SSE against the Python test server on 127.0.0.1."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import pytest

from agentkit.exceptions import MCPCallInterrupted, MCPConnectionError
from agentkit.mcp import HttpServer, MCPClient
from tests._mcp_helpers import http_server

MODES = ["http", "sse"]


@pytest.fixture(params=MODES)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[HttpServer, subprocess.Popen[bytes]]]:
    with http_server(request.param) as running:
        yield running


@pytest.fixture(params=["auto", "legacy"])
async def client(
    request: pytest.FixtureRequest, server: tuple[HttpServer, subprocess.Popen[bytes]]
) -> AsyncIterator[MCPClient]:
    async with MCPClient("web", server[0], protocol=request.param, max_reconnects=1) as c:
        expected = "2026-07-28" if request.param == "auto" else "2025-11-25"
        assert c.protocol_version == expected
        yield c


async def _stats(client: MCPClient, want: str) -> str:
    for _ in range(100):
        stats = (await client.call_tool("stats")).get_text()
        if want in stats:
            break
        await anyio.sleep(0.05)
    return stats


def test_transport_is_explicit() -> None:
    assert HttpServer("http://x/sse").transport == "streamable_http"  # never guessed from the URL
    with pytest.raises(ValueError, match="transport"):
        HttpServer("http://x/mcp", transport="websocket")  # type: ignore[arg-type]


async def test_call_and_progress(client: MCPClient) -> None:
    assert (await client.call_tool("add", {"a": 1, "b": 2})).get_text() == "3"
    chunks = [c async for c in client.call_tool_stream("progress", {"steps": 2})]
    assert [c.is_last for c in chunks] == [False, False, True]
    assert chunks[-1].get_text() == "done 2"


async def test_cancellation_reaches_server(client: MCPClient) -> None:
    started = time.monotonic()
    with anyio.move_on_after(0.3):
        await client.call_tool("slow", {"seconds": 20})
    assert time.monotonic() - started < 10  # the call sleeps 20 s
    assert await _stats(client, "cancelled=1") == "started=1 cancelled=1 finished=0"


async def test_slow_server_hits_timeout(server: tuple[HttpServer, subprocess.Popen[bytes]]) -> None:
    async with MCPClient("web", server[0], timeout=0.5) as c:
        result = await c.call_tool("slow", {"seconds": 20})
        assert result.is_error and "timed out" in result.get_text()
        assert "cancelled=1" in await _stats(c, "cancelled=1")


async def test_list_changed_refreshes(client: MCPClient) -> None:
    seen = anyio.Event()

    async def changed(_: MCPClient) -> None:
        seen.set()

    client.events.on_tools_changed(changed)
    await client.list_tools()
    await client.call_tool("add_tool", {"name": "web_dyn"})
    with anyio.fail_after(10):
        await seen.wait()
    assert "web_dyn" in [t.name for t in await client.list_tools()]


async def test_server_down_then_back(server: tuple[HttpServer, subprocess.Popen[bytes]]) -> None:
    config, proc = server
    async with MCPClient("web", config, max_reconnects=2) as c:
        assert (await c.call_tool("echo", {"text": "a"})).get_text() == "a"
        proc.kill()
        proc.wait()
        with pytest.raises(MCPConnectionError):  # MCPCallInterrupted: it might have run
            await c.call_tool("echo", {"text": "b"})
        with pytest.raises(MCPConnectionError):
            await c.call_tool("echo", {"text": "c"})
        # Same port, new server process: the next call reconnects.
        mode = "sse" if config.transport == "sse" else "http"
        port = str(httpx2.URL(config.url).port)
        from tests._mcp_helpers import PY_SERVER, PYTHON

        again = subprocess.Popen(
            [PYTHON, str(PY_SERVER), mode, port],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):
                try:
                    result = await c.call_tool("echo", {"text": "d"})
                    break
                except MCPConnectionError:
                    await anyio.sleep(0.2)
            assert result.get_text() == "d"
        finally:
            again.kill()  # the client still holds a stream open: no graceful wait
            again.wait(5)


async def test_ready_async_client_is_used_and_not_closed(
    server: tuple[HttpServer, subprocess.Popen[bytes]],
) -> None:
    config, _ = server
    seen: list[str] = []

    async def hook(request: httpx2.Request) -> None:
        seen.append(request.headers.get("x-test", ""))

    async with httpx2.AsyncClient(
        headers={"x-test": "yes"}, event_hooks={"request": [hook]}
    ) as http:
        borrowed = HttpServer(config.url, transport=config.transport, auth=http)
        async with MCPClient("web", borrowed) as c:
            assert (await c.call_tool("echo", {"text": "a"})).get_text() == "a"
        if config.transport == "streamable_http":
            assert "yes" in seen
            assert not http.is_closed


async def test_auth_object_is_applied(server: tuple[HttpServer, subprocess.Popen[bytes]]) -> None:
    config, _ = server
    calls: list[str] = []

    class Token(httpx2.Auth):
        def auth_flow(self, request: httpx2.Request):  # type: ignore[no-untyped-def]
            calls.append(request.method)
            request.headers["Authorization"] = "Bearer t0ken"
            yield request

    secured = HttpServer(config.url, transport=config.transport, auth=Token(), headers={"X-A": "1"})
    async with MCPClient("web", secured) as c:
        assert (await c.call_tool("echo", {"text": "a"})).get_text() == "a"
    assert calls


async def test_unreachable_server_raises() -> None:
    from tests._mcp_helpers import free_port

    c = MCPClient("web", HttpServer(f"http://127.0.0.1:{free_port()}/mcp"), connect_timeout=5)
    with pytest.raises(MCPConnectionError):
        await c.connect()


async def test_server_dies_mid_call(server: tuple[HttpServer, subprocess.Popen[bytes]]) -> None:
    config, proc = server
    async with MCPClient("web", config, max_reconnects=1, connect_timeout=5) as c:
        results: list[object] = []

        async def call() -> None:
            try:
                results.append(await c.call_tool("slow", {"seconds": 30}))
            except MCPCallInterrupted as exc:  # killed while running it: not sent again
                results.append(exc)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.5)
            proc.kill()
        assert isinstance(results[0], MCPCallInterrupted)
        assert time.monotonic() - started < 20

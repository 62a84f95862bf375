"""The lean HTTP path's connection pools: small pools filled in order, connections reused.

A real local HTTP/1.1 server that answers only once a given number of requests are waiting,
so the requests are provably in flight together; checked by counting, never by timing.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import anyio
import pytest

from agentkit.models._lean import LeanHTTP, PoolSet

BODY = b'{"ok": true}'


class BarrierServer:
    """Answers every request once ``wait_for`` of them are waiting (keep-alive)."""

    def __init__(self) -> None:
        self.connections = 0
        self.waiting = 0
        self.wait_for = 1
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> BarrierServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def reached(self, count: int) -> None:
        """Wait until ``count`` requests are waiting for their answer."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.waiting >= count)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                async with self._changed:
                    self.waiting += 1
                    self._changed.notify_all()
                    await self._changed.wait_for(lambda: self.waiting >= self.wait_for)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(BODY), BODY)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[BarrierServer]:
    async with BarrierServer() as srv:
        yield srv


async def _batch(lean: LeanHTTP, server: BarrierServer, count: int) -> None:
    """``count`` requests in flight together, each read to its end."""
    loop = asyncio.get_running_loop()
    server.waiting, server.wait_for = 0, count

    async def one() -> None:
        response = await lean.post(loop, "/chat/completions", b"{}", stream=False)
        assert response.json() == {"ok": True}

    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)


def _pools(lean: LeanHTTP) -> PoolSet:
    return lean.pools(asyncio.get_running_loop())


async def test_one_request_at_a_time_uses_one_pool_and_one_connection(
    server: BarrierServer,
) -> None:
    lean = LeanHTTP(server.url, {})
    for _ in range(5):
        await _batch(lean, server, 1)
    assert _pools(lean).in_flight == [0]
    assert server.connections == 1
    await lean.aclose(asyncio.get_running_loop())


async def test_concurrent_requests_fill_small_pools_in_order_and_reuse_them(
    server: BarrierServer,
) -> None:
    lean = LeanHTTP(server.url, {})
    pools = _pools(lean)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_batch, lean, server, 40)
        with anyio.fail_after(30):
            await server.reached(40)
        assert pools.in_flight == [4] * 10
    assert pools.in_flight == [0] * 10
    assert server.connections == 40
    await _batch(lean, server, 40)  # the same 40 again: every connection kept alive
    assert server.connections == 40
    await lean.aclose(asyncio.get_running_loop())


async def test_a_cancelled_request_gives_its_place_back(server: BarrierServer) -> None:
    lean = LeanHTTP(server.url, {})
    pools = _pools(lean)
    server.wait_for = 2  # never reached: the one request waits until cancelled
    loop = asyncio.get_running_loop()
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(lean.post, loop, "/x", b"{}", stream=False))
        with anyio.fail_after(30):
            await server.reached(1)
        assert pools.in_flight == [1]
        tg.cancel_scope.cancel()
    assert pools.in_flight == [0]
    await lean.aclose(asyncio.get_running_loop())


async def test_a_streamed_response_holds_its_place_until_closed(server: BarrierServer) -> None:
    lean = LeanHTTP(server.url, {})
    pools = _pools(lean)
    response = await lean.post(asyncio.get_running_loop(), "/x", b"{}", stream=True)
    assert pools.in_flight == [1]
    assert b"".join([chunk async for chunk in response.aiter_bytes()]) == BODY
    await response.aclose()
    assert pools.in_flight == [0]
    await lean.aclose(asyncio.get_running_loop())


async def test_models_on_one_loop_share_kept_alive_connections(server: BarrierServer) -> None:
    loop = asyncio.get_running_loop()
    first, second = LeanHTTP(server.url, {"x-key": "a"}), LeanHTTP(server.url, {"x-key": "b"})
    for lean in (first, second, first, second):
        await _batch(lean, server, 1)
    assert server.connections == 1  # the second model reused the first one's connection
    pools = _pools(first)
    assert _pools(second) is pools
    await first.aclose(loop)
    assert pools.users == 1  # still in use by the second model
    await _batch(second, server, 1)
    await second.aclose(loop)
    assert pools.closed
    third = LeanHTTP(server.url, {})
    assert _pools(third) is not pools  # a fresh set once the last user closed the old one
    await third.aclose(loop)


async def test_a_place_freed_in_an_early_pool_is_taken_first(server: BarrierServer) -> None:
    # Streamed responses hold their places until closed: 9 of them fill two pools and start
    # a third; one closed in the first pool makes it the one the next request goes to.
    lean = LeanHTTP(server.url, {})
    pools = _pools(lean)
    loop = asyncio.get_running_loop()
    held = [await lean.post(loop, "/x", b"{}", stream=True) for _ in range(9)]
    assert pools.in_flight == [4, 4, 1]
    await held.pop(1).aclose()
    assert pools.in_flight == [3, 4, 1]
    held.append(await lean.post(loop, "/x", b"{}", stream=True))
    assert pools.in_flight == [4, 4, 1]
    held.append(await lean.post(loop, "/x", b"{}", stream=True))
    assert pools.in_flight == [4, 4, 2]
    for response in held:
        await response.aclose()
    assert pools.in_flight == [0, 0, 0]
    await lean.aclose(loop)

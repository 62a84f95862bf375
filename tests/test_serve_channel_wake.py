"""A run's channel wakes its waiting readers with a future each (``RunChannel.changed``).

Several readers wait at once (the request's stream, a reconnected page, a relay to another
worker): a push wakes them all, a reader that is cancelled while it waits (a relay's idle
timeout, a client gone) leaves the others waiting, and nothing of it is left behind for the
next wake to skip.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from agentkit.serve._threads import RunChannel

pytestmark = pytest.mark.anyio


async def test_a_push_wakes_every_reader_and_a_cancelled_one_leaves_the_rest_waiting() -> None:
    channel = RunChannel("o", "t", "r1")
    seen: dict[str, list[str]] = {"a": [], "b": []}

    async def read(name: str) -> None:
        async for chunk in channel.read():
            seen[name].append(chunk)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read, "a")
        tg.start_soon(read, "b")
        idle = anyio.CancelScope()  # a relay waiting with a timeout, then giving up
        tg.start_soon(_wait_in, channel, idle)
        await anyio.lowlevel.checkpoint()
        idle.cancel()
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        assert channel.readers == 2
        channel.push("data: 1\n\n")
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        channel.push("data: 2\n\n")
        channel.close()
    assert seen["a"] == seen["b"]
    assert "".join(seen["a"]) == "id: r1:0\ndata: 1\n\nid: r1:1\ndata: 2\n\n"


async def _wait_in(channel: RunChannel, scope: anyio.CancelScope) -> None:
    with scope:
        await channel.changed()


async def test_waiting_after_the_end_returns_at_once() -> None:
    channel = RunChannel("o", "t", "r1")
    channel.close()
    with anyio.fail_after(5):
        await channel.changed()
    assert [chunk async for chunk in channel.read()] == []


async def test_many_cancelled_waits_do_not_pile_up() -> None:
    channel = RunChannel("o", "t", "r1")
    for _ in range(50):
        with anyio.move_on_after(0):  # cancelled at its first wait
            await channel.changed()
    # Each cancelled wait took its future away with it: a wake finds nothing to skip.
    assert channel._waiters == []
    done = anyio.Event()

    async def reader() -> None:
        await channel.changed()
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.lowlevel.checkpoint()
        channel.wake()
        with anyio.fail_after(5):
            await done.wait()

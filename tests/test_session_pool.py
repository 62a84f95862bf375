"""Bounded connection pools: many concurrent operations on one store stay under its maximum."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from agentkit.exceptions import SessionError
from agentkit.session import PostgresSession, RedisSession, Session


async def _save_and_load_many(store: Session, count: int) -> list[BaseException]:
    """``count`` concurrent save+load pairs on distinct ids; the failures, if any."""
    failures: list[BaseException] = []

    async def one(i: int) -> None:
        try:
            await store.save_state(f"s{i}", {"i": i})
            assert await store.load_state(f"s{i}") == {"i": i}
        except Exception as exc:  # collected: the test reports how many failed
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return failures


async def _peak_while(
    work: Callable[[], Awaitable[list[BaseException]]], count_connections: Callable[[], Any]
) -> tuple[list[BaseException], int]:
    """Run ``work`` while sampling the server's connection count; (failures, peak)."""
    peak = 0
    done = anyio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, await count_connections())
            await anyio.sleep(0)  # a sampler, not a synchronisation: yield to the load

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        failures = await work()
        done.set()
    peak = max(peak, await count_connections())
    return failures, peak


async def test_postgres_200_concurrent_operations_stay_within_max_size(postgres_url: str) -> None:
    import psycopg

    app = f"agentkit_pool_{os.urandom(4).hex()}"
    url = f"{postgres_url}&application_name={app}"
    store = PostgresSession(url, table=f"t_{os.urandom(6).hex()}", max_size=5)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as watcher:

        async def count() -> int:
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
            )
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

        async with store:
            failures, peak = await _peak_while(lambda: _save_and_load_many(store, 200), count)
        assert failures == []
        assert 1 <= peak <= 5


async def test_postgres_pool_wait_timeout_is_a_session_error(postgres_url: str) -> None:
    store = PostgresSession(
        postgres_url, table=f"t_{os.urandom(6).hex()}", max_size=1, pool_timeout=0.2
    )
    async with store:
        await store.save_state("s", {"v": 1})
        async with store.connection():  # the only connection is busy
            with pytest.raises(SessionError, match="no database connection free") as caught:
                await store.load_state("s")
        assert type(caught.value.__cause__).__name__ == "PoolTimeout"
        assert await store.load_state("s") == {"v": 1}


async def test_postgres_cancelled_operations_give_their_connections_back(
    postgres_url: str,
) -> None:
    store = PostgresSession(
        postgres_url, table=f"t_{os.urandom(6).hex()}", max_size=2, pool_timeout=10
    )
    async with store:
        await store.save_state("warm", {})
        first_done = anyio.Event()

        async def save(i: int) -> None:
            await store.save_state(f"s{i}", {"i": i})
            first_done.set()

        # 40 operations, most of them waiting for one of the 2 connections or in a query,
        # cancelled at once: each must hand its connection back or leave the queue.
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                for i in range(40):
                    tg.start_soon(save, i)
                await first_done.wait()
                scope.cancel()
        # With a leaked connection the pool would be down to 1 (or 0) and these would queue
        # behind it; with both leaked they would time out.
        assert await _save_and_load_many(store, 20) == []
        stats = store.pool.get_stats()
        assert stats["pool_size"] <= 2


async def test_postgres_pool_is_lazy_and_reopens_after_close(postgres_url: str) -> None:
    store = PostgresSession(postgres_url, table=f"t_{os.urandom(6).hex()}")
    assert store.pool is None  # nothing connects before the first operation
    await store.save_state("s", {"v": 1})
    assert store.pool is not None
    await store.close()
    assert store.pool is None
    assert await store.load_state("s") == {"v": 1}
    await store.close()


def test_pool_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match="min_size"):
        PostgresSession("postgresql:///x", min_size=5, max_size=2)
    with pytest.raises(ValueError, match="pool_timeout"):
        PostgresSession("postgresql:///x", pool_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        RedisSession(max_connections=0)


async def test_redis_200_concurrent_operations_stay_within_max_connections(
    redis_url: str,
) -> None:
    name = f"agentkit-pool-{os.urandom(4).hex()}"
    store = RedisSession(
        redis_url,
        prefix=f"pool:{name}:",
        max_connections=5,
        client_kwargs={"client_name": name},
    )
    watcher = RedisSession(redis_url)

    async def count() -> int:
        clients = await watcher.client.client_list()
        return sum(1 for c in clients if c.get("name") == name)

    async with store, watcher:
        failures, peak = await _peak_while(lambda: _save_and_load_many(store, 200), count)
        assert failures == []
        assert 1 <= peak <= 5


async def test_redis_pool_wait_timeout_is_a_session_error(redis_url: str) -> None:
    store = RedisSession(
        redis_url, prefix=f"pool:{os.urandom(4).hex()}:", max_connections=1, pool_timeout=0.2
    )
    async with store:
        await store.save_state("s", {"v": 1})
        pool = store.client.connection_pool
        held = await pool.get_connection()  # the only connection is busy
        try:
            with pytest.raises(SessionError, match="No connection available"):
                await store.load_state("s")
        finally:
            await pool.release(held)
        assert await store.load_state("s") == {"v": 1}

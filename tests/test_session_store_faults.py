"""Store faults: every store raises SessionError and keeps the last good state.

Disk full and read-only directories use a real, small tmpfs (mounting needs root, which the
CI and the dev machines have; elsewhere those tests skip, and the JSON store's write is also
failed through its single write function). Postgres is stopped and Redis restarted for real:
private servers, so the shared ones of the other tests are not disturbed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentkit.exceptions import SessionError
from agentkit.session import JSONSession, PostgresSession, RedisSession, Session, SQLiteSession
from agentkit.session import _json_session as json_session
from tests._session_servers import PrivatePostgres, SmallDisk, free_port, redis_binary


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(root)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        print("SKIP reason: cannot mount a tmpfs here (needs root):", mounted.stderr.decode())
        pytest.skip("cannot mount a small tmpfs (needs root)")
    try:
        yield SmallDisk(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def make_file_store(kind: str, root: Path) -> Session:
    return JSONSession(root / "j") if kind == "json" else SQLiteSession(root / "s.db")


@pytest.mark.parametrize("kind", ["json", "sqlite"])
async def test_disk_full_save_is_a_session_error_and_keeps_the_old_state(
    disk: SmallDisk, kind: str
) -> None:
    store = make_file_store(kind, disk.root)
    await store.save_state("s", {"v": "old"})
    disk.fill()
    for size in (10, 2_000, 100_000):  # a page's worth, several pages, past the disk
        with pytest.raises(SessionError) as caught:
            await store.save_state("s", {"v": "n" * size})
        cause = caught.value.__cause__
        if kind == "json":
            assert isinstance(cause, OSError) and cause.errno == errno.ENOSPC
        else:  # "database or disk is full", or "disk I/O error" when the WAL cannot grow
            assert isinstance(cause, sqlite3.Error)
        if kind == "json":
            assert await store.load_versioned("s") == ({"v": "old"}, 1)
        # SQLite: a new connection in WAL mode must create its shared-memory file, which a
        # full disk refuses, so even reads fail (SessionError) until there is room again.
    with pytest.raises(SessionError):
        await store.save_state("new", {"v": 1})
    disk.free()
    assert await store.load_versioned("s") == ({"v": "old"}, 1)
    assert await store.load_state("new") is None
    assert await store.save_state("s", {"v": "new"}) == 2
    assert await store.load_state("s") == {"v": "new"}
    if kind == "json":  # no temporary file of a failed save is left behind
        assert sorted(p.name for p in (disk.root / "j").iterdir()) == [".agentkit.lock", "s.json"]


@pytest.mark.parametrize("kind", ["json", "sqlite"])
async def test_read_only_directory_is_a_session_error_and_keeps_the_old_state(
    disk: SmallDisk, kind: str
) -> None:
    store = make_file_store(kind, disk.root)
    await store.save_state("s", {"v": "old"})
    disk.read_only(True)
    try:
        with pytest.raises(SessionError) as caught:
            await store.save_state("s", {"v": "new"})
        assert isinstance(caught.value.__cause__, OSError | sqlite3.Error)
        if kind == "json":
            # Constructors too: a new directory, and an existing one that cannot be written.
            with pytest.raises(SessionError, match="cannot open"):
                JSONSession(disk.root / "elsewhere")
            with pytest.raises(SessionError, match="cannot open"):
                JSONSession(disk.root / "j")
            assert await store.load_state("s") == {"v": "old"}  # reads still work
    finally:
        disk.read_only(False)
    assert await store.load_versioned("s") == ({"v": "old"}, 1)
    assert await store.save_state("s", {"v": "new"}) == 2


async def test_json_failed_write_call_is_a_session_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same without a tmpfs: the store's one write function fails as a full disk does."""
    store = JSONSession(tmp_path)
    await store.save_state("s", {"v": "old"})
    written: list[int] = []

    def full(fd: int, data: bytes) -> None:
        written.append(len(data))
        os.write(fd, data[: len(data) // 2])  # a torn write, then the error
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json_session, "_write_all", full)
    with pytest.raises(SessionError, match="No space left"):
        await store.save_state("s", {"v": "new"})
    monkeypatch.undo()
    assert written  # the fault was reached
    assert await store.load_versioned("s") == ({"v": "old"}, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".agentkit.lock", "s.json"]


# -- Postgres stopped -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    yield server
    server.cleanup()


async def test_postgres_stopped_mid_operation_then_back(private_postgres: PrivatePostgres) -> None:
    import psycopg

    pg = private_postgres
    store = PostgresSession(pg.url, table="faults", max_size=4, pool_timeout=10)
    async with store:
        await store.save_state("s", {"v": 1})
        # Hold the table locked from another connection, so that the next save is in
        # flight (waiting on the lock) when the server stops.
        locker = await psycopg.AsyncConnection.connect(pg.url)
        await locker.execute("LOCK TABLE faults IN ACCESS EXCLUSIVE MODE")
        outcome: list[BaseException | int] = []

        async def save() -> None:
            try:
                outcome.append(await store.save_state("s", {"v": 2}))
            except Exception as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(save)
            with anyio.fail_after(10):
                while not await _lock_waiters(locker):
                    await anyio.sleep(0.01)  # polling the server's own view of the waiter
            await anyio.to_thread.run_sync(pg.stop)
        with contextlib.suppress(Exception):
            await locker.close()
        assert len(outcome) == 1 and isinstance(outcome[0], SessionError), outcome
        assert "psycopg" in type(outcome[0].__cause__).__module__

        down = PostgresSession(pg.url, table="faults", pool_timeout=0.3)
        with pytest.raises(SessionError, match="no database connection free"):
            await down.load_state("s")  # the server is down: a clear error after the wait
        await down.close()

        await anyio.to_thread.run_sync(pg.start)
        # The pool drops its dead connections and reconnects: the next operation succeeds.
        assert await store.load_versioned("s") == ({"v": 1}, 1)
        assert await store.save_state("s", {"v": 3}, expected_version=1) == 2


async def _lock_waiters(conn: Any) -> bool:
    cursor = await conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
    row = await cursor.fetchone()
    return bool(row and row[0])


# -- Redis restarted ------------------------------------------------------------------------
@contextlib.contextmanager
def redis_on(port: int, workdir: Path) -> Iterator[None]:
    binary = redis_binary()
    if binary is None:
        pytest.skip("no redis-server binary")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    args += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(workdir)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(10)


async def _until_up(store: RedisSession) -> None:
    with anyio.fail_after(10):
        while True:
            with contextlib.suppress(Exception):
                await store.client.ping()
                return
            await anyio.sleep(0.02)  # polling the server coming up


@pytest.fixture
async def redis_store(tmp_path: Path) -> AsyncIterator[tuple[RedisSession, int, Path]]:
    pytest.importorskip("redis.asyncio")
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    port = free_port()
    # One retry without backoff keeps the test short; the default (10 retries, up to 1 s
    # apart) only makes the error come later.
    store = RedisSession(
        f"redis://127.0.0.1:{port}/0", client_kwargs={"retry": Retry(NoBackoff(), 1)}
    )
    yield store, port, tmp_path
    await store.close()


async def test_redis_restarted_is_a_session_error_then_reconnects(
    redis_store: tuple[RedisSession, int, Path],
) -> None:
    store, port, workdir = redis_store
    with redis_on(port, workdir):
        await _until_up(store)
        assert await store.save_state("s", {"v": 1}) == 1
    # Down: the pooled connection is dead and nothing listens.
    with pytest.raises(SessionError) as caught:
        await store.save_state("s", {"v": 2})
    assert type(caught.value.__cause__).__module__.startswith("redis")
    with redis_on(port, workdir):  # back, from its append-only file
        await _until_up(store)
        assert await store.load_versioned("s") == ({"v": 1}, 1)
        assert await store.save_state("s", {"v": 3}, expected_version=1) == 2

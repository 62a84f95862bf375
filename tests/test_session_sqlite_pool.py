"""SQLiteSession's connection pool: kept between operations, closed when idle or broken."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from agentkit.exceptions import SessionError
from agentkit.session import SQLiteSession

pytestmark = pytest.mark.anyio


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


async def _gone(path: Path) -> None:
    """Wait until ``path`` no longer exists (bounded)."""
    with anyio.fail_after(10):
        while path.exists():
            await anyio.sleep(0.02)  # polling the file system


async def test_a_kept_connection_sees_every_other_writer(tmp_path: Path) -> None:
    """A pooled reader starts a fresh snapshot per operation: no stale reads."""
    path = tmp_path / "t.db"
    reader, writer = SQLiteSession(path), SQLiteSession(path)
    await writer.save_state("s", {"v": 0})
    for version in range(2, 30):
        assert await reader.exists("s")
        assert (await reader.load_versioned("s") or ({}, 0))[1] == version - 1
        assert [i.session_id for i in (await reader.list_sessions()).sessions] == ["s"]
        assert await writer.save_state("s", {"v": version}) == version
        assert await reader.load_versioned("s") == ({"v": version}, version)


async def test_connections_close_when_the_store_is_idle(tmp_path: Path) -> None:
    """Kept across operations (the log stays), closed when idle: the last close checkpoints
    the log into the file and removes it, so no file is left open between bursts."""
    path = tmp_path / "t.db"
    store = SQLiteSession(path)
    for i in range(5):
        await store.save_state(f"s{i}", {"v": i})
    assert _wal(path).exists()  # kept open between the saves
    await _gone(_wal(path))
    async with SQLiteSession(path) as other:
        assert await other.load_state("s4") == {"v": 4}
    assert await store.save_state("s0", {"v": 9}) == 2  # and opened again on use
    await store.close()
    assert not _wal(path).exists()  # close() closes them at once


async def test_a_connection_whose_operation_failed_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteSession(path)
    await store.save_state("s", {"v": 1})
    with sqlite3.connect(path) as other:
        other.execute("DROP TABLE agentkit_sessions")
    other.close()
    assert _wal(path).exists()  # the store's connection is still kept
    with pytest.raises(SessionError, match="no such table"):
        await store.load_state("s")
    assert not _wal(path).exists()  # closed at once (the last connection checkpointed)

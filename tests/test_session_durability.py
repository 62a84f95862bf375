"""``save_state(durable=False)``: versioned and visible as ever, without the store's flush.

A served thread's claim and lease renewals are written this way (one fsync per turn instead
of two); the turn's commit stays durable.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentkit.exceptions import SessionConflictError
from agentkit.session import PostgresSession, Session
from agentkit.session import _json_session as json_module
from agentkit.session import _sqlite_session as sqlite_module
from tests.test_session_stores import STORES, make_store


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Session]:
    async with make_store(request.param, request, tmp_path) as opened:
        yield opened


async def test_a_non_durable_save_is_versioned_and_read_back_like_any_save(store: Session) -> None:
    assert await store.save_state("s", {"v": "claim"}, expected_version=0, durable=False) == 1
    assert await store.load_versioned("s") == ({"v": "claim"}, 1)
    with pytest.raises(SessionConflictError):
        await store.save_state("s", {"v": "stale"}, expected_version=0, durable=False)
    assert await store.save_state("s", {"v": "renew"}, expected_version=1, durable=False) == 2
    assert await store.save_state("s", {"v": "turn"}, expected_version=2) == 3
    with pytest.raises(SessionConflictError):
        await store.save_state("s", {"v": "fenced"}, expected_version=2, durable=False)
    assert await store.save_state("s", {"v": "forced"}, durable=False) == 4
    assert await store.save_state("n", {"v": "new"}, durable=False) == 1
    assert await store.load_versioned("s") == ({"v": "forced"}, 4)
    assert await store.load_state("n") == {"v": "new"}


async def test_sqlite_commits_a_non_durable_save_without_the_log_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real_connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    store = sqlite_module.SQLiteSession(tmp_path / "t.db")
    await store.save_state("s", {"v": 1})  # sets the file up first
    statements.clear()
    await store.save_state("s", {"v": 2}, durable=False)
    await store.save_state("s", {"v": 3})
    pragmas = [s for s in statements if s.startswith("PRAGMA synchronous")]
    assert pragmas == ["PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL"]
    for pragma in pragmas:  # each set before its write's transaction begins
        assert statements.index(pragma) < statements.index(
            "BEGIN IMMEDIATE", statements.index(pragma)
        )


async def test_json_fsyncs_the_file_always_and_the_directory_only_when_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync, real_dir = os.fsync, json_module._fsync_directory

    def fsync(fd: int) -> None:
        synced.append("file")
        real_fsync(fd)

    def fsync_directory(directory: Path) -> None:
        synced.append("dir")
        real_dir(directory)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(json_module, "_fsync_directory", fsync_directory)
    store = json_module.JSONSession(tmp_path / "j")
    await store.save_state("s", {"v": 1}, durable=False)
    assert synced == ["file"]  # the bytes are on disk before the rename: never a torn file
    synced.clear()
    await store.save_state("s", {"v": 2})
    assert synced[:2] == ["file", "dir"]  # (the directory's fsync is an os.fsync too)
    assert await store.load_versioned("s") == ({"v": 2}, 2)


async def test_postgres_non_durable_save_leaves_the_pooled_connection_durable(
    postgres_url: str,
) -> None:
    async with PostgresSession(postgres_url, table="t_durability", min_size=1, max_size=1) as s:
        await s.delete("s")
        assert await s.save_state("s", {"v": 1}, expected_version=0, durable=False) == 1
        assert await s.save_state("s", {"v": 2}, expected_version=1, durable=False) == 2
        async with s.connection() as conn:  # the pool's only connection: the one just used
            cursor = await conn.execute("SHOW synchronous_commit")
            assert (await cursor.fetchone())[0] == "on"  # SET LOCAL: that write's alone
        assert await s.load_versioned("s") == ({"v": 2}, 2)

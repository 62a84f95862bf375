"""``Session.list_sessions``: metadata pages, most recent first, on every store, no state read."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentkit.session import JSONSession, PostgresSession, RedisSession, Session, SQLiteSession
from agentkit.session import _base as session_base


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Session:
    if kind == "json":
        return JSONSession(tmp_path / "sessions")
    if kind == "sqlite":
        return SQLiteSession(tmp_path / "sessions.db")
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        return RedisSession(url, prefix=f"list:{os.urandom(4).hex()}:")
    url = request.getfixturevalue("postgres_url")
    return PostgresSession(url, table=f"t_{os.urandom(6).hex()}")


@pytest.fixture(params=["json", "sqlite", "redis", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Session]:
    async with make_store(request.param, request, tmp_path) as made:
        yield made


async def test_pages_are_most_recent_first_complete_and_metadata_only(store: Session) -> None:
    for i in range(7):
        await store.save_state(f"u1/t{i}", {"i": i, "big": "x" * 1000}, title=f"title {i}")
    await store.save_state("u2/other", {"i": -1}, title="not u1's")
    await store.save_state("u1/t2", {"i": 2, "again": True})  # no title: the stored one stays
    seen = []
    cursor = None
    while True:
        page = await store.list_sessions(prefix="u1/", limit=3, cursor=cursor)
        assert len(page.sessions) <= 3
        seen.extend(page.sessions)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    ids = [info.session_id for info in seen]
    assert ids[0] == "u1/t2"  # saved last
    assert sorted(ids) == [f"u1/t{i}" for i in range(7)]  # each once, no other owner
    times = [info.updated_at for info in seen]
    assert times == sorted(times, reverse=True)
    by_id = {info.session_id: info for info in seen}
    assert by_id["u1/t2"].title == "title 2" and by_id["u1/t2"].version == 2
    assert by_id["u1/t5"].title == "title 5" and by_id["u1/t5"].version == 1
    assert all(info.updated_at.tzinfo is not None for info in seen)
    everything = await store.list_sessions(limit=1000)
    assert len(everything.sessions) == 8 and everything.next_cursor is None
    await store.delete("u1/t0")
    assert "u1/t0" not in {i.session_id for i in (await store.list_sessions()).sessions}


async def test_bad_limit_and_cursor_are_refused(tmp_path: Path) -> None:
    store = SQLiteSession(tmp_path / "s.db")
    for bad in (0, 1001, 2.5):
        with pytest.raises(ValueError, match="limit"):
            await store.list_sessions(limit=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a cursor"):
        await store.list_sessions(cursor="bm90IGEgY3Vyc29y")
    with pytest.raises(ValueError, match="title"):
        await store.save_state("s", {}, title="t" * 1001)


async def test_sqlite_lists_10000_sessions_without_reading_a_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "many.db"
    store = SQLiteSession(path)
    await store.save_state("serve/u/t00000", {})  # creates the table
    state = json.dumps({"messages": ["m" * 200] * 10})
    rows = [
        (f"serve/u/t{i:05d}", state, f"2025-01-01T00:00:{i % 60:02d}.{i:06d}+00:00", str(i))
        for i in range(1, 10_000)
    ]
    # Bulk set-up in one transaction (10,000 saves one by one take ~20 s here).
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO agentkit_sessions (id, state, updated_at, version, title) "
            "VALUES (?, ?, ?, 1, ?)",
            rows,
        )
    conn.close()
    decoded = 0
    real_loads = json.loads

    def counting_loads(text: str | bytes, **kwargs: object) -> object:
        nonlocal decoded
        # json is one module for the whole process: count only what looks like a stored
        # state or one of this listing's cursors (another test's leftover thread may decode).
        if text == state or (isinstance(text, bytes) and text.startswith(b"[")):
            decoded += 1
        return real_loads(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(session_base.json, "loads", counting_loads)
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.list_sessions(prefix="serve/u/", limit=1000, cursor=cursor)
        ids.extend(info.session_id for info in page.sessions)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(ids) == len(set(ids)) == 10_000
    assert decoded == 9  # the nine cursors, not one state

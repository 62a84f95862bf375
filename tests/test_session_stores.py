"""Session stores: JSON files, SQLite, Redis — one contract, hostile ids, atomicity, concurrency."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit.exceptions import SessionError, StateError
from agentkit.session import (
    JSONSession,
    PostgresSession,
    RedisSession,
    Session,
    SQLiteSession,
    StateGroup,
)
from agentkit.session._base import check_session_id
from agentkit.session._json_session import decode_file_stem, encode_file_stem


class Box:
    """The smallest Stateful: what a session needs from an agent."""

    def __init__(self, value: Any = None) -> None:
        self.value = value
        self.loads = 0
        self.session_versions: dict[tuple[str, str], int] = {}  # opts in to conflict checks

    def state_dict(self) -> dict[str, Any]:
        return {"schema_version": 1, "value": self.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("schema_version") != 1:
            raise StateError("bad schema_version")
        self.value = state["value"]
        self.loads += 1


HOSTILE_IDS = [
    "../escape",
    "../../etc/passwd",
    "/etc/passwd",
    "a/b/c",
    "..",
    ".",
    ".hidden",
    "C:\\Windows\\system32",
    "\\\\server\\share",
    "con",
    "Alice",
    "alice",
    "ALICE",
    "%2E%2E",
    "^a",
    "naïve 日本語 🙂",
    "user:42 / chat#7?x=1&y=*",
]


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Session:
    """A fresh, empty store of ``kind`` (the servers are shared, the namespaces are not)."""
    if kind == "json":
        return JSONSession(tmp_path / "sessions")
    if kind == "sqlite":
        return SQLiteSession(tmp_path / "db" / "sessions.sqlite3")
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        return RedisSession(url, prefix=f"test:{os.urandom(4).hex()}:")
    url = request.getfixturevalue("postgres_url")
    return PostgresSession(url, table=f"t_{os.urandom(6).hex()}")


STORES = ["json", "sqlite", "redis", "postgres"]


@pytest.fixture(params=STORES)
async def session(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Session]:
    async with make_store(request.param, request, tmp_path) as store:
        yield store


async def test_save_load_roundtrip(session: Session) -> None:
    agent = Box({"memory": ["hi", {"nested": [1, 2.5, None, True]}], "text": "é🙂"})
    await session.save("s1", agent)
    other = Box()
    assert await session.load("s1", other) is True
    assert other.value == agent.value
    assert other.loads == 1


async def test_load_missing_returns_false_and_leaves_agent(session: Session) -> None:
    agent = Box("untouched")
    assert await session.load("nope", agent) is False
    assert agent.value == "untouched" and agent.loads == 0
    assert await session.load_state("nope") is None


async def test_save_replaces_delete_exists_list(session: Session) -> None:
    await session.save("a", Box(1))
    await session.save("a", Box(2))
    await session.save("b", Box(3))
    assert await session.exists("a") and not await session.exists("zzz")
    assert await session.list_ids() == ["a", "b"]
    box = Box()
    await session.load("a", box)
    assert box.value == 2
    assert await session.delete("a") is True
    assert await session.delete("a") is False
    assert await session.list_ids() == ["b"]
    assert not await session.exists("a")


async def test_hostile_ids_roundtrip_and_stay_distinct(session: Session) -> None:
    for i, sid in enumerate(HOSTILE_IDS):
        await session.save(sid, Box(i))
    assert await session.list_ids() == sorted(HOSTILE_IDS)
    for i, sid in enumerate(HOSTILE_IDS):
        box = Box()
        assert await session.load(sid, box)
        assert box.value == i, sid


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("", ValueError),
        ("a\x00b", ValueError),
        ("x\n", ValueError),
        ("\ud800", ValueError),
        ("x" * 201, ValueError),
        (None, TypeError),
        (b"bytes", TypeError),
    ],
)
async def test_invalid_ids_are_rejected(session: Session, bad: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        await session.save(bad, Box(1))
    with pytest.raises(error):
        await session.load(bad, Box())


async def test_non_json_state_is_a_state_error(session: Session) -> None:
    with pytest.raises(StateError, match="JSON-safe"):
        await session.save("x", Box(object()))
    with pytest.raises(StateError, match="JSON-safe"):
        await session.save("x", Box(float("nan")))
    assert not await session.exists("x")


async def test_rejected_state_propagates_agent_error(session: Session) -> None:
    await session.save_state("old", {"schema_version": 99})
    box = Box("keep")
    with pytest.raises(StateError, match="schema_version"):
        await session.load("old", box)
    assert box.value == "keep"


async def test_concurrent_saves_leave_one_complete_state(session: Session) -> None:
    big = ["x" * 2000] * 50

    async def save(i: int) -> None:
        await session.save("hot", Box({"i": i, "payload": big}))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(save, i)
    box = Box()
    assert await session.load("hot", box)
    assert box.value["payload"] == big and 0 <= box.value["i"] < 20
    assert await session.list_ids() == ["hot"]


async def test_state_group_saves_and_loads_all_or_nothing(session: Session) -> None:
    alice, bob = Box("a"), Box("b")
    await session.save("team", StateGroup({"alice": alice, "bob": bob}))
    alice2, bob2 = Box(), Box()
    assert await session.load("team", StateGroup({"alice": alice2, "bob": bob2}))
    assert (alice2.value, bob2.value) == ("a", "b")

    state = await session.load_state("team")
    assert state is not None
    state["members"]["bob"] = {"schema_version": 2}
    await session.save_state("team", state)
    alice3, bob3 = Box("keep-a"), Box("keep-b")
    with pytest.raises(StateError):
        await session.load("team", StateGroup({"alice": alice3, "bob": bob3}))
    assert (alice3.value, bob3.value) == ("keep-a", "keep-b")  # alice rolled back
    with pytest.raises(StateError, match="no entry"):
        await session.load("team", StateGroup({"carol": Box()}))


# -- JSONSession specifics -----------------------------------------------------------


@pytest.mark.parametrize("sid", HOSTILE_IDS)
def test_file_stem_encoding_is_safe_and_reversible(sid: str) -> None:
    stem = encode_file_stem(sid)
    assert "/" not in stem and "\\" not in stem and "." not in stem and "\x00" not in stem
    assert all(c.isascii() for c in stem)
    assert decode_file_stem(stem) == sid


@given(st.text(min_size=1, max_size=60))
def test_file_stem_encoding_property(sid: str) -> None:
    try:
        check_session_id(sid)
        stem = encode_file_stem(sid)
    except ValueError:
        return  # control characters, lone surrogates, or too long once encoded
    assert stem and set(stem) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-^%ABCDEF")
    assert decode_file_stem(stem) == sid


def test_decode_rejects_foreign_names() -> None:
    for stem in ["%61", "%2e", "A", "^", "^1", "%G0", "%4", "", ".x", "%FF"]:
        assert decode_file_stem(stem) is None, stem


async def test_json_files_stay_inside_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = JSONSession(root)
    for sid in HOSTILE_IDS:
        await store.save(sid, Box(sid))
        assert store.path_for(sid).parent == root
    files = sorted(
        p.name for p in tmp_path.rglob("*") if p.is_file() and p.name != ".agentkit.lock"
    )
    assert len(files) == len(HOSTILE_IDS)
    assert all((root / f).is_file() for f in files)
    assert all(not f.startswith(".") for f in files)


async def test_json_write_is_atomic_and_private(tmp_path: Path) -> None:
    store = JSONSession(tmp_path, indent=2)
    await store.save("s", Box([1, 2]))
    path = store.path_for("s")
    text = path.read_text()
    stored = json.loads(text)
    assert stored.pop("updated_at")  # listing metadata, on the file's first line
    assert stored == {
        "agentkit_session": 1,
        "version": 1,
        "title": None,
        "state": {"schema_version": 1, "value": [1, 2]},
    }
    assert "\n  " in text  # indent applied
    if os.name == "posix":
        assert path.stat().st_mode & 0o777 == 0o600
    # No temporaries are left behind (the lock file is the only other file).
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, ".agentkit.lock"])


async def test_json_failed_write_keeps_old_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JSONSession(tmp_path)
    await store.save("s", Box("old"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(SessionError, match="disk on fire") as caught:
        await store.save("s", Box("new"))
    assert isinstance(caught.value.__cause__, OSError)
    monkeypatch.undo()
    box = Box()
    await store.load("s", box)
    assert box.value == "old"
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([store.path_for("s").name, ".agentkit.lock"])


async def test_json_corrupt_file_is_a_state_error(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    store.path_for("bad").write_text("{not json")
    with pytest.raises(StateError, match=r"'bad'.*corrupt"):
        await store.load("bad", Box())
    store.path_for("arr").write_text("[1, 2]")
    with pytest.raises(StateError, match="JSON object"):
        await store.load("arr", Box())
    store.path_for("bin").write_bytes(b"\xff\xfe")
    with pytest.raises(StateError, match="UTF-8"):
        await store.load("bin", Box())


async def test_json_list_ids_ignores_foreign_files(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    await store.save("real", Box(1))
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "%61.json").write_text("{}")  # not a canonical encoding
    (tmp_path / ".tmp123.tmp").write_text("{}")
    (tmp_path / "sub.json").mkdir()
    assert await store.list_ids() == ["real"]


def test_json_too_long_id_after_encoding() -> None:
    with pytest.raises(ValueError, match="too long"):
        encode_file_stem("日" * 100)


# -- SQLiteSession specifics ---------------------------------------------------------


async def test_sqlite_schema_wal_and_updated_at(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteSession(path, table="my_sessions")
    assert await store.updated_at("x") is None
    await store.save("x", Box(1))
    stamp = await store.updated_at("x")
    assert stamp is not None and stamp.tzinfo is not None
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        cols = [r[1] for r in conn.execute("PRAGMA table_info(my_sessions)")]
        assert cols == ["id", "state", "updated_at", "version", "title", "gen"]
        row = conn.execute("SELECT state FROM my_sessions WHERE id='x'").fetchone()
        assert json.loads(row[0]) == {"schema_version": 1, "value": 1}
    conn.close()


def test_sqlite_rejects_memory_and_bad_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="database file"):
        SQLiteSession(":memory:")
    with pytest.raises(ValueError, match="table name"):
        SQLiteSession(tmp_path / "x.db", table="x; DROP TABLE y")


async def test_sqlite_two_stores_on_one_file_see_each_other(tmp_path: Path) -> None:
    one = SQLiteSession(tmp_path / "shared.db")
    two = SQLiteSession(tmp_path / "shared.db")

    async def save(store: SQLiteSession, i: int) -> None:
        await store.save(f"id{i}", Box(i))

    async with anyio.create_task_group() as tg:
        for i in range(30):
            tg.start_soon(save, one if i % 2 else two, i)
    assert await one.list_ids() == sorted(f"id{i}" for i in range(30))
    box = Box()
    assert await two.load("id7", box) and box.value == 7


async def test_sqlite_does_not_block_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow disk must not stall other tasks: the store's I/O runs in a worker thread."""
    store = SQLiteSession(tmp_path / "slow.db")
    real_connect = sqlite3.connect

    def slow_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        time.sleep(0.5)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", slow_connect)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await store.save("s", Box(1))
        tg.cancel_scope.cancel()
    assert ticks >= 10


# -- RedisSession specifics ----------------------------------------------------------


async def test_redis_ttl_and_prefix_isolation(redis_url: str) -> None:
    async with (
        RedisSession(redis_url, prefix="p1:*[", ttl=0.3) as one,
        RedisSession(redis_url, prefix="p1:x") as two,
    ):
        await one.save("a", Box(1))
        await two.save("b", Box(2))
        assert await one.list_ids() == ["a"]  # glob characters in the prefix are literal
        assert await two.list_ids() == ["b"]
        await anyio.sleep(0.6)
        assert not await one.exists("a")
        assert await two.exists("b")
        await two.delete("b")


def test_redis_session_is_lazy() -> None:
    code = (
        "import sys; from agentkit.session import RedisSession; "
        "RedisSession('redis://127.0.0.1:1'); print('redis' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_sqlite_concurrent_saves_from_several_processes(tmp_path: Path) -> None:
    db = tmp_path / "multi.db"
    code = (
        "import sys, anyio\n"
        "from agentkit.session import SQLiteSession\n"
        "async def main(db, worker):\n"
        "    store = SQLiteSession(db)\n"
        "    for i in range(25):\n"
        "        await store.save_state(f'w{worker}-{i}', {'worker': worker, 'i': i})\n"
        "        await store.save_state('shared', {'worker': worker, 'i': i})\n"
        "anyio.run(main, sys.argv[1], int(sys.argv[2]))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(db), str(w)], stderr=subprocess.PIPE)
        for w in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=50)
        assert proc.returncode == 0, err.decode()
    store = SQLiteSession(db)
    ids = await store.list_ids()
    assert len(ids) == 4 * 25 + 1
    state = await store.load_state("shared")
    assert state is not None and state["i"] == 24  # every worker's last save was i=24

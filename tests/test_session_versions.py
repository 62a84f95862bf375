"""Optimistic concurrency on every store, crash leftovers, and file modes (issue 18, 13.20)."""

from __future__ import annotations

import ast
import inspect
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentkit.agent import ReActAgent
from agentkit.exceptions import SessionConflictError, StateError
from agentkit.session import JSONSession, RedisSession, Session, SQLiteSession, StateGroup
from agentkit.session import _base as session_base
from agentkit.testing import ScriptedModel
from tests.test_session_stores import STORES, Box, make_store

WORKER = Path(__file__).with_name("_session_conflict_worker.py")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Session]:
    async with make_store(request.param, request, tmp_path) as opened:
        yield opened


async def test_second_save_from_a_stale_load_conflicts(store: Session) -> None:
    await store.save("s", Box("v0"))
    first, second = Box(), Box()
    assert await store.load("s", first) and await store.load("s", second)
    first.value = "first"
    second.value = "second"
    assert await store.save("s", first) == 2
    with pytest.raises(SessionConflictError) as caught:
        await store.save("s", second)
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert isinstance(caught.value, StateError)
    # Nothing lost: the store keeps the newer state, the loser still holds its own.
    assert await store.load_state("s") == {"schema_version": 1, "value": "first"}
    assert second.value == "second"
    # Reload, redo the change, save: accepted.
    await store.load("s", second)
    second.value = "first+second"
    assert await store.save("s", second) == 3
    assert await store.version("s") == 3


async def test_two_creators_of_one_new_session_conflict(store: Session) -> None:
    one, two = Box("one"), Box("two")
    assert not await store.load("new", one)
    assert not await store.load("new", two)
    await store.save("new", one)
    with pytest.raises(SessionConflictError) as caught:
        await store.save("new", two)
    assert (caught.value.expected, caught.value.actual) == (0, 1)
    assert await store.load_state("new") == {"schema_version": 1, "value": "one"}


async def test_own_saves_advance_the_tracked_version(store: Session) -> None:
    box = Box(1)
    await store.load("s", box)
    for i in range(3):
        box.value = i
        assert await store.save("s", box) == i + 1
        assert store.tracked_version("s", box) == i + 1


async def test_force_and_untracked_saves_overwrite(store: Session) -> None:
    stale = Box()
    await store.load("s", stale)
    await store.save("s", Box("untracked"))  # never loaded here: a plain overwrite
    with pytest.raises(SessionConflictError):
        await store.save("s", stale)
    assert await store.save("s", stale, force=True) == 2
    assert await store.load_state("s") == {"schema_version": 1, "value": None}


async def test_save_after_a_delete_by_someone_else_conflicts(store: Session) -> None:
    box = Box("x")
    await store.save("s", box)
    await store.delete("s")
    with pytest.raises(SessionConflictError) as caught:
        await store.save("s", box)
    assert caught.value.actual == 0
    assert not await store.exists("s")


async def test_save_state_expected_version(store: Session) -> None:
    assert await store.version("s") == 0
    assert await store.save_state("s", {"a": 1}, expected_version=0) == 1
    with pytest.raises(SessionConflictError):
        await store.save_state("s", {"a": 2}, expected_version=0)
    with pytest.raises(SessionConflictError):
        await store.save_state("s", {"a": 2}, expected_version=7)
    assert await store.save_state("s", {"a": 2}, expected_version=1) == 2
    assert await store.load_versioned("s") == ({"a": 2}, 2)
    with pytest.raises(ValueError, match="expected_version"):
        await store.save_state("s", {"a": 3}, expected_version=-1)


async def test_concurrent_versioned_saves_exactly_one_wins(store: Session) -> None:
    await store.save("s", Box(0))
    boxes = [Box() for _ in range(8)]
    for box in boxes:
        await store.load("s", box)
    outcomes: list[str] = []

    async def save(box: Box, i: int) -> None:
        box.value = i
        try:
            await store.save("s", box)
            outcomes.append("saved")
        except SessionConflictError:
            outcomes.append("conflict")

    async with anyio.create_task_group() as tg:
        for i, box in enumerate(boxes):
            tg.start_soon(save, box, i)
    assert sorted(outcomes) == ["conflict"] * 7 + ["saved"]
    assert await store.version("s") == 2


async def test_tracking_is_per_physical_store(tmp_path: Path) -> None:
    one, two = SQLiteSession(tmp_path / "a.db"), SQLiteSession(tmp_path / "a.db")
    stale, fresh = Box(), Box()
    await one.save("s", Box(0))
    await one.load("s", stale)
    await two.load("s", fresh)
    await two.save("s", fresh)
    with pytest.raises(SessionConflictError):
        await two.save("s", stale)  # loaded through `one`: the same file, the same tracking


# -- stores written before versions existed ----------------------------------------------


async def test_legacy_json_file_reads_as_version_1(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    store.path_for("old").write_text(json.dumps({"schema_version": 1, "value": "legacy"}))
    box = Box()
    assert await store.load("old", box) and box.value == "legacy"
    assert await store.version("old") == 1
    assert await store.save("old", box) == 2
    store.path_for("bad").write_text('{"agentkit_session": 1, "version": "x", "state": {}}')
    with pytest.raises(StateError, match="version header"):
        await store.load("bad", box)


async def test_legacy_sqlite_table_gains_a_version_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE agentkit_sessions (id TEXT PRIMARY KEY, state TEXT NOT NULL, "
            "updated_at TEXT NOT NULL)"
        )
        conn.execute(
            "INSERT INTO agentkit_sessions VALUES ('old', ?, '2026-01-01T00:00:00+00:00')",
            (json.dumps({"schema_version": 1, "value": "legacy"}),),
        )
    conn.close()
    store = SQLiteSession(path)
    box = Box()
    assert await store.load("old", box) and box.value == "legacy"
    assert await store.save("old", box) == 2


async def test_legacy_redis_string_key_reads_as_version_1(redis_url: str) -> None:
    async with RedisSession(redis_url, prefix=f"legacy:{os.urandom(4).hex()}:") as store:
        await store.client.set(store.prefix + "old", json.dumps({"schema_version": 1, "value": 5}))
        box = Box()
        assert await store.load("old", box) and box.value == 5
        assert await store.save("old", box) == 2
        assert await store.client.type(store.prefix + "old") == "hash"


# -- two processes ------------------------------------------------------------------------


class Worker:
    def __init__(self, kind: str, location: str, sid: str, name: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "conflict", kind, location, sid, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"worker died (exit code {self.proc.poll()})"
        return dict(json.loads(line))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        code = self.proc.wait(30)
        self.proc.stdout.close()
        assert code == 0


def location_for(kind: str, store: Session, tmp_path: Path) -> str:
    if isinstance(store, JSONSession):
        return str(store.directory)
    if isinstance(store, SQLiteSession):
        return str(store.path)
    if isinstance(store, RedisSession):
        return f"{store.url}#{store.prefix}"
    return f"{store.url}#{store.table}"  # type: ignore[attr-defined]


@pytest.mark.timeout(120)
async def test_two_processes_load_then_save_the_second_conflicts(
    store: Session, tmp_path: Path
) -> None:
    kind = type(store).__name__
    location = location_for(kind, store, tmp_path)
    await store.save("shared", Box())  # exists, so both workers load something
    await store.save_state("shared", {"items": ["seed"]})
    a = Worker(kind.removesuffix("Session").lower(), location, "shared", "A")
    b = Worker(kind.removesuffix("Session").lower(), location, "shared", "B")
    try:
        assert a.ask("load") == {"found": True, "items": ["seed"]}
        assert b.ask("load") == {"found": True, "items": ["seed"]}
        assert a.ask("save") == {"version": 3, "items": ["seed", "A"]}
        lost = b.ask("save")
        assert lost["expected"] == 2 and lost["actual"] == 3
        assert "changed since it was loaded" in lost["conflict"]
        assert lost["items"] == ["seed", "B"]  # B still holds its change
        assert await store.load_state("shared") == {"items": ["seed", "A"]}
        # B reloads and redoes its change: both survive.
        assert b.ask("load")["items"] == ["seed", "A"]
        assert b.ask("save") == {"version": 4, "items": ["seed", "A", "B"]}
    finally:
        a.close()
        b.close()


# -- issue 13 item 20: crash leftovers and file modes --------------------------------------


def temporaries(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.timeout(120)
def test_writers_killed_mid_save_leave_no_temporaries_after_open(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    leftovers = 0
    for _ in range(8):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "hammer", str(directory)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        while not temporaries(directory):  # kill it while a save is writing its temp file
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
        leftovers = max(leftovers, len(temporaries(directory)))
    assert leftovers >= 1  # the kills did leave temporaries behind...
    store = JSONSession(directory)  # ...and opening the directory removes them
    assert temporaries(directory) == []
    state = anyio.run(store.load_state, "big")
    assert state is not None and len(state["items"]) == 2000  # a complete state survived


def test_remove_stale_temporaries_spares_a_save_in_flight(tmp_path: Path) -> None:
    import fcntl

    store = JSONSession(tmp_path)
    (tmp_path / ".abc.tmp").write_text("{}")
    fd = os.open(tmp_path / ".agentkit.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a live writer holds it while its temp file exists
        assert store.remove_stale_temporaries() == 0
        assert temporaries(tmp_path) == [".abc.tmp"]
    finally:
        os.close(fd)
    assert store.remove_stale_temporaries() == 1
    assert temporaries(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
async def test_json_and_sqlite_stores_create_private_files(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        json_store = JSONSession(tmp_path / "j")
        sqlite_store = SQLiteSession(tmp_path / "s" / "sessions.db")
        await json_store.save("x", Box(1))
        await sqlite_store.save("x", Box(1))
    finally:
        os.umask(old)
    json_mode = json_store.path_for("x").stat().st_mode & 0o777
    sqlite_files = sorted((tmp_path / "s").iterdir())
    assert "sessions.db" in [p.name for p in sqlite_files]  # (-wal/-shm: same mode if any)
    assert json_mode == 0o600
    assert {p.stat().st_mode & 0o777 for p in sqlite_files} == {0o600}


# -- who owns the tracking ----------------------------------------------------------------


class Untracked:
    """A Stateful without ``session_versions``: nothing to check a save against."""

    def __init__(self) -> None:
        self.value: object = None

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = state["value"]


async def test_an_agent_keeps_its_versions_on_its_conversation(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    agent = ReActAgent("a", "Be brief.", ScriptedModel([]), print_hint=False)
    await store.save("s", agent)
    assert agent.session_versions == {(store.store_key, "s"): 1}
    assert agent.conversation.session_versions is agent.session_versions
    clone = agent.copy()  # a new conversation: untracked, so its save is a plain overwrite
    assert clone.session_versions == {}
    assert await store.save("s", clone) == 2
    with pytest.raises(SessionConflictError):
        await store.save("s", agent)  # still based on version 1
    group = StateGroup({"a": agent})  # a group tracks itself, apart from its members
    assert await store.save("g", group) == 1
    assert group.session_versions == {(store.store_key, "g"): 1}
    assert (store.store_key, "g") not in agent.session_versions


async def test_an_object_without_session_versions_saves_as_a_plain_overwrite(
    tmp_path: Path,
) -> None:
    store = JSONSession(tmp_path)
    first, second = Untracked(), Untracked()
    assert not await store.load("s", first) and not await store.load("s", second)
    assert await store.save("s", first) == 1
    assert await store.save("s", second) == 2
    assert store.tracked_version("s", second) is None


def test_the_session_base_keeps_no_module_level_table_of_objects() -> None:
    source = inspect.getsource(session_base)
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
            text = ast.unparse(node)
            assert "Weak" not in text, text
            if isinstance(node.value, ast.Dict | ast.Call) and "dict" in text.lower():
                # only registries keyed by plain values (format versions), never by objects
                assert isinstance(node, ast.AnnAssign), text
                assert ast.unparse(node.annotation).startswith(("dict[int,", "dict[str,")), text

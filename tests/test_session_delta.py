"""Saves write only what changed: message logs stored item by item (issue #34).

A state's lists of objects under ``"messages"`` are stored as rows (SQLite, Postgres) or
hash fields (Redis) beside its head; a save writes the head and the items whose digest
changed, and cuts what a shorter log no longer has, atomically under the version check.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.exceptions import SessionConflictError
from agentkit.session import EncodedState, PostgresSession, RedisSession, Session, SQLiteSession

LOG = '["agent","memory","messages"]'


def thread(n: int, *, lease: object = None) -> dict[str, Any]:
    """A served thread's shape: the agent's memory holds ``n`` messages."""
    messages = [{"role": "user" if i % 2 else "assistant", "text": f"m{i}"} for i in range(n)]
    return {"agent": {"memory": {"messages": messages}, "name": "a"}, "lease": lease}


# -- round trip ---------------------------------------------------------------------------
KEYS = st.sampled_from(["messages", "$items", "n", "a", "é"])
SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
VALUES = st.recursive(
    SCALARS | st.fixed_dictionaries({"$items": st.integers(0, 3)}),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(KEYS, children, max_size=3)
        | st.lists(st.dictionaries(KEYS, children, max_size=2), max_size=3)
    ),
    max_leaves=12,
)
STATES = st.dictionaries(KEYS, VALUES, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=STATES, second=STATES)
def test_split_states_round_trip_exactly(first: dict[str, Any], second: dict[str, Any]) -> None:
    async def check(store: Session) -> None:
        for state in (first, second, first):  # each save rewrites what the last one stored
            await store.save_state("s", state)
            loaded = await store.load_state("s")
            assert loaded == state
            assert json.dumps(loaded) == json.dumps(state)  # key order too

    with tempfile.TemporaryDirectory() as tmp:

        async def main() -> None:
            async with SQLiteSession(Path(tmp) / "t.db") as store:
                await check(store)

        anyio.run(main)


def test_the_head_holds_markers_and_the_items_their_own_texts() -> None:
    state = {"messages": [{"a": 1}], "x": [{"messages": []}, {"messages": [1]}], "$items": 1}
    encoded = EncodedState(state, None, split=True)
    assert json.loads(encoded.head) == {**state, "messages": {"$items": 1}}
    assert encoded.logs == {'["messages"]': ['{"a":1}']}  # empty and non-object lists stay
    assert state["messages"] == [{"a": 1}]  # the caller's state is not touched
    whole = EncodedState(state, None, split=False)
    assert json.loads(whole.head) == state and whole.logs == {}


# -- what a save writes, per splitting store ---------------------------------------------
SPLITTING = ["sqlite", "redis", "postgres"]


class Probe:
    """A splitting store and a way to see which items a save wrote."""

    def __init__(self, kind: str, store: Session, tmp: Path) -> None:
        self.kind, self.store, self.tmp = kind, store, tmp

    async def items(self, sid: str) -> dict[int, str]:
        """Stored index -> item text, from the store's own tables or fields."""
        if isinstance(self.store, SQLiteSession):
            with sqlite3.connect(self.store.path) as conn:
                rows = conn.execute(
                    f"SELECT idx, item FROM {self.store.items} WHERE id = ? AND log = ?",
                    (sid, LOG),
                ).fetchall()
            return {int(i): str(t) for i, t in rows}
        if isinstance(self.store, PostgresSession):
            async with self.store.connection() as conn:
                cursor = await conn.execute(
                    f"SELECT idx, item FROM {self.store.items} WHERE id = %s AND log = %s",
                    (sid, LOG),
                )
                return {int(i): str(t) for i, t in await cursor.fetchall()}
        assert isinstance(self.store, RedisSession)
        fields = await self.store.client.hgetall(self.store.prefix + sid)
        start = f"i:{LOG}:"
        return {int(f[len(start) :]): v for f, v in fields.items() if f.startswith(start)}

    async def written(self, sid: str, save: Callable[[], Awaitable[object]]) -> list[int]:
        """Run ``save``; return the indexes of the items it wrote (sorted)."""
        if isinstance(self.store, SQLiteSession):
            await self.store.exists(sid)  # the store's tables exist from its first use on
            with sqlite3.connect(self.store.path) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS probe (idx INTEGER)")
                conn.execute("DELETE FROM probe")
                conn.execute(
                    f"CREATE TRIGGER IF NOT EXISTS probe_w AFTER INSERT ON {self.store.items} "
                    "BEGIN INSERT INTO probe VALUES (NEW.idx); END"
                )
            await save()
            with sqlite3.connect(self.store.path) as conn:
                return sorted(int(r[0]) for r in conn.execute("SELECT idx FROM probe"))
        if isinstance(self.store, PostgresSession):
            sql = f"SELECT idx, xmin::text FROM {self.store.items} WHERE id = %s"

            async def versions() -> dict[int, str]:
                assert isinstance(self.store, PostgresSession)
                async with self.store.connection() as conn:
                    rows = await (await conn.execute(sql, (sid,))).fetchall()
                return {int(i): str(x) for i, x in rows}

            before = await versions()
            await save()
            after = await versions()
            return sorted(i for i, x in after.items() if before.get(i) != x)
        assert isinstance(self.store, RedisSession)
        sent: list[int] = []
        client = self.store.client
        real = client.eval

        async def spy(script: str, numkeys: int, *args: str) -> Any:
            if len(args) >= 9:  # a write (a read has 2 args): items follow 9 fixed ones
                sent.extend(int(args[i + 1]) for i in range(9, len(args), 4))
            return await real(script, numkeys, *args)

        client.eval = spy
        try:
            await save()
        finally:
            del client.eval
        return sorted(sent)


@pytest.fixture(params=SPLITTING)
async def probe(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Probe]:
    kind = request.param
    store: Session
    if kind == "sqlite":
        store = SQLiteSession(tmp_path / "t.db")
    elif kind == "redis":
        store = RedisSession(
            request.getfixturevalue("redis_url"), prefix=f"d:{os.urandom(4).hex()}:"
        )
    else:
        store = PostgresSession(
            request.getfixturevalue("postgres_url"), table=f"d_{os.urandom(6).hex()}"
        )
    async with store:
        yield Probe(kind, store, tmp_path)


async def test_an_append_writes_only_the_new_items_and_a_lease_none(probe: Probe) -> None:
    store, state = probe.store, thread(5)
    assert await probe.written("t", lambda: store.save_state("t", state)) == [0, 1, 2, 3, 4]
    # Texts with newlines and separators: a store may join items with newlines.
    state["agent"]["memory"]["messages"] += [{"text": "new\nline\u2028é"}, {"x": [1, "\n"]}]
    assert await probe.written("t", lambda: store.save_state("t", state, expected_version=1)) == [
        5,
        6,
    ]
    state["lease"] = {"owner": "w1"}
    assert await probe.written("t", lambda: store.save_state("t", state, expected_version=2)) == []
    assert await store.load_versioned("t") == (state, 3)


async def test_an_edit_rewrites_that_item_and_a_compaction_cuts_the_tail(probe: Probe) -> None:
    store, state = probe.store, thread(6)
    await store.save_state("t", state)
    state["agent"]["memory"]["messages"][2] = {"role": "user", "text": "edited"}
    assert await probe.written("t", lambda: store.save_state("t", state)) == [2]
    del state["agent"]["memory"]["messages"][3:]
    assert await probe.written("t", lambda: store.save_state("t", state)) == []
    assert sorted(await probe.items("t")) == [0, 1, 2]
    state["agent"]["memory"]["messages"] = []  # an empty log is kept in the head
    await store.save_state("t", state)
    assert await probe.items("t") == {}
    assert await store.load_state("t") == state


async def test_a_conflict_writes_nothing_items_included(probe: Probe) -> None:
    store, state = probe.store, thread(3)
    await store.save_state("t", state)
    await store.save_state("t", state)  # version 2
    before = await probe.items("t")
    stale = thread(5)
    stale["agent"]["memory"]["messages"][0] = {"text": "lost"}
    with pytest.raises(SessionConflictError):
        await store.save_state("t", stale, expected_version=1)
    with pytest.raises(SessionConflictError):
        await store.save_state("t", stale, expected_version=0)
    assert await probe.items("t") == before
    assert await store.load_versioned("t") == (state, 2)


async def test_delete_removes_the_items_and_a_new_session_starts_clean(probe: Probe) -> None:
    store = probe.store
    await store.save_state("t", thread(4))
    assert await store.delete("t")
    assert await probe.items("t") == {}
    assert await store.load_state("t") is None
    fresh = thread(2)
    await store.save_state("t", fresh, expected_version=0)
    assert await store.load_versioned("t") == (fresh, 1)


async def test_a_session_stored_whole_loads_and_is_then_saved_split(probe: Probe) -> None:
    store, state = probe.store, thread(3)
    text = json.dumps(state, separators=(",", ":"))
    if isinstance(store, SQLiteSession):  # the layout before items: one table, no items one
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                f"CREATE TABLE {store.table} (id TEXT PRIMARY KEY, state TEXT NOT NULL, "
                "updated_at TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1, title TEXT)"
            )
            conn.execute(
                f"INSERT INTO {store.table} VALUES ('t', ?, "
                "'2025-01-02T03:04:05.000006+00:00', 4, NULL)",
                (text,),
            )
    elif isinstance(store, PostgresSession):
        await store.save_state("other", {})  # creates the tables; the row is put in by hand
        async with store.connection() as conn:
            await conn.execute(
                f"INSERT INTO {store.table} (id, state, version) VALUES ('t', %s, 4)", (text,)
            )
    else:
        assert isinstance(store, RedisSession)
        await store.client.hset(store.prefix + "t", mapping={"state": text, "version": 4})
    assert await store.load_versioned("t") == (state, 4)
    state["agent"]["memory"]["messages"].append({"text": "more"})
    assert await probe.written("t", lambda: store.save_state("t", state, expected_version=4)) == [
        0,
        1,
        2,
        3,
    ]
    assert await store.load_versioned("t") == (state, 5)


async def test_concurrent_saves_of_logs_leave_one_whole_state(probe: Probe) -> None:
    store = probe.store
    states = [thread(n, lease={"by": n}) for n in (2, 7, 4, 9, 1, 6)]
    for n, state in enumerate(states):  # every one differs in every item
        for message in state["agent"]["memory"]["messages"]:
            message["by"] = n
    await store.save_state("t", thread(5))
    for _ in range(3):
        async with anyio.create_task_group() as tg:
            for state in states:
                tg.start_soon(functools.partial(store.save_state, "t", state))
        assert await store.load_state("t") in states
    assert await store.version("t") == 1 + 3 * len(states)


def twin(store: Session) -> Session:
    """A second store object on the same storage (another worker): its own known items."""
    if isinstance(store, SQLiteSession):
        return SQLiteSession(store.path, table=store.table)
    if isinstance(store, PostgresSession):
        return PostgresSession(store.url, table=store.table)
    assert isinstance(store, RedisSession)
    return RedisSession(store.url, prefix=store.prefix)


async def test_what_a_store_knows_is_checked_against_what_another_wrote(probe: Probe) -> None:
    """A deleted and re-created session at the same version has other items (a new gen)."""
    store = probe.store
    mine = thread(6)
    await store.save_state("t", mine)
    await store.save_state("t", mine)  # version 2: this object knows its 6 items
    async with twin(store) as other:
        assert await other.delete("t")
        theirs = thread(4)
        for m in theirs["agent"]["memory"]["messages"]:
            m["text"] = "theirs"
        await other.save_state("t", theirs)
        await other.save_state("t", theirs)  # version 2 again, other items
        mine["agent"]["memory"]["messages"].append({"text": "mine"})
        await store.save_state("t", mine, expected_version=2)  # passes the version check
        assert await other.load_versioned("t") == (mine, 3)
        # And after the other object saved (the version moved), an overwrite still
        # writes every item that differs.
        await other.save_state("t", theirs)
        mine["agent"]["memory"]["messages"][0] = {"text": "first"}
        await store.save_state("t", mine)
        assert await other.load_versioned("t") == (mine, 5)


async def test_a_load_after_this_objects_save_reads_no_items_but_checks_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: a load at the (version, gen) this object wrote reuses its items; else reads."""
    import agentkit.session._sqlite_session as sqlite_module

    reads: list[str] = []
    real = sqlite_module.group_items

    def counting(rows: Any, session_id: str) -> dict[str, list[str]]:
        reads.append(session_id)
        return real(rows, session_id)

    monkeypatch.setattr(sqlite_module, "group_items", counting)
    mine = thread(6)
    async with SQLiteSession(tmp_path / "t.db") as store:
        await store.save_state("t", mine)
        assert await store.load_versioned("t") == (mine, 1)
        assert reads == []  # the items it wrote are what the row holds
        async with SQLiteSession(tmp_path / "t.db") as other:
            assert await other.delete("t")
            theirs = thread(3)
            await other.save_state("t", theirs)  # version 1 again, another gen
        assert await store.load_versioned("t") == (theirs, 1)
        assert reads == ["t"]

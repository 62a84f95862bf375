"""States saved by agentkit 0.2.0 keep loading: the corpus in ``tests/state_corpus/0.2.0``.

Every entry is loaded through the public API of this version and must come back with its
content (memory, pending approvals that resume, structured runs, compaction that carries
on where it stopped, served threads, all four stores' stored bytes). Two checks make a
format change without a migration fail here:

* a loaded state saved again equals the entry brought to this version's form by the
  migrations (``migrate_state``): byte for byte while no migration exists, so a renamed,
  dropped or defaulted field shows up;
* the behaviour checks (resume, compaction) read what the state means, not how it looks;
  ``test_a_field_renamed_without_a_migration_is_caught`` proves both catch a rename.

A state from a newer agentkit is refused with an error that says so.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentkit import Capability
from agentkit._formats import upgrade
from agentkit.agent._compaction import Compactor, Summarize
from agentkit.agent._state import SCHEMA_VERSION, migrate_state
from agentkit.exceptions import SessionError, StateError
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.serve import create_app
from agentkit.session import (
    JSONSession,
    PostgresSession,
    RedisSession,
    Session,
    SQLiteSession,
    StateGroup,
)
from agentkit.session._base import GROUP_MIGRATIONS, GROUP_SCHEMA_VERSION
from agentkit.session._json_session import encode_file_stem
from agentkit.testing import FunctionModel, ScriptedModel, tool_use
from tests._serve_helpers import running
from tests.state_corpus.agents import PNG_1X1, Calls, Trip, corpus_agent
from tests.state_corpus.generate import STORED, served_agent

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "state_corpus" / "0.2.0"
AGENT_ENTRIES = sorted(p.stem for p in (CORPUS / "agent").glob("*.json"))


def entry(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "agent" / f"{name}.json").read_text("utf-8"))
    return data


def current_form(state: dict[str, Any]) -> dict[str, object]:
    """What a corpus state becomes in this version (its migrations applied)."""
    if "members" in state:  # a StateGroup of agents
        group = upgrade(
            state,
            what="StateGroup state",
            key="schema_version",
            current=GROUP_SCHEMA_VERSION,
            migrations=GROUP_MIGRATIONS,
            missing=1,
        )
        members = group["members"]
        assert isinstance(members, dict)
        return {**group, "members": {k: migrate_state(v) for k, v in members.items()}}
    return migrate_state(state)


async def loaded(
    state: dict[str, Any],
    model: Any = None,
    calls: Calls | None = None,
    capabilities: Sequence[Capability[Any]] = (),
) -> Any:
    """Load ``state`` into fresh corpus agents; check it saves back as its current form."""
    fresh: Any
    if "members" in state:
        fresh = StateGroup({k: corpus_agent(ScriptedModel([]), name=k) for k in state["members"]})
        agents = list(fresh.members.values())
    else:
        fresh = corpus_agent(model or ScriptedModel([]), calls, capabilities=capabilities)
        agents = [fresh]
    fresh.load_state_dict(copy.deepcopy(state))
    assert fresh.state_dict() == current_form(state)
    for agent in agents:
        memory = await agent.memory.get_memory()
        check_memory_invariant(memory, [c["id"] for c in agent.pending_tool_calls])
    return fresh


def blocks(msg: Msg) -> list[str]:
    return ["str"] if isinstance(msg.content, str) else [b["type"] for b in msg.content]


# -- the agent entries, each with what it must still mean --------------------------------
async def check_conversation(state: dict[str, Any]) -> None:
    model = ScriptedModel(["Noted."])
    agent = await loaded(state, model)
    memory = await agent.memory.get_memory()
    assert [blocks(m) for m in memory] == [
        ["str"],
        ["thinking", "text", "tool_use", "tool_use"],
        ["tool_result", "tool_result"],
        ["thinking", "tool_use"],
        ["tool_result"],
        ["text"],
        ["text", "image", "image", "document", "audio"],
        ["provider_item", "text"],
    ]
    assert memory[1].content[0] == {
        "type": "thinking",
        "thinking": "A sum and a picture.",
        "signature": "sig-1",
    }
    snapshot = memory[2].content[1]
    assert snapshot["output"][1]["source"]["data"] == PNG_1X1
    assert memory[4].content[0].get("is_error") is True
    assert memory[6].content[3]["filename"] == "notes.pdf"
    await agent("And now?")  # the conversation goes on, with the admin group still active
    request = model.requests[-1]
    assert "admin_reset" in request.tool_names
    assert [m.id for m in request.messages[1:-1]] == [m.id for m in memory]


async def check_structured_output(state: dict[str, Any]) -> None:
    model = ScriptedModel([[tool_use("generate_response", "r2", city="Rome", days=2)]])
    agent = await loaded(state, model)
    memory = await agent.memory.get_memory()
    calls = [b for m in memory if m.role == "assistant" for b in m.content]
    assert {"type": "tool_use", "id": "r1", "name": "generate_response"}.items() <= calls[
        -1
    ].items()
    assert calls[-1]["input"] == {"city": "Oslo", "days": 3}
    result = await agent.run("And two days in Rome?", output_type=Trip)
    assert result.output == Trip(city="Rome", days=2)


async def check_pending_approval(state: dict[str, Any]) -> None:
    calls = Calls()
    agent = await loaded(state, ScriptedModel(["All done."]), calls)
    assert [c["id"] for c in agent.pending_tool_calls] == ["d1"]
    result = await agent.run(approvals={"d1": True})
    assert result.output == "All done."
    assert calls.calls == [("delete_files", {"pattern": "*.bak"})]  # exactly once
    texts = [m.get_text() for m in await agent.memory.get_memory()]
    assert "a note while pending" in texts  # the deferred message was kept and stored
    with pytest.raises(ValueError, match="not waiting for approval"):
        await agent.run(approvals={"d1": True})


async def check_pending_structured(state: dict[str, Any]) -> None:
    calls = Calls()
    model = ScriptedModel([[tool_use("generate_response", "r9", city="Lima", days=4)]])
    agent = await loaded(state, model, calls)
    assert [c["id"] for c in agent.pending_tool_calls] == ["d9"]
    result = await agent.run(approvals={"d9": True}, output_type=Trip)
    assert result.output == Trip(city="Lima", days=4)
    assert calls.calls == [("delete_files", {"pattern": "trips/*"})]


async def check_interrupted(state: dict[str, Any]) -> None:
    agent = await loaded(state, ScriptedModel(["Stopped it."]))
    memory = await agent.memory.get_memory()
    result = memory[2].content[0]
    assert result["id"] == "w1" and result["is_error"] and "interrupted" in result["output"]
    assert memory[-1].get_text() == "stop, please"
    assert (await agent("Status?")).get_text() == "Stopped it."


async def check_compacted(state: dict[str, Any]) -> None:
    summaries: list[int] = []

    def answer(messages: list[Msg], info: Any) -> str:
        return "short answer"

    def summarize(messages: list[Msg], info: Any) -> str:
        summaries.append(1)
        return "a new summary"

    model = FunctionModel(answer, model_name="big")
    strategy = Summarize(FunctionModel(summarize, model_name="cheap"), summary_tokens=50)
    compactor = Compactor(1400, strategy=strategy, reserve_output=200)
    agent = await loaded(state, model, capabilities=[compactor])
    memory = await agent.memory.get_memory()
    start = entry("compacted")["memory"]["messages"][-1]["metadata"]["compaction"]["start"]
    await agent("turn 7: one more, please.")
    view = model.requests[-1].messages
    # The view carries on from the recorded start and summary: nothing is recomputed.
    assert summaries == []
    assert "summary 2 of the earlier turns" in view[0].get_text()
    ids = [m.id for m in memory]
    assert [m.id for m in view[1:-1]] == ids[ids.index(start) :]


async def check_team(state: dict[str, Any]) -> None:
    group = await loaded(state)
    for name, said in (("alice", "I say yes."), ("bob", "I say no.")):
        memory = await group.members[name].memory.get_memory()
        assert [m.get_text() for m in memory] == ["Should we ship?", said]


CHECKS: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
    "conversation": check_conversation,
    "structured_output": check_structured_output,
    "pending_approval": check_pending_approval,
    "pending_structured": check_pending_structured,
    "interrupted": check_interrupted,
    "compacted": check_compacted,
    "team": check_team,
}


def test_every_corpus_entry_has_a_check() -> None:
    assert sorted(CHECKS) == AGENT_ENTRIES


@pytest.mark.parametrize("name", AGENT_ENTRIES)
async def test_an_agent_state_saved_by_0_2_0_loads_with_its_content(name: str) -> None:
    await CHECKS[name](entry(name))


def _rename(path: tuple[str | int, ...], new: str) -> Callable[[dict[str, Any]], None]:
    def rename(state: dict[str, Any]) -> None:
        where: Any = state
        for step in path[:-1]:
            where = where[step]
        where[new] = where.pop(path[-1])

    return rename


RENAMES: dict[str, list[tuple[str | int, ...]]] = {
    "pending_approval": [
        ("schema_version",),
        ("name",),
        ("memory",),
        ("memory", "messages"),
        ("pending_tool_calls",),
        ("deferred_messages",),
        ("iteration",),
        ("structured_model",),
        ("toolkit",),
        ("toolkit", "active_groups"),
        ("memory", "messages", 0, "id"),
        ("memory", "messages", 0, "role"),
        ("memory", "messages", 0, "content"),
        ("memory", "messages", 0, "metadata"),
        ("memory", "messages", 0, "timestamp"),
        ("memory", "messages", 1, "content", 1, "input"),
        ("memory", "messages", 2, "content", 0, "output"),
    ],
    "conversation": [
        ("memory", "messages", 1, "content", 0, "signature"),
        ("memory", "messages", 4, "content", 0, "is_error"),
    ],
    "compacted": [
        ("memory", "messages", 11, "metadata", "compaction", "start"),
        ("memory", "messages", 11, "metadata", "compaction", "summary"),
    ],
    "team": [("members",), ("members", "alice")],
}


@pytest.mark.parametrize(
    ("name", "path"),
    [(name, path) for name, paths in RENAMES.items() for path in paths],
    ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else str(v),
)
async def test_a_field_renamed_without_a_migration_is_caught(
    name: str, path: tuple[str | int, ...]
) -> None:
    # A copy of the entry with one field renamed is what this version would meet if it
    # had renamed that field without a migration: the corpus check must fail.
    state = entry(name)
    _rename(path, "renamed_field")(state)
    with pytest.raises((StateError, AssertionError)):
        await CHECKS[name](state)


# -- a newer agentkit's states are refused, saying so -----------------------------------
def test_an_agent_state_from_a_newer_agentkit_is_refused_clearly() -> None:
    agent = corpus_agent(ScriptedModel([]))
    with pytest.raises(StateError, match="saved by a newer agentkit"):
        agent.load_state_dict({**entry("conversation"), "schema_version": SCHEMA_VERSION + 1})
    group = StateGroup({"alice": corpus_agent(ScriptedModel([]), name="alice")})
    with pytest.raises(StateError, match="saved by a newer agentkit"):
        group.load_state_dict({**entry("team"), "schema_version": GROUP_SCHEMA_VERSION + 1})
    assert agent.state_dict()["memory"] == {"messages": []}  # nothing was loaded


async def test_a_json_session_file_from_a_newer_agentkit_is_refused_clearly(
    tmp_path: Path,
) -> None:
    original = (CORPUS / "stores" / "json" / "user-42.json").read_text("utf-8")
    (tmp_path / "user-42.json").write_text(
        original.replace('"agentkit_session":1', '"agentkit_session":2', 1)
    )
    with pytest.raises(SessionError, match="file format 2"):
        await JSONSession(tmp_path).load("user-42", corpus_agent(ScriptedModel([])))


# -- the four stores: their stored bytes, loaded through each store ----------------------
def _expected_version(session_id: str) -> int:
    return 2 if session_id == "user-42" else 1


async def check_store(session: Session, raw: Callable[[str], Awaitable[str]]) -> None:
    """Every stored session loads into fresh agents, and saves back unchanged."""
    assert await session.list_ids() == sorted(sid for sid, _ in STORED)
    for session_id, name in STORED:
        before = await raw(session_id)
        found = await session.load_versioned(session_id)
        assert found is not None
        state, version = found
        assert state == entry(name) and version == _expected_version(session_id)
        fresh = await loaded(state)
        assert await session.load(session_id, fresh)
        assert await session.save(session_id, fresh) == version + 1  # tracked: versioned save
        assert await session.load_state(session_id) == current_form(state)
        if current_form(state) == state:  # no migration applies: the very same bytes
            assert await raw(session_id) == before


async def test_json_session_files_of_0_2_0_load(tmp_path: Path) -> None:
    shutil.copytree(CORPUS / "stores" / "json", tmp_path / "s")
    session = JSONSession(tmp_path / "s")

    async def raw(session_id: str) -> str:
        data = json.loads(session.path_for(session_id).read_text("utf-8"))
        assert data["agentkit_session"] == 1
        return json.dumps(data["state"], ensure_ascii=False, separators=(",", ":"))

    for session_id, _ in STORED:  # the file is exactly the header and the compact state
        text = session.path_for(session_id).read_text("utf-8")
        version = _expected_version(session_id)
        assert (
            text == f'{{"agentkit_session":1,"version":{version},"state":{await raw(session_id)}}}'
        )
    await check_store(session, raw)


async def test_a_sqlite_session_file_of_0_2_0_loads(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    shutil.copyfile(CORPUS / "stores" / "sqlite" / "sessions.sqlite", path)
    session = SQLiteSession(path)

    async def raw(session_id: str) -> str:
        with sqlite3.connect(path) as conn:
            row = conn.execute(
                "SELECT state FROM agentkit_sessions WHERE id = ?", (session_id,)
            ).fetchone()
        return str(row[0])

    await check_store(session, raw)
    assert await session.updated_at("ticket/7") is not None


def _store_dump(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "stores" / name).read_text("utf-8"))
    return data


async def test_redis_values_of_0_2_0_load(redis_url: str) -> None:
    dump = _store_dump("redis.json")
    prefix = "compat-0.2.0:"  # the recorded keys, moved out of other tests' way
    async with RedisSession(redis_url, prefix=prefix) as session:
        client = session.client
        for item in dump["keys"]:
            assert item["type"] == "hash" and item["pttl"] == -1
            key = prefix + item["key"][len(dump["prefix"]) :]
            await client.delete(key)
            await client.hset(key, mapping=item["fields"])

        async def raw(session_id: str) -> str:
            return str(await client.hget(prefix + session_id, "state"))

        try:
            await check_store(session, raw)
        finally:
            for session_id, _ in STORED:
                await session.delete(session_id)


async def test_postgres_rows_of_0_2_0_load(postgres_url: str) -> None:
    dump = _store_dump("postgres.json")
    table = "compat_0_2_0_sessions"
    columns = ", ".join(
        f"{c['name']} {c['type']}"
        + ("" if c["nullable"] else " NOT NULL")
        + (f" DEFAULT {c['default']}" if c["default"] else "")
        for c in dump["columns"]
    )
    async with (
        PostgresSession(postgres_url, table=table) as setup,
        setup.connection() as conn,  # creates the table the new way first
    ):
        await conn.execute(f"DROP TABLE {table}")
        await conn.execute(
            f"CREATE TABLE {table} ({columns}, PRIMARY KEY ({', '.join(dump['primary_key'])}))"
        )
        for row in dump["rows"]:
            await conn.execute(
                f"INSERT INTO {table} (id, state, version, updated_at) "
                "VALUES (%s, %s, %s, %s::timestamptz)",
                (row["id"], row["state"], row["version"], row["updated_at"]),
            )
    # A store opened on the 0.2.0 table (it brings the table up to date on first use).
    async with PostgresSession(postgres_url, table=table) as session:

        async def raw(session_id: str) -> str:
            async with session.connection() as conn:
                cursor = await conn.execute(
                    f"SELECT state FROM {table} WHERE id = %s", (session_id,)
                )
                found = await cursor.fetchone()
            return str(found[0])

        try:
            await check_store(session, raw)
        finally:
            async with session.connection() as conn:
                await conn.execute(f"DROP TABLE {table}")


# -- served threads ------------------------------------------------------------------------
@pytest.fixture
def served_dir(tmp_path: Path) -> Path:
    shutil.copytree(CORPUS / "serve", tmp_path / "serve")
    return tmp_path / "serve"


def _thread_file(directory: Path, thread_id: str) -> Path:
    # Not through a JSONSession: opening one writes its lock file (never in the corpus).
    return directory / (encode_file_stem(f"serve/local/{thread_id}") + ".json")


def _stored_thread(directory: Path, thread_id: str) -> dict[str, Any]:
    stored: dict[str, dict[str, Any]] = json.loads(
        _thread_file(directory, thread_id).read_text("utf-8")
    )
    return stored["state"]


async def observe_served(directory: Path) -> dict[str, Any]:
    """Serve the stored threads; list, read, and approve the pending call (no asserts here,
    so that a failing check never cuts the server short)."""
    app = create_app(served_agent, sessions=JSONSession(directory))
    call_id = _stored_thread(CORPUS / "serve", "t-pending")["agent"]["pending_tool_calls"][0]["id"]
    seen: dict[str, Any] = {}
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        seen["list"] = (await client.get("/threads")).json()
        seen["done"] = (await client.get("/threads/t-done")).json()
        seen["pending"] = (await client.get("/threads/t-pending")).json()
        async with client.stream("POST", "/threads/t-pending/approvals", json={call_id: True}) as r:
            seen["resume"] = r.status_code, (await r.aread()).decode()
        seen["after"] = (await client.get("/threads/t-pending")).json()
    return seen


async def check_served(directory: Path) -> None:
    before = _stored_thread(CORPUS / "serve", "t-pending")
    seen = await observe_served(directory)
    assert sorted(t["title"] for t in seen["list"]["threads"]) == ["", "add 2 3", "delete *.bak"]
    done = seen["done"]
    assert done["state"] == {"counter": 2} and done["pending"] == []
    texts = [m.get("content") for m in done["messages"] if m["role"] != "tool"]
    assert texts[0] == "add 2 3" and "Done: 5" in texts and texts[-1] == "You said: hello"
    assert len(seen["pending"]["pending"]) == 1
    assert seen["resume"][0] == 200 and "RUN_FINISHED" in seen["resume"][1]
    assert seen["after"]["pending"] == []
    assert seen["after"]["messages"][-1]["content"] == "Done: deleted files matching *.bak"
    stored = _stored_thread(directory, "t-pending")
    kept = ("serve_thread", "owner", "thread_id", "title", "created_at", "frontend_tools")
    assert {k: stored.get(k) for k in kept} == {k: before[k] for k in kept}
    assert stored["aliases"][: len(before["aliases"])] == before["aliases"]


async def test_served_threads_of_0_2_0_load_and_resume(served_dir: Path) -> None:
    await check_served(served_dir)


@pytest.mark.parametrize("field", ["title", "agent", "owner"])
async def test_a_served_thread_field_renamed_without_a_migration_is_caught(
    served_dir: Path, field: str
) -> None:
    path = _thread_file(served_dir, "t-pending")
    data = json.loads(path.read_text("utf-8"))
    data["state"]["renamed_field"] = data["state"].pop(field)
    path.write_text(json.dumps(data), "utf-8")
    with pytest.raises(AssertionError):
        await check_served(served_dir)


async def test_a_served_thread_from_a_newer_agentkit_is_refused_clearly(served_dir: Path) -> None:
    path = _thread_file(served_dir, "t-done")
    data = json.loads(path.read_text("utf-8"))
    data["state"]["serve_thread"] = 2
    path.write_text(json.dumps(data), "utf-8")
    app = create_app(served_agent, sessions=JSONSession(served_dir))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        answer = await client.get("/threads/t-done")
    assert answer.status_code == 500
    assert answer.json()["error"]["code"] == "thread_unreadable"
    assert "saved by a newer agentkit" in answer.json()["error"]["message"]


def test_the_corpus_holds_only_saved_states() -> None:
    # Nothing writes into the corpus (a store opened on it would leave its lock file).
    names = [p.name for p in CORPUS.rglob("*") if p.is_file()]
    assert names and not [n for n in names if n.startswith(".")]

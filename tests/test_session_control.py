"""Interrupts across workers: a run in process A stopped by a call made in process B."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentkit.agent import ReActAgent
from agentkit.memory import check_memory_invariant
from agentkit.session import (
    JSONSession,
    PostgresSession,
    RedisSession,
    Session,
    SQLiteSession,
    hold_session,
    interrupt_session,
)
from agentkit.session._control import channel_name
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("_control_worker.py")


@pytest.fixture(params=["redis", "postgres", "sqlite", "json"])
async def server_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, str, Session]]:
    if request.param == "sqlite":  # the file stores: a mailbox next to the store
        async with SQLiteSession(tmp_path / "s.db") as sqlite:
            yield "sqlite", str(tmp_path / "s.db"), sqlite
    elif request.param == "json":
        async with JSONSession(tmp_path / "sessions") as files:
            yield "json", str(tmp_path / "sessions"), files
    elif request.param == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = f"ctl:{os.urandom(4).hex()}:"
        async with RedisSession(url, prefix=prefix) as store:
            yield "redis", f"{url}#{prefix}", store
    else:
        url = request.getfixturevalue("postgres_url")
        table = f"ctl_{os.urandom(4).hex()}"
        async with PostgresSession(url, table=table) as store:
            yield "postgres", f"{url}#{table}", store


def spawn(kind: str, location: str, sid: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), kind, location, sid, str(count)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def readline(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = await anyio.to_thread.run_sync(proc.stdout.readline)
    assert line, f"worker exited with {proc.poll()}"
    return line.strip()


@pytest.mark.timeout(90)
async def test_a_run_on_worker_a_is_interrupted_from_this_process(
    server_store: tuple[str, str, Session],
) -> None:
    kind, location, store = server_store
    proc = spawn(kind, location, "chat-1", 3)
    try:
        for i in range(3):
            assert await readline(proc) == f"running {i}"
            reached = await interrupt_session(store, "chat-1")
            assert reached in (1, None)  # Redis and the file mailbox count holders; NOTIFY cannot
            result = json.loads(await readline(proc))
            assert result["i"] == i and result["interrupted"] is True
            assert result["invariant_ok"] is True
        assert await anyio.to_thread.run_sync(proc.wait, 30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


async def test_other_sessions_and_other_stores_are_not_interrupted(redis_url: str) -> None:
    one = RedisSession(redis_url, prefix="app1:")
    two = RedisSession(redis_url, prefix="app2:")
    assert channel_name(one, "s") != channel_name(two, "s")
    assert channel_name(one, "s") != channel_name(one, "t")
    async with one, two:
        assert await interrupt_session(one, "nobody-holds-this") == 0


def blocking_agent() -> tuple[ReActAgent, anyio.Event]:
    toolkit = Toolkit()
    started = anyio.Event()

    @toolkit.tool
    async def wait_forever() -> str:
        """Block until interrupted."""
        started.set()
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([[tool_use("wait_forever", "c1")]])
    return ReActAgent("w", "wait", model, toolkit, print_hint=False), started


async def test_in_process_channel_for_file_stores(tmp_path: Path) -> None:
    store = SQLiteSession(tmp_path / "s.db")
    agent, started = blocking_agent()
    result: dict[str, Any] = {}

    async def run() -> None:
        async with hold_session(store, "s", agent):
            result["reply"] = await agent("go")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        # Another object on the same file: the channel follows the store's identity.
        assert await interrupt_session(SQLiteSession(tmp_path / "s.db"), "s", "stop it") == 1
    assert (result["reply"].metadata or {}).get("interrupted") is True
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    assert memory[-1].get_text() == "stop it"
    assert await interrupt_session(store, "s") == 0  # released with the block


async def test_a_dead_holders_mailbox_is_not_counted_and_is_removed(tmp_path: Path) -> None:
    store = JSONSession(tmp_path / "sessions")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = (
        tmp_path / "sessions" / ".agentkit-control" / f"{channel_name(store, 's')}@{dead.pid}-0123"
    )
    folder.mkdir(parents=True)
    assert await interrupt_session(store, "s") == 0
    assert not folder.exists()
    assert await store.list_ids() == []  # the mailbox is not a session

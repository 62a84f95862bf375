"""A served turn flushes its commit to disk, not its lease: one durable write per turn.

The claim and its renewals are written with ``durable=False`` (a power cut can undo them, and
it ends the run that held them too); the commit, which ``RUN_FINISHED success`` waits for, is
durable, and with it everything before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.serve import create_app
from agentkit.session import EncodedState, SQLiteSession
from tests._serve_agents import make_agent
from tests._serve_helpers import run_events, run_input, running, stream_into, user

pytestmark = pytest.mark.anyio


class Recording(SQLiteSession):
    """A SQLite store that records each write's ``durable`` flag and whether it held a lease."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writes: list[tuple[bool, bool]] = []  # (durable, lease held)
        self.renewed = anyio.Event()

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        version = await super()._write(session_id, state, expected, title, durable=durable)
        self.writes.append((durable, '"lease":null' not in state.head))
        if len(self.writes) >= 2 and not durable:
            self.renewed.set()
        return version


async def test_the_claim_is_not_flushed_and_the_commit_is(tmp_path: Path) -> None:
    store = Recording(tmp_path / "t.db")
    app = create_app(make_agent, sessions=store)
    async with running(app) as base, httpx2.AsyncClient(base_url=base, timeout=30) as c:
        events = await run_events(c, "/agui", run_input("d1", user("hello")))
        assert events[-1]["type"] == "RUN_FINISHED"
        assert store.writes == [(False, True), (True, False)]  # claim, then commit (lease gone)
        thread = (await c.get("/threads/d1")).json()
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]


async def test_lease_renewals_are_not_flushed(tmp_path: Path) -> None:
    store = Recording(tmp_path / "t.db")
    app = create_app(make_agent, sessions=store, lease_seconds=1)
    events: list[dict[str, Any]] = []
    async with (
        running(app) as base,
        httpx2.AsyncClient(base_url=base, timeout=30) as c,
        anyio.create_task_group() as tg,
    ):
        body = run_input("d2", user('call slow_task {"topic": "t"}'))
        tg.start_soon(stream_into, c, "/agui", body, events)
        with anyio.fail_after(30):
            await store.renewed.wait()  # claim + at least one renewal
        await c.post("/threads/d2/interrupt")
    assert events[-1]["type"] == "RUN_FINISHED"
    *held, commit = store.writes
    assert len(held) >= 2 and all(w == (False, True) for w in held)
    assert commit == (True, False)

"""Commit before success: a served turn is stored before ``RUN_FINISHED`` goes out.

The store here refuses writes on demand (a disk that filled up): the commit is retried
while the run keeps its lease, the thread's requests get ``503 store_unavailable``
meanwhile, and a commit that never lands ends the run ``RUN_ERROR`` with a log line naming
the lost turn.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.serve import create_app
from agentkit.session import EncodedState, SQLiteSession
from tests._serve_agents import make_agent
from tests._serve_helpers import run_input, running, stream_into, user

pytestmark = pytest.mark.anyio

SLOW = 'call slow_task {"topic": "t"}'


class FillingDisk(SQLiteSession):
    """A SQLite store whose writes fail (``OSError``, as on a full disk) while ``down``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.down = False
        self.refused = anyio.Event()

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        if self.down:
            self.refused.set()
            raise OSError(28, "No space left on device")
        return await super()._write(session_id, state, expected, title, durable=durable)


async def until(sink: list[dict[str, Any]], kind: str) -> None:
    with anyio.fail_after(30):
        while not any(e["type"] == kind for e in sink):
            await anyio.sleep(0.01)


async def test_success_waits_for_the_commit_which_is_retried(tmp_path: Path) -> None:
    store = FillingDisk(tmp_path / "t.db")
    app = create_app(make_agent, sessions=store)
    events: list[dict[str, Any]] = []
    async with running(app) as base, httpx2.AsyncClient(base_url=base, timeout=30) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream_into, c, "/agui", run_input("d1", user(SLOW)), events)
            await until(events, "CUSTOM")
            store.down = True
            answers: list[httpx2.Response] = []

            async def stop() -> None:
                answers.append(await c.post("/threads/d1/interrupt"))

            tg.start_soon(stop)
            with anyio.fail_after(30):
                await store.refused.wait()  # the commit failed once: it is being retried
            busy = await c.get("/threads/d1")
            assert busy.status_code == 503
            assert busy.json()["error"]["code"] == "store_unavailable"
            again = await c.post("/agui", json=run_input("d1", user("hello")))
            assert again.status_code == 503
            assert not any(e["type"] == "RUN_FINISHED" for e in events)  # not stored yet
            store.down = False
        assert answers[0].json()["status"] == "stopped"
        assert events[-1]["type"] == "RUN_FINISHED"
        assert events[-1]["outcome"] == {"type": "cancelled"}
        thread = (await c.get("/threads/d1")).json()
        assert thread["running"] is False
        tool = next(m for m in thread["messages"] if m["role"] == "tool")
        assert tool["metadata"]["status"] == "interrupted"


async def test_a_commit_that_never_lands_is_an_error_and_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FillingDisk(tmp_path / "t.db")
    app = create_app(make_agent, sessions=store, lease_seconds=1)
    events: list[dict[str, Any]] = []
    caplog.set_level(logging.ERROR, logger="agentkit.serve")
    async with running(app) as base, httpx2.AsyncClient(base_url=base, timeout=30) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream_into, c, "/agui", run_input("d2", user(SLOW)), events)
            await until(events, "CUSTOM")
            store.down = True
            await c.post("/threads/d2/interrupt")
        store.down = False
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "store_unavailable"
    run_id = events[0]["runId"]
    lost = [r for r in caplog.records if "lost the turn" in r.getMessage()]
    assert len(lost) == 1
    assert "d2" in lost[0].getMessage() and run_id in lost[0].getMessage()

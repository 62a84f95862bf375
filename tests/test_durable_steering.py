"""Steering a durable run: each steer is a recorded workflow message, delivered once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit.agent import ReActAgent  # noqa: E402
from agentkit.durable import APPROVALS_TOPIC, PENDING_EVENT, DBOSAgent  # noqa: E402
from agentkit.memory import check_memory_invariant  # noqa: E402
from agentkit.messages import Msg  # noqa: E402
from agentkit.session import SQLiteSession, interrupt_session, steer_session  # noqa: E402
from agentkit.testing import FunctionModel, RequestInfo, tool_use  # noqa: E402
from agentkit.tools import Toolkit  # noqa: E402

DBOS = dbos.DBOS
pytestmark = pytest.mark.anyio


class Env:
    def __init__(self, tmp: Path) -> None:
        self.sessions = SQLiteSession(tmp / "sessions.db")
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.seen: list[list[str]] = []  # the user texts of each model request
        self.script: list[Any] = []
        toolkit = Toolkit()

        @toolkit.tool
        async def wait() -> str:
            """Wait until released."""
            self.started.set()
            await self.release.wait()
            return "waited"

        @toolkit.tool(requires_approval=True)
        async def pay() -> str:
            """Pay."""
            return "paid"

        def answer(messages: list[Msg], info: RequestInfo) -> Any:
            self.seen.append(
                [m.get_text() for m in messages if m.role == "user" and m.get_blocks("text")]
            )
            return self.script.pop(0) if self.script else "done"

        agent = ReActAgent("steered", "Work.", FunctionModel(answer), toolkit, print_hint=False)
        self.durable = DBOSAgent(agent, name="steered", sessions=self.sessions)

    def reset(self, script: list[Any]) -> None:
        self.started, self.release = anyio.Event(), anyio.Event()
        self.seen.clear()
        self.script = script


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("dbos-steer")
    DBOS(
        config={
            "name": "agentkit-durable-steering",
            "system_database_url": f"sqlite:///{tmp / 'dbos.sqlite'}",
            "executor_id": "steer-worker",
            "application_version": "test-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,  # SQLite: a recv polls
        }
    )
    environment = Env(tmp)
    DBOS.launch()
    yield environment
    DBOS.destroy(destroy_registry=True)


def texts(state: dict[str, Any]) -> list[str]:
    memory = [Msg.from_dict(m) for m in state["memory"]["messages"]]
    check_memory_invariant(memory)
    return [m.get_text() for m in memory if m.role == "user" and m.get_blocks("text")]


async def wait_pending(wid: str) -> None:
    with anyio.fail_after(20):
        while await DBOS.get_event_async(wid, PENDING_EVENT, timeout_seconds=1) is None:
            pass


async def test_a_steer_recorded_while_a_tool_runs_reaches_the_next_model_request(
    env: Env,
) -> None:
    env.reset([[tool_use("wait", "w1")]])
    results: list[Any] = []

    async def run() -> None:
        results.append(await env.durable.run("go", workflow_id="steer-tool"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await env.started.wait()
        await DBOSAgent.steer("steer-tool", "also check the logs")  # recorded when it returns
        env.release.set()
    (result,) = results
    assert result.output == "done"
    assert env.seen[1] == ["go", "also check the logs"]  # the request after the tool
    assert texts(result.state).count("also check the logs") == 1
    steps = await DBOS.list_workflow_steps_async("steer-tool")
    assert "DBOS.recv" in [s["function_name"] for s in steps]


async def test_a_steer_while_an_approval_waits_is_recorded_then_delivered_on_resume(
    env: Env,
) -> None:
    env.reset([[tool_use("pay", "p1")]])
    results: list[Any] = []

    async def run() -> None:
        results.append(
            await env.durable.run("pay it", session_id="steer-appr", workflow_id="w-appr")
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        wid = "w-appr"
        await wait_pending(wid)
        outcome = await steer_session(env.sessions, "steer-appr", "only if under 10")
        assert outcome == "next_request"
        assert len(env.seen) == 1  # not delivered yet: the run waits for the decision
        await DBOSAgent.approve(wid, {"p1": True})
    (result,) = results
    assert result.stop_reason == "final"
    assert env.seen[1] == ["pay it", "only if under 10"]
    assert texts(result.state).count("only if under 10") == 1


async def test_a_steer_of_a_run_that_then_pauses_is_answered_without_waiting_for_the_decision(
    env: Env,
) -> None:
    env.reset([[tool_use("wait", "w1"), tool_use("pay", "p1")]])
    results: list[Any] = []
    outcomes: list[str] = []

    async def run() -> None:
        results.append(await env.durable.run("go", session_id="steer-pause", workflow_id="w-p"))

    async def steer() -> None:
        outcomes.append(await steer_session(env.sessions, "steer-pause", "and log it"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await env.started.wait()  # the call runs; pay waits for approval after it
        async with anyio.create_task_group() as steering:
            steering.start_soon(steer)
            env.release.set()
        assert outcomes == ["next_request"]  # answered while the run waits for the decision
        assert len(env.seen) == 1
        await wait_pending("w-p")
        await DBOSAgent.approve("w-p", {"p1": True})
    (result,) = results
    assert env.seen[1] == ["go", "and log it"]
    assert texts(result.state).count("and log it") == 1


async def test_a_steer_the_run_never_read_is_kept_when_it_ends(env: Env) -> None:
    env.reset([[tool_use("pay", "p1")]])
    results: list[Any] = []

    async def run() -> None:
        results.append(await env.durable.run("pay it", session_id="steer-end", workflow_id="w-end"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        wid = "w-end"
        await wait_pending(wid)
        await DBOSAgent.steer(wid, "never mind")
        await interrupt_session(env.sessions, "steer-end")
    (result,) = results
    assert result.interrupted and len(env.seen) == 1
    assert texts(result.state).count("never mind") == 1  # kept for the next request
    # After the run nobody holds the session: a steer says so and records nothing.
    assert await steer_session(env.sessions, "steer-end", "late", wait=1) == "no_run"


# -- a steer survives a SIGKILL of the worker ----------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
STEER_WORKER = Path(__file__).with_name("_durable_steer_worker.py")


def _worker(mode: str, db: str, workdir: Path, kill: str | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(STEER_WORKER), mode, db, str(workdir), *([kill] if kill else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def _steer_and_approve(db: str) -> None:
    """From another process: a client of the system database, no DBOS app."""
    client = dbos.DBOSClient(system_database_url=db, serializer=dbos.DBOSPortableJSONSerializer())
    try:
        pending = await client.get_event_async("steer-1", PENDING_EVENT, timeout_seconds=40)
        assert [c["id"] for c in pending] == ["p1"]
        await DBOSAgent.steer("steer-1", "use the backup card", client=client)
        await client.send_async("steer-1", {"p1": True}, APPROVALS_TOPIC)
    finally:
        client.destroy()


@pytest.mark.timeout(150)
def test_an_approval_and_a_steer_survive_sigkills_between_approve_and_execute(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    # 1. The run waits for approval; the steer and the approval are recorded from another
    #    process; the worker dies as the approved call starts (it has done nothing yet).
    with _worker("start", db, tmp_path, "pay_entry") as first:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "launched"
        anyio.run(_steer_and_approve, db)
        _, err = first.communicate(timeout=50)
    assert first.returncode == -signal.SIGKILL, err[-3000:]
    # 2. Recovery replays the recorded decision and runs the call; the next request reads
    #    the steer, and the worker dies inside that request.
    with _worker("resume", db, tmp_path, "in_model_2") as second:
        _, err = second.communicate(timeout=50)
    assert second.returncode == -signal.SIGKILL, err[-3000:]
    # 3. Recovery again: the recorded steer is placed at the same point, once.
    with _worker("resume", db, tmp_path) as third:
        out, err = third.communicate(timeout=50)
    assert third.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"memory": ["go", "use the backup card"], "output": "read 2 messages"}
    # The approved call ran exactly once (the kill came before its effect), with its key.
    assert (tmp_path / "ledger.log").read_text().splitlines() == ["steer-1/p1"]
    requests = [json.loads(line) for line in (tmp_path / "model.log").read_text().splitlines()]
    # Request 2 was in flight at the second kill: sent again, with the steer both times.
    assert requests == [["go"], ["go", "use the backup card"], ["go", "use the backup card"]]

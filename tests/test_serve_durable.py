"""Durable served turns: ``create_app(durable=True)`` runs each turn as a DBOS workflow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit.agent import ReActAgent  # noqa: E402
from agentkit.memory import check_memory_invariant  # noqa: E402
from agentkit.messages import Msg  # noqa: E402
from agentkit.serve import create_app  # noqa: E402
from agentkit.session import SQLiteSession  # noqa: E402
from agentkit.testing import ScriptedModel, tool_use  # noqa: E402
from agentkit.tools import Toolkit  # noqa: E402
from tests._serve_helpers import running, sse_events  # noqa: E402

DBOS = dbos.DBOS
ROOT = Path(__file__).resolve().parent.parent


class Served:
    """One durable app in this process (DBOS is one per process)."""

    def __init__(self, tmp: Path) -> None:
        self.release = anyio.Event()
        self.calls: list[str] = []
        toolkit = Toolkit()

        @toolkit.tool
        async def work(name: str) -> str:
            """Do some work once released.

            Args:
                name: What to do.
            """
            await self.release.wait()
            self.calls.append(name)
            return f"{name} done"

        self.blocking = anyio.Event()

        @toolkit.tool
        async def block() -> str:
            """Block until interrupted."""
            self.blocking.set()
            await anyio.sleep_forever()
            return "unreachable"

        self.model = ScriptedModel([])
        self.agent = ReActAgent("worker", "You work.", self.model, toolkit, print_hint=False)
        self.sessions = SQLiteSession(tmp / "threads.db")
        self.app = create_app(self.agent, sessions=self.sessions, durable=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("serve-dbos")
    DBOS(
        config={
            "name": "agentkit-serve-durable",
            "system_database_url": f"sqlite:///{tmp / 'dbos.sqlite'}",
            "executor_id": "serve-test",
            "application_version": "test-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    env = Served(tmp)
    DBOS.launch()
    yield env
    DBOS.destroy(destroy_registry=True)


def body(thread: str, run: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "state": None,
        "messages": [{"id": f"m-{run}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": None,
    }


async def test_a_durable_turn_streams_while_its_workflow_runs(served: Served) -> None:
    served.agent.model = ScriptedModel([[tool_use("work", "c1", name="report")], "all done"])
    async with running(served.app) as url, httpx2.AsyncClient(timeout=30) as client:
        seen: list[str] = []
        async with client.stream("POST", f"{url}/agui", json=body("t1", "r1", "go")) as resp:
            assert resp.status_code == 200
            async for event in sse_events(resp):
                seen.append(event["type"])
                if event["type"] == "TOOL_CALL_END":
                    # The workflow is still running (the tool waits): the stream is live.
                    assert "RUN_FINISHED" not in seen and not served.calls
                    served.release.set()
                if event["type"] == "RUN_FINISHED":
                    assert event["outcome"]["type"] == "success"
        thread = (await client.get(f"{url}/threads/t1")).json()
    assert "TOOL_CALL_START" in seen and "TOOL_CALL_RESULT" in seen
    assert seen.index("TOOL_CALL_RESULT") < seen.index("TEXT_MESSAGE_CONTENT")
    assert seen[-1] == "RUN_FINISHED" and served.calls == ["report"]
    assert thread["running"] is False
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert thread["messages"][-1]["content"] == "all done"
    # The turn ran as a workflow: the model requests, the call and the commit are steps
    # (between them, the DBOS.recv operations that take the turn's steers).
    [workflow] = await DBOS.list_workflows_async(workflow_id_prefix="agentkit.serve/")
    assert workflow.status == "SUCCESS"
    recorded = await DBOS.list_workflow_steps_async(workflow.workflow_id)
    steps = [s["function_name"] for s in recorded if not s["function_name"].startswith("DBOS.")]
    assert steps == ["model:scripted", "tool:work", "model:scripted", "agentkit.save"]


async def test_stop_reaches_a_durable_turn_and_its_repaired_memory_is_committed(
    served: Served,
) -> None:
    served.agent.model = ScriptedModel([[tool_use("block", "b1")], "never"])
    async with running(served.app) as url, httpx2.AsyncClient(timeout=30) as client:
        outcome: list[str] = []

        async def read() -> None:
            async with client.stream("POST", f"{url}/agui", json=body("t2", "r1", "wait")) as r:
                async for event in sse_events(r):
                    if event["type"] == "RUN_FINISHED":
                        outcome.append(event["outcome"]["type"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            with anyio.fail_after(20):
                await served.blocking.wait()
            stop = (await client.post(f"{url}/threads/t2/interrupt")).json()
        thread = (await client.get(f"{url}/threads/t2")).json()
    assert stop["status"] == "stopped" and outcome == ["cancelled"]
    assert thread["running"] is False
    assert [m["role"] for m in thread["messages"]][:3] == ["user", "assistant", "tool"]
    workflows = await DBOS.list_workflows_async(workflow_id_prefix="agentkit.serve/serve/local/t2/")
    assert [w.status for w in workflows] == ["SUCCESS"]


# -- a worker SIGKILLed mid-tool ------------------------------------------------------------
def start_worker(workdir: Path, executor: str, kill: str | None = None) -> tuple[Any, str]:
    cmd = [sys.executable, "-m", "tests._serve_durable_worker", str(workdir), executor]
    proc = subprocess.Popen(
        [*cmd, *([kill] if kill else [])],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("port "), first
    url = f"http://127.0.0.1:{int(first.split()[1])}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the socket is bound; wait until uvicorn answers
        try:
            if httpx2.get(f"{url}/healthz").status_code == 200:
                return proc, url
        except httpx2.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the worker did not start")


def stop_worker(proc: Any) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.timeout(90)
def test_a_turn_whose_worker_died_mid_tool_is_recovered_and_committed_once(
    tmp_path: Path,
) -> None:
    first, url = start_worker(tmp_path, "worker-a", "in_tool_3")
    seen: list[str] = []
    try:
        with httpx2.stream("POST", f"{url}/agui", json=body("t1", "r1", "run-1"), timeout=30) as r:
            assert r.status_code == 200
            try:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        seen.append(json.loads(line[6:])["type"])
            except httpx2.TransportError:
                pass  # the worker died mid-stream
        assert first.wait(30) == -signal.SIGKILL
    finally:
        stop_worker(first)
    assert seen.count("TOOL_CALL_RESULT") == 2 and "RUN_FINISHED" not in seen  # it streamed
    # The same worker restarts (its executor id): DBOS recovers the turn at launch.
    second, url = start_worker(tmp_path, "worker-a")
    try:
        deadline = time.monotonic() + 30
        thread = httpx2.get(f"{url}/threads/t1").json()
        while thread["running"] and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the public API: the recovered commit lands on its own
            thread = httpx2.get(f"{url}/threads/t1").json()
        assert thread["running"] is False
        # The thread holds the turn once, whole.
        roles = [m["role"] for m in thread["messages"]]
        assert roles == ["user"] + ["assistant", "tool"] * 5 + ["assistant"]
        assert thread["messages"][0]["content"] == "run-1"
        assert thread["messages"][-1]["content"] == "appended 5"
        # Calls 1 and 2 completed before the kill: replayed, not run again. Call 3 was in
        # flight (the at-least-once boundary) and ran again with the same key.
        calls = [int(line.split()[1]) for line in lines(tmp_path / "ledger.log")]
        assert calls == [1, 2, 3, 3, 4, 5]
        assert [line.split()[-1] for line in lines(tmp_path / "model.log")] == [
            "1",
            "2",
            "3",
            "4",
            "5",
            "6",
        ]
        # The next turn runs normally on the recovered thread.
        with httpx2.stream("POST", f"{url}/agui", json=body("t1", "r2", "run-2"), timeout=30) as r:
            events = [json.loads(x[6:]) for x in r.iter_lines() if x.startswith("data: ")]
        assert events[-1]["type"] == "RUN_FINISHED"
    finally:
        stop_worker(second)
    stored = anyio.run(SQLiteSession(tmp_path / "threads.db").load_state, "serve/local/t1")
    assert stored is not None and stored["lease"] is None
    memory = [Msg.from_dict(m) for m in stored["agent"]["memory"]["messages"]]  # type: ignore[index]
    check_memory_invariant(memory)
    assert [m.get_text() for m in memory if m.role == "user" and m.get_text()] == ["run-1", "run-2"]

"""A remote A2A agent inside a durable run: a worker killed while the remote task runs is
recovered without sending the remote message again. A child process runs the DBOS
workflow (SQLite); the remote agent is a reference server written with a2a-sdk's executor
API, served by uvicorn on 127.0.0.1 in this process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part, Task

from agentkit.a2a._client import HANDOFF_HEADER
from tests._serve_helpers import running
from tests.test_a2a_remote import reference_app

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("_a2a_durable_worker.py")


class Holder(AgentExecutor):
    """Answers each message with a count; holds a handed-over conversation until released."""

    def __init__(self) -> None:
        self.name = "geo"
        self.got: list[str] = []
        self.holding = anyio.Event()
        self.release = anyio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await event_queue.enqueue_event(
            Task(id=context.task_id, context_id=context.context_id, history=[context.message])
        )
        self.got.append(context.get_user_input())
        await updater.start_work(updater.new_agent_message([Part(text="reading")]))
        if self.got[-1].startswith(HANDOFF_HEADER):
            self.holding.set()
            await self.release.wait()
        await updater.add_artifact([Part(text=f"geo answer {len(self.got)}")], artifact_id="a")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def worker(mode: str, db: str, url: str) -> list[str]:
    return [sys.executable, str(WORKER), mode, db, url]


ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.timeout(60)
async def test_a_worker_killed_during_a_remote_handoff_recovers_without_sending_it_again(
    tmp_path: Path,
) -> None:
    executor = Holder()
    app = reference_app(executor)
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    async with running(app) as url:
        app.state.url = url
        first = await anyio.open_process(worker("start", db, url), cwd=ROOT, env=ENV)
        try:
            with anyio.fail_after(30):
                await executor.holding.wait()  # the tool's answer is recorded, the handoff runs
        finally:
            first.kill()  # SIGKILL: no CancelTask, the step never records its output
            await first.wait()
        executor.release.set()  # the remote task goes on and completes with nobody listening
        with anyio.fail_after(40):
            second = await anyio.run_process(
                worker("resume", db, url), cwd=ROOT, env=ENV, check=False
            )
    assert second.returncode == 0, second.stderr.decode()[-3000:]
    report = json.loads(second.stdout.decode().strip().splitlines()[-1])
    # Each remote message was sent once: the tool call replayed from its step, the handoff
    # step executed again followed the task the killed worker had started.
    assert executor.got[0] == "capital of France?" and len(executor.got) == 2
    assert (report["text"], report["last_agent"]) == ("geo answer 2", "geo")
    assert report["steps"] == ["model:scripted", "tool:ask_geo", "model:scripted", "handoff:geo"]

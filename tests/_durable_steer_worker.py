"""A durable-run worker process for the steer-survives-SIGKILL tests.

Usage: python tests/_durable_steer_worker.py MODE DB_URL WORKDIR [KILL_POINT]

* MODE ``start``: launch DBOS and run the workflow ``steer-1``: request 1 asks for the tool
  ``wait``, which prints ``running`` and reads one line from stdin (the test process sends
  the steer, then that line); request 2 answers. ``KILL_POINT`` makes the process SIGKILL
  itself: ``in_tool`` (after the line: the steer is recorded, not yet read), ``in_model_2``
  (inside request 2, which has the steer: read and stored, the answer not recorded).
* MODE ``resume``: launch DBOS under the same executor id (it recovers ``steer-1`` at
  launch) and wait for the run's result.

Prints one JSON line: the user texts of memory (checked by the memory invariant) and the
user texts of every model request it received. The model appends each request's user texts
to WORKDIR/model.log (the "server side" record).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from dbos import DBOS, DBOSPortableJSONSerializer

from agentkit.agent import ReActAgent
from agentkit.durable import DBOSAgent
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models._base import ChatModel, ChatResponse
from agentkit.testing import tool_use
from agentkit.tools import Toolkit


def user_texts(messages: Sequence[Msg]) -> list[str]:
    return [m.get_text() for m in messages if m.role == "user" and m.get_blocks("text")]


class StepModel(ChatModel):
    """Request 1 asks for ``wait``; request 2 answers with what it saw."""

    provider = "steps"

    def __init__(self, workdir: Path, kill: str | None) -> None:
        super().__init__("step-model")
        self.workdir = workdir
        self.kill = kill

    async def __call__(self, messages: Sequence[Msg], *args: Any, **kwargs: Any) -> ChatResponse:
        seen = user_texts(messages)
        with (self.workdir / "model.log").open("a") as log:
            log.write(json.dumps(seen) + "\n")
        if not any(m.get_blocks("tool_result") for m in messages):
            return ChatResponse(content=[tool_use("wait", "w1")])
        if self.kill == "in_model_2":
            os.kill(os.getpid(), signal.SIGKILL)
        return ChatResponse(content=[{"type": "text", "text": f"read {len(seen)} messages"}])


def build(workdir: Path, mode: str, kill: str | None) -> DBOSAgent:
    toolkit = Toolkit()

    @toolkit.tool
    async def wait() -> str:
        """Wait for the test process."""
        if mode == "start":
            print("running", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            if kill == "in_tool":
                os.kill(os.getpid(), signal.SIGKILL)
        return "waited"

    agent = ReActAgent("steps", "Work.", StepModel(workdir, kill), toolkit, print_hint=False)
    return DBOSAgent(agent, name="steer-crash")


async def main(mode: str, db_url: str, workdir: Path, kill: str | None) -> None:
    durable = build(workdir, mode, kill)
    DBOS(
        config={
            "name": "agentkit-durable-steer",
            "system_database_url": db_url,
            "executor_id": "steer-worker",
            "application_version": "test-1",
            "serializer": DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    try:
        if mode == "start":
            result = await durable.run("go", workflow_id="steer-1")
        else:
            handle = await DBOS.retrieve_workflow_async("steer-1")
            result = DBOSAgent.result(await handle.get_result(), "steer-1")
        memory = [Msg.from_dict(m) for m in result.state["memory"]["messages"]]
        check_memory_invariant(memory)
        print(json.dumps({"memory": user_texts(memory), "output": result.output}), flush=True)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    mode, db_url, workdir = sys.argv[1:4]
    anyio.run(main, mode, db_url, Path(workdir), sys.argv[4] if len(sys.argv) > 4 else None)

"""A durable-run worker process for the crash test of approvals and steers.

Usage: python tests/_durable_steer_worker.py MODE DB_URL WORKDIR [KILL_POINT]

The workflow ``steer-1``: request 1 asks for ``pay`` (needs approval), so the run waits for
a decision; the test process (a ``DBOSClient``, no DBOS app) records a steer and then the
approval. Request 2 answers.

* MODE ``start``: launch DBOS (prints ``launched``) and start ``steer-1``.
* MODE ``resume``: launch DBOS under the same executor id (DBOS recovers ``steer-1`` at
  launch) and wait for the run's result.

``KILL_POINT`` makes the process SIGKILL itself: ``pay_entry`` (the approved call starts:
the decision is recorded, the call has done nothing), ``in_model_2`` (inside request 2,
which carries the steer: read and stored, the answer not recorded).

Prints one JSON line: the user texts of memory (checked by the memory invariant) and the
output. The model appends each request's user texts to WORKDIR/model.log; ``pay`` appends
its idempotency key to WORKDIR/ledger.log (the "server side" records).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from dbos import DBOS, DBOSPortableJSONSerializer

from agentkit.agent import ReActAgent
from agentkit.durable import DBOSAgent, idempotency_key
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest
from agentkit.testing import tool_use
from agentkit.tools import Toolkit


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def user_texts(messages: Sequence[Msg]) -> list[str]:
    return [m.get_text() for m in messages if m.role == "user" and m.get_blocks("text")]


class StepModel(ChatModel):
    """Request 1 asks for ``pay``; request 2 answers with how many user texts it saw."""

    provider = "steps"

    def __init__(self, workdir: Path, kill: str | None) -> None:
        super().__init__("step-model")
        self.workdir = workdir
        self.kill = kill

    async def _request(self, request: ModelRequest) -> ChatResponse:
        messages = request.messages
        seen = user_texts(messages)
        with (self.workdir / "model.log").open("a") as log:
            log.write(json.dumps(seen) + "\n")
        if not any(m.get_blocks("tool_result") for m in messages):
            return ChatResponse(content=[tool_use("pay", "p1", amount=5)])
        if self.kill == "in_model_2":
            die()
        return ChatResponse(content=[{"type": "text", "text": f"read {len(seen)} messages"}])


def build(workdir: Path, kill: str | None) -> DBOSAgent:
    toolkit = Toolkit()

    @toolkit.tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        if kill == "pay_entry":
            die()
        with (workdir / "ledger.log").open("a") as ledger:
            ledger.write(f"{idempotency_key()}\n")
        return f"paid {amount}"

    agent = ReActAgent("steps", "Work.", StepModel(workdir, kill), toolkit, print_hint=False)
    return DBOSAgent(agent, name="steer-crash")


async def main(mode: str, db_url: str, workdir: Path, kill: str | None) -> None:
    durable = build(workdir, kill)
    DBOS(
        config={
            "name": "agentkit-durable-steer",
            "system_database_url": db_url,
            "executor_id": "steer-worker",
            "application_version": "test-1",
            "serializer": DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    print("launched", flush=True)  # the system database exists from here on
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

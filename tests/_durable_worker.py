"""A durable-run worker process for the crash and multi-worker tests.

Usage: python tests/_durable_worker.py MODE DB_URL WORKDIR EXECUTOR_ID [KILL_POINT]

* MODE ``start``: launch DBOS, run the workflow ``run-1`` (5 sequential tool calls), print
  the result; ``KILL_POINT`` makes the process SIGKILL itself: ``after_tool_3`` (as the 4th
  model request starts, the 3rd call's step recorded), ``in_model_3`` (inside the 3rd model
  request, after the model server counted it), ``in_tool_3`` (inside the 3rd tool call,
  after its side effect).
* MODE ``resume``: launch DBOS (same executor id: DBOS recovers its pending workflows at
  launch; another executor id: after ``agentkit durable recover``, it takes them from the
  queue) and print the result of ``run-1``.
* MODE ``serve``: consume the ``agents`` queue until killed (multi-worker test).
* MODE ``hold``: (DB_URL also holds the sessions: a Postgres URL) run session ``held`` with
  a tool that blocks; print ``running`` once it blocks, then the result once another
  process interrupted it through the control channel (``interrupt_session``).

The model is a deterministic function of the conversation (request k asks for call k) that
appends one line per request it receives to WORKDIR/model.log: the "server side" count. The
tool appends ``call N key`` to WORKDIR/ledger.log, ``key`` being its idempotency key.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
from dbos import DBOS, DBOSPortableJSONSerializer

from agentkit.agent import ReActAgent
from agentkit.durable import DBOSAgent, idempotency_key
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest
from agentkit.session import PostgresSession
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit

CALLS = 5


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class LedgerModel(ChatModel):
    """Request k (k tool results so far + 1) asks for call k+1; after CALLS calls, answers."""

    provider = "ledger"

    def __init__(self, workdir: Path, kill: str | None) -> None:
        super().__init__("ledger-model")
        self.workdir = workdir
        self.kill = kill

    async def _request(self, request: ModelRequest) -> ChatResponse:
        messages = request.messages
        done = sum(len(m.get_blocks("tool_result")) for m in messages)
        run = next((m.get_text() for m in messages if m.role == "user"), "")
        if self.kill == "after_tool_3" and done == 3:
            die()
        with (self.workdir / "model.log").open("a") as log:
            log.write(f"{run} request {done + 1}\n")
        if self.kill == "in_model_3" and done == 2:
            die()
        if done >= CALLS:
            return ChatResponse(content=[{"type": "text", "text": f"appended {done}"}])
        return ChatResponse(content=[tool_use("append", f"call-{done + 1}", n=done + 1)])


def build(workdir: Path, kill: str | None) -> DBOSAgent:
    toolkit = Toolkit()

    delay = float(os.environ.get("LEDGER_TOOL_DELAY", "0"))

    @toolkit.tool
    async def append(n: int) -> str:
        """Append a line to the ledger.

        Args:
            n: The call number.
        """
        await anyio.sleep(delay)
        with (workdir / "ledger.log").open("a") as ledger:
            ledger.write(f"call {n} {idempotency_key()}\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        if kill == "in_tool_3" and n == 3:
            die()
        return f"appended {n}"

    agent = ReActAgent("ledger", "Append.", LedgerModel(workdir, kill), toolkit, print_hint=False)
    return DBOSAgent(agent, name="ledger")


def launch(db_url: str, executor: str) -> None:
    DBOS(
        config={
            "name": "agentkit-durable-test",
            "system_database_url": db_url,
            "executor_id": executor,
            "application_version": "test-1",
            "serializer": DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )


def build_blocking(sessions: Any) -> DBOSAgent:
    toolkit = Toolkit()

    @toolkit.tool
    async def block() -> str:
        """Block until interrupted."""
        print("running", flush=True)
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([[tool_use("block", "b1")], "never"])
    agent = ReActAgent("holder", "Wait.", model, toolkit, print_hint=False)
    return DBOSAgent(agent, name="holder", sessions=sessions)


async def hold(db_url: str, executor: str) -> None:
    async with PostgresSession(db_url, table="held_sessions") as sessions:
        durable = build_blocking(sessions)
        launch(db_url, executor)
        DBOS.launch()
        try:
            result = await durable.run("wait for me", session_id="held")
            memory = [Msg.from_dict(m) for m in result.state["memory"]["messages"]]
            check_memory_invariant(memory)
            saved = await sessions.load_state("held")
            print(
                json.dumps(
                    {
                        "stop_reason": result.stop_reason,
                        "saved": saved == result.state,
                        "last": memory[-1].get_text(),
                    }
                ),
                flush=True,
            )
        finally:
            DBOS.destroy()


async def main(mode: str, db_url: str, workdir: Path, executor: str, kill: str | None) -> None:
    if mode == "hold":
        await hold(db_url, executor)
        return
    durable = build(workdir, kill)
    launch(db_url, executor)
    DBOS.launch()
    if mode == "serve":
        await DBOS.register_queue_async("agents", worker_concurrency=4, polling_interval_sec=0.1)
    try:
        if mode == "start":
            result = await durable.run("run-1", workflow_id="run-1")
        elif mode == "resume":
            handle = await DBOS.retrieve_workflow_async("run-1")
            result = DBOSAgent.result(await handle.get_result(), "run-1")
        else:
            print("serving", flush=True)
            await anyio.sleep_forever()
            return
        print(json.dumps({"output": result.output, "stop_reason": result.stop_reason}))
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    mode, db_url, workdir, executor = sys.argv[1:5]
    kill = sys.argv[5] if len(sys.argv) > 5 else None
    anyio.run(main, mode, db_url, Path(workdir), executor, kill)

"""A served durable worker process: uvicorn + ``create_app(durable=True)`` on SQLite DBOS.

Usage: python -m tests._serve_durable_worker WORKDIR EXECUTOR_ID [in_tool_3]

Prints ``port N`` once it serves. DBOS's system database and the thread store are SQLite
files in WORKDIR; the model is ``tests._durable_worker.LedgerModel`` (request k asks for
call k, 5 calls, then ``appended 5``; one line per request in WORKDIR/model.log) and the
tool appends ``call N key`` to WORKDIR/ledger.log. ``in_tool_3`` SIGKILLs the process inside
the 3rd call, after its side effect. A restart under the same executor id recovers the
unfinished turn at ``DBOS.launch()``.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import anyio
import uvicorn
from dbos import DBOS, DBOSPortableJSONSerializer

from agentkit.agent import ReActAgent
from agentkit.durable import idempotency_key
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.tools import Toolkit
from tests._durable_worker import LedgerModel, die


def build(workdir: Path, kill: str | None) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool
    async def append(n: int) -> str:
        """Append a line to the ledger.

        Args:
            n: The call number.
        """
        with (workdir / "ledger.log").open("a") as ledger:
            ledger.write(f"call {n} {idempotency_key()}\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        if kill == "in_tool_3" and n == 3:
            die()
        return f"appended {n}"

    return ReActAgent("ledger", "Append.", LedgerModel(workdir, None), toolkit, print_hint=False)


async def main(workdir: Path, executor: str, kill: str | None) -> None:
    DBOS(
        config={
            "name": "agentkit-serve-durable-test",
            "system_database_url": f"sqlite:///{workdir / 'dbos.sqlite'}",
            "executor_id": executor,
            "application_version": "test-1",
            "serializer": DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    sessions = SQLiteSession(workdir / "threads.db")
    app = create_app(build(workdir, kill), sessions=sessions, durable=True)
    DBOS.launch()  # recovers this executor's unfinished turns
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    try:
        await uvicorn.Server(config).serve([sock])
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    args = sys.argv[1:]
    anyio.run(main, Path(args[0]), args[1], args[2] if len(args) > 2 else None)

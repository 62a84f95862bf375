"""One uvicorn worker of a multi-worker deployment, for tests/test_serve_multiworker.py.

``python -m tests._serve_worker_app STORE LEASE_SECONDS [MAX_RUNS_PER_CLIENT]`` serves the test agent
(:func:`tests._serve_agents.make_agent`: the scripted demo model, the slow tool) on a port the
OS picks (printed as ``port N``), with threads in STORE: ``sqlite:<path>``, ``json:<dir>``,
``postgres:<url>``, ``redis:<url>`` or ``memory:`` (a dict in the process: for measuring what
the store itself costs a served turn; one worker only). Several such processes on one store are the workers behind a balancer.
"""

from __future__ import annotations

import socket
import sys

from agentkit.session import (
    EncodedState,
    JSONSession,
    PostgresSession,
    RedisSession,
    Session,
    SQLiteSession,
)
from tests._serve_agents import make_agent


class MemorySession(Session):
    """Sessions in a dict (versioned like every store): no I/O, no thread hops."""

    backend = "memory"

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, int]] = {}

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        from agentkit.exceptions import SessionConflictError

        actual = self.data.get(session_id, ("", 0))[1]
        if expected is not None and expected != actual:
            raise SessionConflictError(session_id, expected, actual, self.backend)
        self.data[session_id] = (state.head, actual + 1)
        return actual + 1

    async def _read(
        self, session_id: str
    ) -> tuple[str | dict[str, object], int, dict[str, list[str]]] | None:
        found = self.data.get(session_id)
        return None if found is None else (*found, {})

    async def _delete(self, session_id: str) -> bool:
        return self.data.pop(session_id, None) is not None

    async def _list_ids(self) -> list[str]:
        return list(self.data)


def store_for(spec: str) -> Session:
    """The session store named by ``spec``."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SQLiteSession(where)
    if kind == "json":
        return JSONSession(where)
    if kind == "memory":
        return MemorySession()
    if kind == "postgres":
        return PostgresSession(where)
    if kind == "redis":
        return RedisSession(where)
    raise SystemExit(f"unknown store {spec!r}")


def main() -> None:
    import uvicorn

    from agentkit.serve import configure_logging, create_app

    configure_logging("WARNING")  # what an operator sees: one line per failed run or save
    store, lease = store_for(sys.argv[1]), float(sys.argv[2])
    limits = {"max_runs_per_client": int(sys.argv[3])} if len(sys.argv) > 3 else {}
    app = create_app(make_agent, sessions=store, lease_seconds=lease, **limits)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()

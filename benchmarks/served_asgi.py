"""A served turn without sockets: the app's ASGI path against the same turn in process.

``python -m benchmarks.served_asgi [--turns 50] [--inproc] [--profile FILE]`` drives
``create_app`` (the app of ``benchmarks.served_cpu``: the scripted demo agent, threads in a
dict) with ASGI messages directly, no server and no socket: ``--turns`` ``POST /agui`` turns
at once, each on a new thread, its body read to the end. What a turn costs here beyond the
in-process turn (``--inproc``: the same turns as ``agent.run``) is agentkit's and
Starlette's part of a served turn: routing, the handler, the claim and commit, translating
and encoding the events, the SSE response loop. uvicorn's parsing and the sockets are not in
it (``benchmarks.served_cpu`` measures everything).

Prints CPU per turn (``time.process_time``), the body writes per turn and the events per
turn; ``--profile FILE``: Python calls per turn (cProfile over the burst only). Deterministic
counts (calls, writes) are what to compare; for instructions run it under
``valgrind --tool=cachegrind --cache-sim=no`` with two ``--turns`` and take the difference.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

TEXT = "weather in Paris and Tokyo"


def _scope(body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/agui",
        "raw_path": b"/agui",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


class _Totals:
    def __init__(self) -> None:
        self.writes = 0
        self.events = 0
        self.failed = 0


async def _turn(app: Any, totals: _Totals) -> None:
    body = json.dumps(
        {
            "threadId": secrets.token_hex(8),
            "runId": secrets.token_hex(8),
            "messages": [{"id": secrets.token_hex(8), "role": "user", "content": TEXT}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    ).encode()
    sent = False
    done = anyio.Event()
    last = b""

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal last
        if message["type"] == "http.response.body" and message.get("body"):
            totals.writes += 1
            totals.events += message["body"].count(b"\ndata: ")
            last = message["body"]
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(_scope(body), receive, send)
    totals.failed += b'"RUN_FINISHED"' not in last


async def served(turns: int, prof: str) -> dict[str, float]:
    """``turns`` turns at once through the app (after a warm-up)."""
    from agentkit.serve import configure_logging, create_app
    from tests._serve_agents import make_agent
    from tests._serve_worker_app import MemorySession

    configure_logging("WARNING")
    app = create_app(make_agent, sessions=MemorySession(), max_runs_per_client=None)
    totals = _Totals()
    async with app.router.lifespan_context(app):
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(_turn, app, _Totals())
        profiler = cProfile.Profile(time.thread_time) if prof else None
        before = time.process_time()
        if profiler is not None:
            profiler.enable()
        async with anyio.create_task_group() as tg:
            for _ in range(turns):
                tg.start_soon(_turn, app, totals)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(prof)
        cpu = time.process_time() - before
        await anyio.sleep(0.2)  # the runs' commits
    return {
        "cpu_ms": 1000 * cpu / turns,
        "writes": totals.writes / turns,
        "events": totals.events / turns,
        "failed": totals.failed,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--inproc", action="store_true", help="the same turns in process")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the burst to FILE")
    args = parser.parse_args()
    if args.inproc:
        from benchmarks.served_cpu import in_process

        row = anyio.run(in_process, args.turns, TEXT, args.profile or "", 0)
        print(f"in process: cpu/turn {row['cpu_ms']:.2f} ms")
    else:
        row = anyio.run(served, args.turns, args.profile or "")
        print(
            f"served (ASGI, no socket): cpu/turn {row['cpu_ms']:.2f} ms, body writes/turn "
            f"{row['writes']:.1f}, events/turn {row['events']:.1f}, failed {row['failed']}"
        )
    if args.profile:
        calls = sum(v[1] for v in pstats.Stats(args.profile).stats.values())  # type: ignore[attr-defined]
        print(f"Python calls per turn: {calls / args.turns:.0f}")
    return 1 if row.get("failed") else 0


if __name__ == "__main__":
    raise SystemExit(main())

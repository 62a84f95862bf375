"""Served turn cost: server CPU per turn and time to first event, against the same turn in process.

``python -m benchmarks.served_cpu [--workers 1 3] [--streams 200] [--text "weather in Paris
and Tokyo"] [--quick]`` starts N uvicorn workers (``tests._serve_worker_app``: the scripted
demo model, its tools, SQLite threads), warms them up, then sends ``--streams`` turns at once,
each on a new thread, spread round-robin over the workers. Measured:

* **server CPU per turn**: the workers' user+system CPU time (``/proc/<pid>/stat``) over the
  burst, divided by the turns;
* **time to first event** p50/p99: from sending the request to its first SSE event.

Then the same turn in process, in this process and the same run: ``--streams`` fresh agents
(the same factory), each ``agent.run`` on the same text at once; CPU per turn
(``time.process_time``) and time to the agent's first event. Prints each row and the ratios
served/in-process. ``--quick``: 50 streams, one worker count (1). ``--store memory:``
serves from a dict in the worker (no store I/O, the in-process control channel): the
difference to a real store is what the store and its control channel cost a turn.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from tests._serve_workers import start_workers  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _turn(client: httpx2.AsyncClient, url: str, text: str) -> tuple[float, bool]:
    body = {
        "threadId": secrets.token_hex(8),
        "runId": secrets.token_hex(8),
        "messages": [{"id": secrets.token_hex(8), "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    sent = time.perf_counter()
    first = 0.0
    last: dict[str, Any] = {}
    async with client.stream("POST", f"{url}/agui", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                if not first:
                    first = time.perf_counter() - sent
                last = json.loads(line[6:])
    ok = last.get("type") == "RUN_FINISHED" and (last.get("outcome") or {}).get("type") == "success"
    return first, ok


async def served(workers: int, streams: int, text: str, store: str) -> dict[str, float]:
    store = store or f"sqlite:{tempfile.mkdtemp()}/threads.db"
    running = start_workers(store, workers, 15.0, max_runs=streams + 10)
    urls = [w.url for w in running]
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=2)
    try:
        async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
            async with anyio.create_task_group() as tg:  # warm-up: imports, first connections
                for i in range(4 * workers):
                    tg.start_soon(_turn, client, urls[i % workers], text)
            firsts: list[float] = []
            failed = 0
            before = sum(cpu_seconds(w.proc.pid) for w in running)

            async def one(i: int) -> None:
                nonlocal failed
                first, ok = await _turn(client, urls[i % workers], text)
                firsts.append(first)
                failed += not ok

            async with anyio.create_task_group() as tg:
                for i in range(streams):
                    tg.start_soon(one, i)
            cpu = sum(cpu_seconds(w.proc.pid) for w in running) - before
    finally:
        for worker in running:
            worker.stop()
    return {
        "cpu_ms": 1000 * cpu / streams,
        "ttfe_p50_ms": 1000 * statistics.median(firsts),
        "ttfe_p99_ms": 1000 * pct(firsts, 0.99),
        "failed": failed,
    }


async def in_process(streams: int, text: str) -> dict[str, float]:
    from agentkit.messages import Msg
    from tests._serve_agents import make_agent

    for _ in range(4):  # warm-up
        await make_agent().run([Msg("user", text, "user")])
    firsts: list[float] = []

    async def one() -> None:
        agent = make_agent()
        started = time.perf_counter()
        seen: list[float] = []

        def listener(_: object) -> None:
            if not seen:
                seen.append(time.perf_counter() - started)

        agent.add_event_listener(listener)
        await agent.run([Msg("user", text, "user")])
        firsts.append(seen[0])

    before = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(streams):
            tg.start_soon(one)
    cpu = time.process_time() - before
    return {
        "cpu_ms": 1000 * cpu / streams,
        "ttfe_p50_ms": 1000 * statistics.median(firsts),
        "ttfe_p99_ms": 1000 * pct(firsts, 0.99),
        "failed": 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--text", default="weather in Paris and Tokyo")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--store",
        default="",
        help="sqlite:PATH (default: a new file), postgres:URL, redis:URL, or memory: (a dict "
        "in the worker: what the store itself costs; one worker only)",
    )
    args = parser.parse_args()
    if args.quick:
        args.workers, args.streams = [1], 50
    base = anyio.run(in_process, args.streams, args.text)
    print(
        f"in process      : cpu/turn {base['cpu_ms']:.2f} ms, first event p50 "
        f"{base['ttfe_p50_ms']:.1f} ms p99 {base['ttfe_p99_ms']:.1f} ms"
    )
    bad = 0
    for n in args.workers:
        row = anyio.run(served, n, args.streams, args.text, args.store)
        bad += int(row["failed"])
        print(
            f"served {n} worker(s): cpu/turn {row['cpu_ms']:.2f} ms "
            f"({row['cpu_ms'] / base['cpu_ms']:.2f}x), first event p50 {row['ttfe_p50_ms']:.1f} ms "
            f"p99 {row['ttfe_p99_ms']:.1f} ms ({row['ttfe_p99_ms'] / base['ttfe_p99_ms']:.2f}x), "
            f"failed {row['failed']}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

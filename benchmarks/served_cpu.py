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
served/in-process. ``--quick``: 50 streams, one worker count (1). ``--history N``: each
measured turn is the next turn of a thread that had N before (not measured; in process, the
agent that ran them runs it, without a construction). ``--store memory:``
serves from a dict in the worker (no store I/O, the in-process control channel): the
difference to a real store is what the store and its control channel cost a turn.

``--profile PREFIX`` (one worker) measures counts instead of times, which load does not move:
the worker runs under this module (``worker`` mode: the same app) with cProfile on its
event loop's thread, timed by that thread's CPU clock, switched on for the burst only
(SIGUSR1 / SIGUSR2); it writes ``PREFIX.served.prof`` and prints the Python calls, tasks
and task groups per served turn, next to the same counts for the in-process turn
(``PREFIX.inproc.prof``). ``--strace`` (one worker) counts the worker's syscalls over the
burst with ``strace -c -f`` instead.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from tests._serve_workers import Worker, start_workers  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _turn(
    client: httpx2.AsyncClient, url: str, text: str, thread: str = ""
) -> tuple[float, bool]:
    body = {
        "threadId": thread or secrets.token_hex(8),
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


class _ProfiledWorker(Worker):
    """A worker of the same app run by :func:`worker` (profiled on SIGUSR1 .. SIGUSR2)."""

    def __init__(self, store: str, max_runs: int, prof: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "benchmarks.served_cpu", "worker", store, str(max_runs), prof]
        self.log = None
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        self.url = ""


async def served(
    workers: int,
    streams: int,
    text: str,
    store: str,
    measure: str = "",
    prof: str = "",
    history: int = 0,
) -> dict[str, float]:
    """The burst against ``workers`` workers; ``measure``: "profile" or "strace" (one worker).

    ``history``: each turn of the burst is the next turn of a thread that had that many.
    """
    store = store or f"sqlite:{tempfile.mkdtemp()}/threads.db"
    if measure == "profile":
        running: list[Worker] = [_ProfiledWorker(store, streams + 10, prof).ready()]
    else:
        running = start_workers(store, workers, 15.0, max_runs=streams + 10)
    tracer: subprocess.Popen[str] | None = None
    urls = [w.url for w in running]
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=2)
    try:
        async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
            async with anyio.create_task_group() as tg:  # warm-up: imports, first connections
                for i in range(4 * workers):
                    tg.start_soon(_turn, client, urls[i % workers], text)
            threads = [secrets.token_hex(8) for _ in range(streams)]

            async def earlier(i: int) -> None:
                for _ in range(history):
                    await _turn(client, urls[i % workers], text, threads[i])

            async with anyio.create_task_group() as tg:
                for i in range(streams if history else 0):
                    tg.start_soon(earlier, i)
            firsts: list[float] = []
            failed = 0
            if measure == "profile":
                running[0].proc.send_signal(signal.SIGUSR1)
                await anyio.sleep(0.2)
            elif measure == "strace":
                tracer = _strace(running[0].proc.pid, prof)
                await anyio.sleep(1.0)
            before = sum(cpu_seconds(w.proc.pid) for w in running)

            async def one(i: int) -> None:
                nonlocal failed
                first, ok = await _turn(client, urls[i % workers], text, threads[i])
                firsts.append(first)
                failed += not ok

            async with anyio.create_task_group() as tg:
                for i in range(streams):
                    tg.start_soon(one, i)
            cpu = sum(cpu_seconds(w.proc.pid) for w in running) - before
            await anyio.sleep(0.3)  # the runs' last store writes and folder removals
            if measure == "profile":
                running[0].proc.send_signal(signal.SIGUSR2)
                await anyio.to_thread.run_sync(_wait_for, prof)
            elif tracer is not None:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(10)
    finally:
        for worker in running:
            worker.stop()
    return {
        "cpu_ms": 1000 * cpu / streams,
        "ttfe_p50_ms": 1000 * statistics.median(firsts),
        "ttfe_p99_ms": 1000 * pct(firsts, 0.99),
        "failed": failed,
    }


def _strace(pid: int, out: str) -> subprocess.Popen[str]:
    """``strace -c -f`` attached to ``pid`` until SIGINT (the summary goes to ``out``)."""
    return subprocess.Popen(
        ["strace", "-c", "-f", "-o", out, "-p", str(pid)], stderr=subprocess.DEVNULL, text=True
    )


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + 60
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the dump is being written


def counts(prof: str, turns: int) -> dict[str, float]:
    """Python calls, tasks and task groups per turn in a cProfile dump."""
    stats = pstats.Stats(prof)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    calls = sum(v[1] for v in raw.values())
    seconds = sum(v[2] for v in raw.values())

    def named(name: str, where: str = "") -> int:
        return sum(v[1] for k, v in raw.items() if k[2] == name and where in k[0])

    return {
        "calls": calls / turns,
        "cpu_ms": 1000 * seconds / turns,
        "tasks": named("create_task", "asyncio/base_events.py") / turns,
        "task_groups": named("create_task_group", "anyio/_core/_tasks.py") / turns,
    }


def worker() -> None:
    """``worker STORE MAX_RUNS PROF``: the benchmark's app, profiled from SIGUSR1 to SIGUSR2."""
    import asyncio
    import socket

    import uvicorn

    from agentkit.serve import configure_logging, create_app
    from tests._serve_agents import make_agent
    from tests._serve_worker_app import store_for

    store_spec, max_runs, prof = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    configure_logging("WARNING")
    app = create_app(
        make_agent, sessions=store_for(store_spec), lease_seconds=15.0, max_runs_per_client=max_runs
    )
    profiler = cProfile.Profile(time.thread_time)
    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())

    def dump(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(prof + ".tmp")
        os.replace(prof + ".tmp", prof)

    signal.signal(signal.SIGUSR2, dump)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


async def in_process(streams: int, text: str, prof: str = "", history: int = 0) -> dict[str, float]:
    """The same turns in process (``history``: agents made and given that many turns first;
    the timed turn is then their next one, without the agent's construction)."""
    from agentkit.messages import Msg
    from tests._serve_agents import make_agent

    for _ in range(4):  # warm-up
        await make_agent().run([Msg("user", text, "user")])
    firsts: list[float] = []
    ready = [make_agent() for _ in range(streams if history else 0)]

    async def earlier(agent: Any) -> None:
        for _ in range(history):
            await agent.run([Msg("user", text, "user")])

    async with anyio.create_task_group() as tg:
        for agent in ready:
            tg.start_soon(earlier, agent)

    async def one() -> None:
        agent = ready.pop() if ready else make_agent()
        started = time.perf_counter()
        seen: list[float] = []

        def listener(_: object) -> None:
            if not seen:
                seen.append(time.perf_counter() - started)

        agent.add_event_listener(listener)
        await agent.run([Msg("user", text, "user")])
        firsts.append(seen[0])

    profiler = cProfile.Profile(time.thread_time) if prof else None
    before = time.process_time()
    if profiler is not None:
        profiler.enable()
    async with anyio.create_task_group() as tg:
        for _ in range(streams):
            tg.start_soon(one)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(prof)
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
    parser.add_argument(
        "--history", type=int, default=0, help="earlier turns of each thread (not measured)"
    )
    parser.add_argument("--profile", metavar="PREFIX", help="count calls per turn (cProfile)")
    parser.add_argument("--strace", metavar="FILE", help="count the worker's syscalls")
    if sys.argv[1:2] == ["worker"]:
        worker()
        return 0
    args = parser.parse_args()
    if args.quick:
        args.workers, args.streams = [1], 50
    if args.profile or args.strace:
        return measure_counts(args)
    base = anyio.run(in_process, args.streams, args.text, "", args.history)
    print(
        f"in process      : cpu/turn {base['cpu_ms']:.2f} ms, first event p50 "
        f"{base['ttfe_p50_ms']:.1f} ms p99 {base['ttfe_p99_ms']:.1f} ms"
    )
    bad = 0
    for n in args.workers:
        row = anyio.run(served, n, args.streams, args.text, args.store, "", "", args.history)
        bad += int(row["failed"])
        print(
            f"served {n} worker(s): cpu/turn {row['cpu_ms']:.2f} ms "
            f"({row['cpu_ms'] / base['cpu_ms']:.2f}x), first event p50 {row['ttfe_p50_ms']:.1f} ms "
            f"p99 {row['ttfe_p99_ms']:.1f} ms ({row['ttfe_p99_ms'] / base['ttfe_p99_ms']:.2f}x), "
            f"failed {row['failed']}"
        )
    return 1 if bad else 0


def measure_counts(args: argparse.Namespace) -> int:
    """``--profile`` / ``--strace``: counts per turn, served (one worker) and in process."""
    if args.strace:
        row = anyio.run(
            served, 1, args.streams, args.text, args.store, "strace", args.strace, args.history
        )
        print(Path(args.strace).read_text())
        print(f"turns {args.streams}, failed {row['failed']}")
        return 1 if row["failed"] else 0
    inproc, prof = f"{args.profile}.inproc.prof", f"{args.profile}.served.prof"
    anyio.run(in_process, args.streams, args.text, inproc, args.history)
    row = anyio.run(served, 1, args.streams, args.text, args.store, "profile", prof, args.history)
    for name, path in (("in process", inproc), ("served", prof)):
        c = counts(path, args.streams)
        print(
            f"{name:10}: per turn {c['calls']:.0f} Python calls, {c['tasks']:.1f} tasks, "
            f"{c['task_groups']:.1f} task groups, {c['cpu_ms']:.2f} ms profiled CPU"
        )
    print(f"failed {row['failed']}")
    return 1 if row["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Stop under load: Stops sent to random workers of a served deployment, each checked.

``python -m benchmarks.served_stop [--workers 3] [--stops 100] [--parallel 10] [--load 6]
[--repeats 3] [--store sqlite:/tmp/x.db | postgres:URL | redis:URL]`` starts N uvicorn
workers (``tests._serve_worker_app``) on one store, keeps ``--load`` conversations sending
ordinary turns to random workers, and meanwhile runs ``--stops`` Stop cycles,
``--parallel`` at a time. A cycle starts a slow run on a random worker and, once it runs,
sends ``POST /threads/{id}/interrupt`` to a random worker (the same one: a local Stop;
another: a cross-worker Stop); one cycle in five stops a thread with no run instead.

Each answer is checked against what happened: ``stopped`` must end the run's stream with
``RUN_FINISHED`` cancelled and leave the thread not running; ``no_run`` is only truthful for
a thread with no run. Anything else (``unreachable``, a run that goes on, an HTTP error) is
a problem. Prints per repeat the local and cross-worker Stop p50/p99 (ms, from the request
to the answer, which comes once the turn is committed), then the medians over the repeats
and the ratio cross/local; exit status 1 when any Stop was not truthful. The default suite
runs a small version (tests/test_serve_stop_load.py).
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2

SLOW = 'call slow_task {"topic": "t"}'  # the test agent's tool: a minute, progress each 0.5 s
QUICK = "weather in Paris"  # an ordinary turn: one tool call (a second), then the answer


@dataclass
class StopReport:
    """What one :func:`stop_under_load` run found."""

    outcomes: dict[str, int] = field(default_factory=dict)
    """Answers by status (``stopped``, ``no_run``, ...)."""
    local_ms: list[float] = field(default_factory=list)
    """Latency of each ``stopped`` answer sent to the worker running the run."""
    cross_ms: list[float] = field(default_factory=list)
    """Latency of each ``stopped`` answer sent to another worker."""
    problems: list[str] = field(default_factory=list)
    """Every Stop whose answer was not the truth (empty: all were)."""
    load_turns: int = 0
    """Ordinary turns completed meanwhile (the load)."""

    @property
    def stops(self) -> int:
        """Stops sent."""
        return sum(self.outcomes.values())


def p(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` (nearest rank); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def _body(thread: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": secrets.token_hex(8),
        "messages": [{"id": secrets.token_hex(8), "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


class _Stream:
    """One run's events as they arrive; ``started``: it runs (or failed), ``ended``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.started = anyio.Event()
        self.ended = anyio.Event()

    async def post(self, c: httpx2.AsyncClient, url: str, body: Any) -> None:
        try:
            for _ in range(100):  # over the per-client run cap (429): as told, after a while
                async with c.stream("POST", f"{url}/agui", json=body) as response:
                    if response.status_code == 429:
                        await response.aread()
                        await anyio.sleep(min(float(response.headers.get("retry-after", 1)), 1))
                        continue
                    if response.status_code != 200:
                        await response.aread()
                        self.events.append({"type": "HTTP", "status": response.status_code})
                        return
                    await self._read(response)
                    return
            self.events.append({"type": "HTTP", "status": 429})
        finally:
            self.started.set()
            self.ended.set()

    async def _read(self, response: httpx2.Response) -> None:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                self.events.append(json.loads(line[6:]))
                if self.events[-1].get("type") in ("CUSTOM", "RUN_ERROR"):
                    self.started.set()


async def _stop(
    c: httpx2.AsyncClient, url: str, thread: str, report: StopReport
) -> tuple[str, float]:
    began = time.perf_counter()
    answer = await c.post(f"{url}/threads/{thread}/interrupt")
    took = (time.perf_counter() - began) * 1e3
    status = answer.json().get("status") if answer.status_code == 200 else None
    status = str(status) if status is not None else f"http {answer.status_code}"
    report.outcomes[status] = report.outcomes.get(status, 0) + 1
    return status, took


async def _running(c: httpx2.AsyncClient, url: str, thread: str) -> bool:
    got = await c.get(f"{url}/threads/{thread}")
    return bool(got.json().get("running"))


async def _cycle(
    c: httpx2.AsyncClient, urls: list[str], rng: random.Random, report: StopReport
) -> None:
    thread = secrets.token_hex(8)
    run_on, stop_on = rng.choice(urls), rng.choice(urls)
    if rng.random() < 0.2:  # a thread with no run: the only truthful answer is no_run
        await _Stream().post(c, run_on, _body(thread, "hello"))
        status, _ = await _stop(c, stop_on, thread, report)
        if status != "no_run":
            report.problems.append(f"{thread}: a thread with no run answered {status}")
        return
    stream = _Stream()
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.post, c, run_on, _body(thread, SLOW))
        with anyio.fail_after(60):
            await stream.started.wait()
        events = stream.events
        if not events or events[-1].get("type") != "CUSTOM":
            report.problems.append(f"{thread}: the run did not start: {events[-1:]}")
            tg.cancel_scope.cancel()
            return
        status, took = await _stop(c, stop_on, thread, report)
        if status != "stopped":  # the run goes on for a minute: only "stopped" is true
            report.problems.append(f"{thread}: a running thread answered {status}")
            tg.cancel_scope.cancel()
            return
        with anyio.fail_after(30):  # a stopped run's stream ends at once
            await stream.ended.wait()
    last = events[-1]
    if last.get("outcome") != {"type": "cancelled"}:
        report.problems.append(f"{thread}: answered stopped, the run ended {last}")
    elif await _running(c, stop_on, thread):
        report.problems.append(f"{thread}: answered stopped, the thread still runs")
    (report.local_ms if run_on == stop_on else report.cross_ms).append(took)


async def _load(
    c: httpx2.AsyncClient, urls: list[str], rng: random.Random, report: StopReport, done: Any
) -> None:
    thread = secrets.token_hex(8)
    while not done.is_set():
        await _Stream().post(c, rng.choice(urls), _body(thread, QUICK))
        report.load_turns += 1


async def stop_under_load(
    urls: list[str], *, stops: int, parallel: int, load: int, seed: int | None = None
) -> StopReport:
    """Send ``stops`` Stops to random workers of ``urls`` under ``load`` conversations.

    Args:
        urls: The workers (one deployment, one store).
        stops: Stop cycles to run.
        parallel: Cycles going at once.
        load: Conversations sending ordinary turns meanwhile.
        seed: For the random choices (None: random).

    Returns:
        The outcomes, the latencies and every untruthful answer.
    """
    rng = random.Random(seed)
    report = StopReport()
    limits = httpx2.Limits(max_connections=parallel * 2 + load + 10)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as c:
        done = anyio.Event()
        async with anyio.create_task_group() as background:
            for _ in range(load):
                background.start_soon(_load, c, urls, rng, report, done)
            slots = anyio.Semaphore(parallel)

            async def one() -> None:
                async with slots:
                    await _cycle(c, urls, rng, report)

            async with anyio.create_task_group() as cycles:
                for _ in range(stops):
                    cycles.start_soon(one)
            done.set()  # the load's turns in flight end by themselves (a second or two)
    return report


def main() -> int:
    from tests._serve_workers import start_workers

    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--stops", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--load", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store", default=f"sqlite:{tempfile.mkdtemp()}/threads.db")
    parser.add_argument("--lease", type=float, default=15.0)
    args = parser.parse_args()
    workers = start_workers(args.store, args.workers, args.lease)
    urls = [w.url for w in workers]
    p50s: dict[str, list[float]] = {"local": [], "cross": []}
    p99s: dict[str, list[float]] = {"local": [], "cross": []}
    bad = 0
    try:
        for repeat in range(args.repeats):
            report = anyio.run(
                lambda: stop_under_load(
                    urls, stops=args.stops, parallel=args.parallel, load=args.load
                )
            )
            bad += len(report.problems)
            for kind, values in (("local", report.local_ms), ("cross", report.cross_ms)):
                p50s[kind].append(p(values, 0.5))
                p99s[kind].append(p(values, 0.99))
            print(
                f"repeat {repeat + 1}: {report.stops} Stops {report.outcomes}, "
                f"{report.load_turns} load turns, problems {len(report.problems)}; "
                f"local n={len(report.local_ms)} p50 {p50s['local'][-1]:.1f} ms "
                f"p99 {p99s['local'][-1]:.1f} ms; cross n={len(report.cross_ms)} "
                f"p50 {p50s['cross'][-1]:.1f} ms p99 {p99s['cross'][-1]:.1f} ms"
            )
            for problem in report.problems[:20]:
                print("  ", problem)
    finally:
        for worker in workers:
            worker.stop()
    local99, cross99 = statistics.median(p99s["local"]), statistics.median(p99s["cross"])
    print(
        f"{args.workers} workers on {args.store.split(':')[0]}, {args.stops} Stops x "
        f"{args.repeats} repeats, {args.parallel} at once, {args.load} load conversations: "
        f"median p50 local {statistics.median(p50s['local']):.1f} ms, "
        f"cross {statistics.median(p50s['cross']):.1f} ms; median p99 local {local99:.1f} ms, "
        f"cross {cross99:.1f} ms (cross/local {cross99 / local99:.2f}); untruthful: {bad}"
    )
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""A served turn's store side alone, piece by piece: counts that load does not move.

``python -m benchmarks.served_hold [--store sqlite|memory] [--history 5] [--turns 200]``
runs, in this process, the store side of ``--turns`` served turns one at a time, each on a
thread that had ``--history`` turns before, as the ``/agui`` handler and the run do it: the
thread's load (``ThreadStore.load``), the claim (``Claim.acquire``), the hold entered and
left (``Claim.holding``: the lease renewal, the control channel's subscription), the commit
of two new messages (``Claim.commit``). The agent is built and loaded as the server does
(``make_agent`` + ``load_state_dict``), outside the measured pieces. Per piece and per
turn it prints the Python calls (cProfile), the tasks made (``BaseEventLoop.create_task``),
the task groups entered, the store's thread hops (``anyio.to_thread.run_sync``) and the CPU
(``time.process_time``: this process's threads, SQLite's workers included).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from agentkit.agent import ReActAgent  # noqa: E402
from agentkit.messages import Msg  # noqa: E402
from agentkit.serve._ownership import Claim, LeaseRenewals  # noqa: E402
from agentkit.serve._threads import RunChannel, ThreadRecord, ThreadStore  # noqa: E402
from agentkit.session import Session, SQLiteSession  # noqa: E402
from tests._serve_agents import make_agent  # noqa: E402
from tests._serve_worker_app import MemorySession  # noqa: E402

PIECES = ("load", "claim", "hold", "commit")


class _Counted:
    """Thread hops and task groups, counted by wrapping what makes them."""

    def __init__(self) -> None:
        self.hops = 0
        self.groups = 0
        self._run_sync = anyio.to_thread.run_sync
        self._group = anyio.create_task_group

    def __enter__(self) -> _Counted:
        outer = self

        async def run_sync(*args: object, **kwargs: object) -> object:
            outer.hops += 1
            return await outer._run_sync(*args, **kwargs)  # type: ignore[arg-type]

        def group() -> object:
            outer.groups += 1
            return outer._group()

        anyio.to_thread.run_sync = run_sync  # type: ignore[assignment]
        anyio.create_task_group = group  # type: ignore[assignment]
        return self

    def __exit__(self, *_: object) -> None:
        anyio.to_thread.run_sync = self._run_sync
        anyio.create_task_group = self._group


async def _grow(store: ThreadStore, thread: str, turns: int) -> None:
    """Give a thread ``turns`` turns of history (two messages each), stored."""
    record = await store.load("bench", thread) or ThreadRecord("bench", thread)
    agent = make_agent()
    if record.agent_state is not None:
        agent.load_state_dict(record.agent_state)
    for i in range(turns):
        await agent.observe([Msg("user", f"question {i} " * 20, "user")])
        await agent.observe([Msg("assistant", f"answer {i} " * 40, "assistant")])
    await store.save(record, agent)


async def _hold(claim: Claim, agent: ReActAgent) -> None:
    async with claim.holding(agent):
        await anyio.lowlevel.checkpoint()  # the run's place


async def measure(
    session: Session, history: int, turns: int, profile: bool = True
) -> dict[str, dict[str, float]]:
    """Run ``turns`` store sides; return the counts per piece and per turn.

    ``profile`` False: no cProfile (no calls counted), so the CPU is the code's own.
    """
    store = ThreadStore(session)
    threads = [f"t{i}" for i in range(turns)]
    for thread in threads:
        await _grow(store, thread, history)
    names = ("calls", "tasks", "groups", "hops", "cpu_ms")
    totals = {p: dict.fromkeys(names, 0.0) for p in PIECES}

    async def piece(name: str, step: Callable[[], Awaitable[object]]) -> object:
        loop = asyncio.get_running_loop()
        made = 0
        original = loop.create_task

        def create_task(*args: object, **kwargs: object) -> object:
            nonlocal made
            made += 1
            return original(*args, **kwargs)  # type: ignore[arg-type]

        loop.create_task = create_task  # type: ignore[method-assign,assignment]
        profiler = cProfile.Profile()
        with _Counted() as counted:
            started = time.process_time()
            if profile:
                profiler.enable()
            try:
                result = await step()
            finally:
                if profile:
                    profiler.disable()
                cpu = time.process_time() - started
                del loop.create_task
        row = totals[name]
        if profile:
            raw = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
            row["calls"] += sum(v[1] for v in raw.values())
        row["tasks"] += made
        row["groups"] += counted.groups
        row["hops"] += counted.hops
        row["cpu_ms"] += 1000 * cpu
        return result

    for thread in threads:
        record = await piece("load", partial(store.load, "bench", thread))
        assert isinstance(record, ThreadRecord)
        agent = make_agent()
        if record.agent_state is not None:
            agent.load_state_dict(record.agent_state)
        channel = RunChannel("bench", thread, f"run-{thread}")
        claim = Claim(store, record, channel, "worker-1", LeaseRenewals(15.0))
        await piece("claim", claim.acquire)
        await agent.observe([Msg("user", "one more " * 20, "user")])
        await agent.observe([Msg("assistant", "and its answer " * 40, "assistant")])

        await piece("hold", partial(_hold, claim, agent))
        await piece("commit", partial(claim.commit, agent))
    return {p: {k: v / turns for k, v in row.items()} for p, row in totals.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--cpu", action="store_true", help="no cProfile: CPU only")
    args = parser.parse_args()

    async def run() -> dict[str, dict[str, float]]:
        if args.store == "memory":
            return await measure(MemorySession(), args.history, args.turns, not args.cpu)
        with tempfile.TemporaryDirectory() as where:
            async with SQLiteSession(Path(where) / "threads.db") as session:
                return await measure(session, args.history, args.turns, not args.cpu)

    rows = anyio.run(run)
    print(f"store {args.store}, history {args.history} turns, {args.turns} turns measured")
    print(f"{'piece':8} {'calls':>8} {'tasks':>6} {'groups':>6} {'hops':>5} {'cpu ms':>7}")
    for name in (*PIECES, "total"):
        row = (
            rows[name]
            if name != "total"
            else {k: sum(r[k] for r in rows.values()) for k in rows["load"]}
        )
        print(
            f"{name:8} {row['calls']:8.0f} {row['tasks']:6.1f} {row['groups']:6.1f} "
            f"{row['hops']:5.1f} {row['cpu_ms']:7.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

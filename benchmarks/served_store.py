"""A served turn's store operations alone: load, claim, commit, and what a whole-state save costs.

``python -m benchmarks.served_store [--turns 100] [--messages 20 200] [--dir PATH]`` runs, on
one SQLite file (in ``--dir``, default a new temporary directory: put it on the disk you
deploy on, a tmpfs has no fsync cost), ``--turns`` turns one at a time of a served thread
holding ``--messages`` messages, each as the server does it: ``load_versioned``, the claim
(the thread with its lease, version-checked) and the commit (the state with the turn,
version-checked). Two ways, alternating turn by turn, in the same run:

* **claim flushed**: both writes durable (``synchronous=FULL``: two fsyncs per turn; what
  agentkit did before the claim was written with ``durable=False``);
* **claim not flushed**: the claim ``durable=False`` (``synchronous=NORMAL``), the commit
  durable: one fsync per turn.

Prints CPU (``time.process_time``: this thread and SQLite's worker threads) and wall time per
turn for each, and, per message count, what serializing the whole thread costs per save
(``agent.state_dict()`` plus the JSON encoding ``save_state`` does) and decoding it per
load: the part of a save that grows with the thread, whatever the store.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from agentkit.messages import Msg  # noqa: E402
from agentkit.serve._threads import ThreadRecord, ThreadStore  # noqa: E402
from agentkit.session import SQLiteSession  # noqa: E402
from tests._serve_agents import make_agent  # noqa: E402


def _history(n: int) -> list[Msg]:
    msgs: list[Msg] = []
    for i in range(n // 2):
        msgs.append(Msg("user", f"question {i}: what is the weather in Paris and Tokyo?", "user"))
        msgs.append(
            Msg("assistant", "Paris: sunny, 21 °C. Tokyo: light rain, 17 °C. " * 3, "assistant")
        )
    return msgs


async def _turn(store: ThreadStore, key: tuple[str, str], agent: object, flushed: bool) -> None:
    record = await store.load(*key)
    assert record is not None
    record.lease = {"worker": "w", "run": "r", "expires": time.time() + 15}
    await store.save(record, durable=flushed)  # the claim
    record.lease = None
    await store.save(record, agent, durable=True)  # type: ignore[arg-type]  # the commit


async def run(turns: int, messages: list[int], where: str) -> None:
    for n in messages:
        agent = make_agent()
        await agent.observe(_history(n))
        store = ThreadStore(SQLiteSession(Path(where) / f"threads-{n}.db"))
        key = ("local", "t")
        record = ThreadRecord(*key)
        await store.save(record, agent)
        for flushed in (True, False):  # warm-up
            await _turn(store, key, agent, flushed)
        rows: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for i in range(2 * turns):
            flushed = i % 2 == 0
            cpu, wall = time.process_time(), time.perf_counter()
            await _turn(store, key, agent, flushed)
            rows[flushed].append((time.process_time() - cpu, time.perf_counter() - wall))
        for flushed, label in ((True, "claim flushed    "), (False, "claim not flushed")):
            cpu_ms = 1000 * statistics.median(c for c, _ in rows[flushed])
            wall_ms = 1000 * statistics.median(w for _, w in rows[flushed])
            print(f"{n:4d} messages, {label}: cpu/turn {cpu_ms:.2f} ms, wall/turn {wall_ms:.2f} ms")
        reps = max(20, 4000 // n)
        cpu = time.process_time()
        for _ in range(reps):
            record.agent_state = agent.state_dict()
            text = json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"))
        save_ms = 1000 * (time.process_time() - cpu) / reps
        cpu = time.process_time()
        for _ in range(reps):
            json.loads(text)
        load_ms = 1000 * (time.process_time() - cpu) / reps
        print(
            f"{n:4d} messages: thread {len(text) / 1024:.1f} KiB; whole-state serialization "
            f"{save_ms:.3f} ms per save, decoding {load_ms:.3f} ms per load"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--messages", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--dir", default="")
    args = parser.parse_args()
    anyio.run(run, args.turns, args.messages, args.dir or tempfile.mkdtemp())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The served-threads load check at full size: N uvicorn workers on one store, every turn
round-robin, every stored thread verified (``agentkit.serve.check_served_threads``).

``python -m benchmarks.served_threads [--workers 3] [--conversations 50] [--turns 3]
[--store sqlite:/tmp/x.db | postgres:URL | redis:URL]``: prints the report; exit status 1
when a successful turn is missing, duplicated, out of order or unanswered. The default
suite runs a small version (tests/test_serve_multiworker.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from agentkit.serve import check_served_threads
from tests._serve_workers import start_workers

ROOT = Path(__file__).parent.parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--store", default=f"sqlite:{tempfile.mkdtemp()}/threads.db")
    parser.add_argument("--lease", type=float, default=15.0)
    args = parser.parse_args()
    # One load client is one client to the per-client run cap: lift it over the load.
    workers = start_workers(args.store, args.workers, args.lease, max_runs=args.conversations)
    try:
        began = time.perf_counter()
        report = anyio.run(
            lambda: check_served_threads(
                [w.url for w in workers], conversations=args.conversations, turns=args.turns
            )
        )
        took = time.perf_counter() - began
    finally:
        for worker in workers:
            worker.stop()
    print(
        f"{args.workers} workers x {args.conversations} conversations x {args.turns} turns "
        f"on {args.store.split(':')[0]}: sent {report.sent}, succeeded {report.succeeded}, "
        f"refused {report.refused}, failed {report.failed}, lost {report.lost}, "
        f"problems {len(report.problems)}, {took:.1f} s"
    )
    for problem in report.problems[:20]:
        print(problem)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

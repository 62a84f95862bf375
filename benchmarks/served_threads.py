"""The served-threads load check at full size: N uvicorn workers on one store, every turn
round-robin, every stored thread verified (``agentkit.serve.check_served_threads``).

``python -m benchmarks.served_threads [--workers 3] [--conversations 50] [--turns 3]
[--store sqlite:/tmp/x.db | postgres:URL | redis:URL]``: prints the report; exit status 1
when a successful turn is missing, duplicated, out of order or unanswered. The default
suite runs a small version (tests/test_serve_multiworker.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

from agentkit.serve import check_served_threads

ROOT = Path(__file__).parent.parent


def start(store: str, lease: float) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests._serve_worker_app", store, str(lease)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = f"http://127.0.0.1:{int(proc.stdout.readline().split()[1])}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/healthz").status_code == 200:
                return proc, url
        except httpx2.TransportError:
            time.sleep(0.05)
    raise SystemExit("a worker did not start")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--store", default=f"sqlite:{tempfile.mkdtemp()}/threads.db")
    parser.add_argument("--lease", type=float, default=15.0)
    args = parser.parse_args()
    workers = [start(args.store, args.lease) for _ in range(args.workers)]
    try:
        began = time.perf_counter()
        report = anyio.run(
            lambda: check_served_threads(
                [url for _, url in workers], conversations=args.conversations, turns=args.turns
            )
        )
        took = time.perf_counter() - began
    finally:
        for proc, _ in workers:
            proc.terminate()
            proc.wait(10)
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

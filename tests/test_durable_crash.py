"""Acceptance: a durable run survives SIGKILL; completed steps are replayed, not re-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit.durable import recover_executor

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("_durable_worker.py")


def worker(mode: str, db: str, workdir: Path, executor: str, kill: str | None = None) -> Any:
    args = [sys.executable, str(WORKER), mode, db, str(workdir), executor]
    return subprocess.run(
        [*args, *([kill] if kill else [])],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def calls(workdir: Path) -> list[int]:
    return [int(line.split()[1]) for line in lines(workdir / "ledger.log")]


def requests(workdir: Path) -> list[int]:
    return [int(line.split()[-1]) for line in lines(workdir / "model.log")]


def crash_and_recover(tmp_path: Path, kill: str, *, takeover: bool) -> dict[str, Any]:
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    first = worker("start", db, tmp_path, "worker-a", kill)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    if takeover:  # worker-a never comes back: worker-b takes its runs over
        assert recover_executor(db, "worker-a", dry_run=True) == ["run-1"]
        cli = subprocess.run(
            [sys.executable, "-m", "agentkit", "durable", "recover", "--executor", "worker-a"],
            capture_output=True,
            text=True,
            timeout=50,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "DBOS_SYSTEM_DATABASE_URL": db},
        )
        assert cli.returncode == 0, cli.stderr
        assert "1 run(s) of executor 'worker-a' re-enqueued" in cli.stdout
        assert "run-1" in cli.stdout
        second = worker("resume", db, tmp_path, "worker-b")
    else:  # worker-a restarts under its stable executor id and recovers at launch
        second = worker("resume", db, tmp_path, "worker-a")
    assert second.returncode == 0, second.stderr[-3000:]
    return dict(json.loads(second.stdout.strip().splitlines()[-1]))


@pytest.mark.timeout(120)
def test_kill_after_the_third_call_replays_steps(tmp_path: Path) -> None:
    result = crash_and_recover(tmp_path, "after_tool_3", takeover=False)
    assert result == {"output": "appended 5", "stop_reason": "final"}
    assert calls(tmp_path) == [1, 2, 3, 4, 5]  # each call once
    assert requests(tmp_path) == [1, 2, 3, 4, 5, 6]  # one request per step, none re-sent


@pytest.mark.timeout(120)
def test_kill_inside_a_model_request_resends_only_that_request(tmp_path: Path) -> None:
    result = crash_and_recover(tmp_path, "in_model_3", takeover=True)
    assert result == {"output": "appended 5", "stop_reason": "final"}
    assert calls(tmp_path) == [1, 2, 3, 4, 5]
    # Request 3 was in flight when the process died: it is the one sent twice.
    assert requests(tmp_path) == [1, 2, 3, 3, 4, 5, 6]


@pytest.mark.timeout(120)
def test_kill_inside_a_tool_call_reruns_only_that_call_with_the_same_key(
    tmp_path: Path,
) -> None:
    result = crash_and_recover(tmp_path, "in_tool_3", takeover=False)
    assert result == {"output": "appended 5", "stop_reason": "final"}
    # The at-least-once boundary: the call in flight at the kill runs again...
    assert calls(tmp_path) == [1, 2, 3, 3, 4, 5]
    assert requests(tmp_path) == [1, 2, 3, 4, 5, 6]
    # ...with the same idempotency key, so a service that honours it applies it once.
    keyed = [line.split()[2] for line in lines(tmp_path / "ledger.log")]
    assert keyed[2] == keyed[3] == "run-1/call-3"
    assert len(set(keyed)) == 5

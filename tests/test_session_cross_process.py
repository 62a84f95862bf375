"""Acceptance: pause for approval in one process, resume in another, the tool runs once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentkit.session import SQLiteSession

WORKER = Path(__file__).with_name("_session_worker.py")
ROOT = Path(__file__).resolve().parent.parent


def run_worker(phase: str, db: Path, counter: Path, sid: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(WORKER), phase, str(db), str(counter), sid],
        capture_output=True,
        text=True,
        timeout=45,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(120)
async def test_approval_pause_save_exit_load_resume_in_new_process(tmp_path: Path) -> None:
    db = tmp_path / "state" / "sessions.db"
    counter = tmp_path / "counter.txt"
    sid = "user-42/../chat 1"  # any string is a valid id

    started = run_worker("start", db, counter, sid)
    assert started == {
        "pending": [{"id": "call-1", "name": "bump", "input": {"amount": 7}}],
        "counter_exists": False,
    }
    # The saved state names the pending call; nothing ran yet.
    state = await SQLiteSession(db).load_state(sid)
    assert state is not None and [c["id"] for c in state["pending_tool_calls"]] == ["call-1"]

    resumed = run_worker("resume", db, counter, sid)
    assert resumed["found"] is True
    assert resumed["pending_ids"] == ["call-1"]
    assert resumed["reply"] == "Counter bumped."
    assert resumed["model_saw_result"] is True
    assert resumed["roles"] == ["user", "assistant", "user", "assistant"]
    assert counter.read_text() == "7\n"  # the tool ran exactly once

    again = run_worker("again", db, counter, sid)
    assert again["found"] is True and again["pending"] == []
    assert "not waiting for approval" in again["double"]
    assert counter.read_text() == "7\n"  # still once

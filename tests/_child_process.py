"""Run a test scenario in a child interpreter, so that a freeze fails the test instead of hanging it.

A regex or parser that holds the GIL freezes everything in its process, pytest's own timeout
included, so scenarios that would freeze on a regression run in a child process with a
generous hang guard: the test fails (instead of hanging) if the child does not finish.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 40.0  # only a guard against a hang; a healthy run takes well under a second


def run_child(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter (repo on the path); return its stdout.

    Fails the test if the child does not finish within the hang guard or exits non-zero.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the scenario did not finish within {HANG_GUARD_S:g} s (frozen)"
        ) from None
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``AGENTKIT_TEST_TAG=tag``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("AGENTKIT_TEST_TAG") == tag:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def kill_all(processes: list[psutil.Process]) -> None:
    """Clean up after a failing test (processes it found left behind)."""
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()

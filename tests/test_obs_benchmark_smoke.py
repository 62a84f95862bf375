"""``python -m benchmarks.tracing`` runs end to end (tiny sizes; no timing assertions)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_tracing_benchmark_runs() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.tracing",
            "--rounds",
            "1",
            "--steps",
            "2",
            "--reps",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=190,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["per_span_in_process"]["spans_per_run"] == 6  # 1 run + 3 chats + 2 tools
    assert result["per_turn_over_http"]["untraced_per_turn_s"] > 0
    # Each figure comes with the SDK's own cost for the same spans and records (its floor).
    assert result["per_turn_over_http"]["sdk_floor_ratio"] > 1
    assert result["per_span_in_process"]["sdk_alone_per_span_s"] > 0

"""Stop under load (small): Stops sent to random workers each stop the run or say ``no_run``.

Two uvicorn worker processes on one SQLite file, ordinary turns going on meanwhile; the
full-size version with latencies is ``python -m benchmarks.served_stop``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.served_stop import stop_under_load
from tests._serve_workers import start_workers

pytestmark = pytest.mark.anyio


async def test_stops_sent_to_random_workers_under_load_are_all_truthful(tmp_path: Path) -> None:
    workers = start_workers(f"sqlite:{tmp_path / 'threads.db'}", 2, 2.0)
    try:
        report = await stop_under_load(
            [w.url for w in workers], stops=20, parallel=5, load=2, seed=20
        )
    finally:
        for worker in workers:
            worker.stop()
    assert report.problems == []
    assert report.stops == 20
    assert set(report.outcomes) <= {"stopped", "no_run"}
    assert report.local_ms and report.cross_ms  # both kinds of Stop were tried

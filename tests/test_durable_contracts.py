"""The contract suite on the durable path (``check_durable_contracts``): DBOS runs keep the
numbered list of docs/contracts.md, and the suite notices a broken run-once guard."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

import agentkit.agent._acting as acting
from agentkit.testing import check_durable_contracts

pytestmark = pytest.mark.anyio


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A RAM disk where there is one (each recorded step is an fsync), else tmp_path."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path


async def test_thirty_durable_scenarios_keep_the_contract(workdir: Path) -> None:
    report = await check_durable_contracts(scenarios=30, seed=0, directory=workdir)
    assert report.ok and report.scenarios == 30
    counts = report.counts
    for kind in (
        "durable approved",
        "durable denied",
        "durable approved nested",
        "durable denied nested",
        "durable approvals from a client",
        "durable interrupt during a tool",
        "durable interrupt while paused",
        "durable steer next_request",
    ):
        assert counts[kind] > 0, kind
    assert counts["steers checked"] > 0 and counts["nested scenarios"] > 5


async def test_the_durable_suite_fails_when_approved_calls_can_run_twice(
    monkeypatch: pytest.MonkeyPatch, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = acting._call

    async def twice(setup: Any, run: Any, call: Any, block: Any) -> Any:
        if call["id"] in run.approved:
            await original(setup, run, call, block)
        return await original(setup, run, call, block)

    monkeypatch.setattr(acting, "_call", twice)
    report = await check_durable_contracts(
        scenarios=6, seed=0, directory=workdir, raise_on_failure=False
    )
    assert any("guarantee 3" in f.message and "ran 2 times" in f.message for f in report.failures)
    assert "check_durable_contracts(make_agent, scenarios=1, seed=" in capsys.readouterr().err

"""The contract suite on the served path (``check_served_contracts``): threads served by two
workers keep the numbered list of docs/contracts.md, and the suite notices a broken
run-once guard."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import agentkit.agent._acting as acting
from agentkit.testing import check_served_contracts

pytestmark = pytest.mark.anyio


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A RAM disk where there is one (each commit of a thread is an fsync), else tmp_path."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path


async def test_thirty_served_scenarios_keep_the_contract(workdir: Path) -> None:
    report = await check_served_contracts(scenarios=30, seed=0, directory=workdir)
    assert report.ok and report.scenarios == 30
    counts = report.counts
    for kind in (
        "served approved",
        "served denied",
        "served approved nested",
        "served denied nested",
        "served stop during a tool",
        "served stop while paused",
        "served new message while paused",
        "served steer next_request",
    ):
        assert counts[kind] > 0, kind
    assert counts["steers checked"] > 0 and counts["nested scenarios"] > 5


async def test_the_served_suite_fails_when_approved_calls_can_run_twice(
    monkeypatch: pytest.MonkeyPatch, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = acting._call

    async def twice(setup: Any, run: Any, call: Any, block: Any) -> Any:
        if call["id"] in run.approved:
            await original(setup, run, call, block)
        return await original(setup, run, call, block)

    monkeypatch.setattr(acting, "_call", twice)
    with pytest.raises(AssertionError, match=r"seed 0\)"):
        await check_served_contracts(scenarios=10, seed=0, directory=workdir)
    err = capsys.readouterr().err
    assert "guarantee 3 broken" in err and "ran 2 times" in err
    assert "check_served_contracts(make_agent, scenarios=1, seed=" in err

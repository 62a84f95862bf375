"""The contract suite (``agentkit.testing.check_contracts``) holds for ``ReActAgent``, and
it notices when the guard that runs each approved call once is broken."""

from __future__ import annotations

from typing import Any

import pytest

import agentkit.agent._acting as acting
from agentkit import ReActAgent, Toolkit
from agentkit.models import ChatModel
from agentkit.testing import ContractReport, check_contracts

pytestmark = pytest.mark.anyio


async def test_two_hundred_scenarios_keep_the_contract() -> None:
    report = await check_contracts(scenarios=200, seed=0)
    assert report.ok and report.scenarios == 200
    counts = report.counts
    # The scenarios reach every kind of step the contract speaks about.
    for kind in (
        "approved",
        "denied",
        "approved nested",
        "denied nested",
        "interrupt while streaming",
        "interrupt during a tool",
        "interrupt while paused",
        "interrupt_pending",
        "new message while paused",
        "save/load",
        "steer next_request",
    ):
        assert counts[kind] > 0, kind
    assert counts["nested scenarios"] > 50


async def test_a_users_factory_is_what_runs() -> None:
    built: list[str] = []

    def make_agent(name: str, model: ChatModel, toolkit: Toolkit) -> ReActAgent[Any, Any]:
        built.append(name)
        return ReActAgent(name, "Be brief.", model, toolkit, max_iters=6)

    report = await check_contracts(make_agent, scenarios=10, seed=7)
    assert report.ok
    assert {"outer", "helper"} <= set(built)


async def test_the_suite_fails_when_approved_calls_can_run_twice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The mutation: the acting step runs an approved call a second time (what a loop
    # that forgot it had executed a decided call would do).
    original = acting._call

    async def twice(setup: Any, run: Any, call: Any, block: Any) -> Any:
        if call["id"] in run.approved:
            await original(setup, run, call, block)
        return await original(setup, run, call, block)

    monkeypatch.setattr(acting, "_call", twice)
    with pytest.raises(AssertionError, match=r"seed 0\)"):
        await check_contracts(scenarios=40, seed=0)
    report: ContractReport = await check_contracts(scenarios=40, seed=0, raise_on_failure=False)
    assert not report.ok
    assert any("guarantee 3" in f.message and "ran 2 times" in f.message for f in report.failures)
    err = capsys.readouterr().err
    assert "check_contracts(make_agent, scenarios=1, seed=" in err  # the replay line

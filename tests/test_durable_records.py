"""The JSON a durable run records for its typed parts reads back as what was given."""

from __future__ import annotations

import dataclasses

import pytest

from agentkit.agent import Decision
from agentkit.agent._limits import UsageLimits
from agentkit.durable._results import approvals_from_record, approvals_record, limits_record


def test_usage_limits_round_trip_through_their_record() -> None:
    limits = UsageLimits(max_requests=3, max_cost=0.5, model_call_timeout=9.0, raise_on_limit=True)
    record = limits_record(limits)
    assert record is not None
    # Every field is recorded (a field added to UsageLimits must be added to the record).
    assert set(record) == {f.name for f in dataclasses.fields(UsageLimits)}
    assert UsageLimits(**record) == limits
    assert limits_record(None) is None


def test_approval_decisions_round_trip_through_their_record() -> None:
    decisions = {
        "a": True,
        "b": "not today",
        "c": Decision(True, input={"amount": 2}),
        "d": Decision(False, reason="no"),
    }
    record = approvals_record(decisions)
    assert record["c"] == {"approved": True, "reason": None, "input": {"amount": 2}}
    assert approvals_from_record(record) == decisions


@pytest.mark.parametrize(
    "recorded", [3, None, {"approved": "yes"}, {"approved": True, "extra": 1}, [True]]
)
def test_a_recorded_decision_of_another_shape_is_refused(recorded: object) -> None:
    with pytest.raises(TypeError, match="not a recorded approval decision"):
        approvals_from_record({"x": recorded})

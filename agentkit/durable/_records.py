"""The JSON shapes a durable run's workflow takes and returns (DBOS stores them as JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from agentkit.agent._result import StopReason
    from agentkit.events import CallInfo

__all__ = ["RunOutput", "RunRequest", "SessionConflict", "UsageRecord"]


class UsageRecord(TypedDict, total=False):
    """``RunUsage`` as JSON, summed over the runs of one workflow (cost None once unknown)."""

    requests: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    duration: float
    cost: float | None
    models: dict[str, int]  # requests per model that answered


class RunRequest(TypedDict):
    """The workflow's input: new messages, the state to start from, the session."""

    input: list[dict[str, object]]
    state: dict[str, object] | None
    session_id: str | None
    session_version: int | None


class SessionConflict(TypedDict):
    """The session changed during the run: what the save expected and what it found."""

    session_id: str
    expected: int
    actual: int


class RunOutput(TypedDict, total=False):
    """The workflow's output (``DBOSAgent.result`` turns it into a ``DurableRunResult``).

    The session-save step returns the part it sets: ``session_version`` or
    ``session_conflict``.
    """

    reply: dict[str, object]
    state: dict[str, object]
    interrupted: bool
    pending: list[CallInfo]
    session_version: int | None
    usage: UsageRecord
    stop_reason: StopReason
    new_messages: list[dict[str, object]]
    session_conflict: SessionConflict

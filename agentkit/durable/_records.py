"""The JSON shapes a durable run's workflow takes and returns (DBOS stores them as JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from agentkit.agent._result import StopReason
    from agentkit.events import CallInfo

__all__ = ["CodeVersion", "RunOutput", "RunRequest", "SessionConflict", "UsageRecord"]


class UsageRecord(TypedDict, total=False):
    """``RunUsage`` as JSON, summed over the runs of one workflow (cost None once unknown)."""

    requests: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    duration: float
    cost: float | None
    models: dict[str, int]  # requests per model that answered


class CodeVersion(TypedDict):
    """The code a run was recorded under (see ``agentkit.durable._versions``)."""

    agentkit: str  # the agentkit release
    agent: str  # a hash of the agent's name, prompt, model, tool names and schemas


class RunRequest(TypedDict):
    """The workflow's input: new messages, the state to start from, the session.

    The typed parts are recorded by name or as plain values, never as objects: the output
    type as ``"module:qualname"``, the usage limits as their fields, and of the deps only
    whether the run had any (``has_deps``); a recovered run gets them from
    ``DBOSAgent(deps_factory=...)``. Approval decisions are JSON too (``True``, ``False``,
    a denial's reason, or a ``Decision``'s fields as an object).
    """

    input: list[dict[str, object]]
    state: dict[str, object] | None
    session_id: str | None
    session_version: int | None
    output_type: NotRequired[str | None]
    usage_limits: NotRequired[dict[str, Any] | None]
    has_deps: NotRequired[bool]
    approvals: NotRequired[dict[str, Any] | None]  # decisions the first reply resolves
    meta: NotRequired[dict[str, Any] | None]  # the caller's JSON, given to the save hook
    code: NotRequired[CodeVersion | None]  # checked when the run is executed again


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
    usage_limit: str | None
    last_agent: str  # the agent that answered (a handoff's target)
    output_type: str | None  # "module:qualname" of a structured run's output type
    output: dict[str, object] | None  # the structured output as JSON (validated again on read)
    new_messages: list[dict[str, object]]
    session_conflict: SessionConflict

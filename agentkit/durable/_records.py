"""The JSON shapes a durable run's workflow takes and returns (DBOS stores them as JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypeAlias, TypedDict

if TYPE_CHECKING:
    from agentkit.agent._result import StopReason
    from agentkit.events import CallInfo

__all__ = [
    "CodeVersion",
    "DecisionRecord",
    "LimitsRecord",
    "RunOutput",
    "RunRequest",
    "SessionConflict",
    "UsageRecord",
]

DecisionRecord: TypeAlias = "bool | str | dict[str, object]"
"""An approval decision as JSON: ``True``, ``False``, a denial's reason, or a ``Decision``'s
fields as an object."""


class LimitsRecord(TypedDict, total=False):
    """``UsageLimits`` by its fields (a recovered run is bounded the same way)."""

    max_requests: int | None
    max_input_tokens: int | None
    max_output_tokens: int | None
    max_total_tokens: int | None
    max_tool_calls: int | None
    max_cost: float | None
    max_wall_time: float | None
    model_call_timeout: float | None
    raise_on_limit: bool


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
    usage_limits: NotRequired[LimitsRecord | None]
    has_deps: NotRequired[bool]
    approvals: NotRequired[dict[str, DecisionRecord] | None]  # decisions the first reply resolves
    meta: NotRequired[dict[str, object] | None]  # the caller's JSON, given to the save hook
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

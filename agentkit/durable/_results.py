"""What a durable run records and returns: its result, its usage and output type as JSON.

``DurableRunResult`` is the typed handle ``DBOSAgent.run`` returns; the helpers here turn the
typed parts of a run (output type, usage limits, approval decisions, usage) into the JSON a
workflow records, and the recorded JSON back into them.
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias, overload

from agentkit.agent._limits import UsageLimits
from agentkit.agent._result import OutputT, RunResult, RunUsage
from agentkit.durable._records import DecisionRecord, LimitsRecord, RunOutput, UsageRecord
from agentkit.exceptions import StateError, UsageError
from agentkit.messages import Msg

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent._conversation import Verdict

__all__ = [
    "AgentRun",
    "DurableRunResult",
    "Outcome",
    "approvals_from_record",
    "approvals_record",
    "as_input",
    "limits_record",
    "recorded_output",
    "resolve_output_type",
    "sum_usage",
    "type_name",
]

AgentRun: TypeAlias = "RunResult[str] | RunResult[BaseModel]"
"""A run of the workflow's agent: with the final text, or with a structured output."""


@dataclass(frozen=True, slots=True)
class DurableRunResult(RunResult[OutputT]):
    """A durable run's ``RunResult[T]``, with what the workflow recorded besides.

    Attributes:
        state: The conversation state after the run (agentkit JSON).
        workflow_id: The DBOS workflow id.
        session_version: The session's version after the save (None without a session).
    """

    state: dict[str, object] = field(default_factory=dict)
    workflow_id: str = ""
    session_version: int | None = None


_KNOWN_TYPES: weakref.WeakValueDictionary[str, type[BaseModel]] = weakref.WeakValueDictionary()
"""Output types this process ran durable runs with, by recorded name."""


def type_name(cls: type[BaseModel] | None) -> str | None:
    """The name a workflow records for ``cls`` (and remembers it by)."""
    if cls is None:
        return None
    name = f"{cls.__module__}:{cls.__qualname__}"
    _KNOWN_TYPES[name] = cls
    return name


def resolve_output_type(name: str) -> type[BaseModel]:
    """The output type a workflow recorded as ``name`` (``"module:qualname"``).

    Looked up among the types this process ran with, then in the modules it has already
    imported: a record never makes this process import anything.

    Raises:
        UsageError: when this process does not know the type.
    """
    from pydantic import BaseModel

    known = _KNOWN_TYPES.get(name)
    if known is not None:
        return known
    module, _, qualname = name.partition(":")
    found: object = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, BaseModel):
        return found
    raise UsageError(
        f"this durable run's output type {name!r} is not known to this process: import the "
        "module that defines it before DBOS.launch() (a class defined inside a function "
        "cannot be found by name), or pass output_type= to DBOSAgent.result"
    )


def limits_record(limits: UsageLimits | None) -> LimitsRecord | None:
    """``limits`` by their fields, as the workflow records them."""
    if limits is None:
        return None
    return {
        "max_requests": limits.max_requests,
        "max_input_tokens": limits.max_input_tokens,
        "max_output_tokens": limits.max_output_tokens,
        "max_total_tokens": limits.max_total_tokens,
        "max_tool_calls": limits.max_tool_calls,
        "max_cost": limits.max_cost,
        "max_wall_time": limits.max_wall_time,
        "model_call_timeout": limits.model_call_timeout,
        "raise_on_limit": limits.raise_on_limit,
    }


def sum_usage(total: UsageRecord, usage: RunUsage) -> UsageRecord:
    """Add one ``agent.run`` usage to a JSON usage record (cost None once unknown)."""
    cost = total.get("cost", 0.0)
    return {
        "requests": total.get("requests", 0) + usage.requests,
        "input_tokens": total.get("input_tokens", 0) + usage.input_tokens,
        "output_tokens": total.get("output_tokens", 0) + usage.output_tokens,
        "tool_calls": total.get("tool_calls", 0) + usage.tool_calls,
        "duration": total.get("duration", 0.0) + usage.duration,
        "cost": None if cost is None or usage.cost is None else cost + usage.cost,
        "models": {
            name: total.get("models", {}).get(name, 0) + usage.models.get(name, 0)
            for name in {**total.get("models", {}), **usage.models}
        },
    }


def as_input(msg: Msg | Sequence[Msg] | str | None) -> list[dict[str, object]]:
    if msg is None:
        return []
    if isinstance(msg, str):
        msg = Msg("user", msg, "user")
    items = [msg] if isinstance(msg, Msg) else list(msg)
    return [m.to_dict() for m in items]


@dataclass
class Outcome:
    """A durable run's replies so far: the last one, summed usage, every new message."""

    run: AgentRun
    usage: UsageRecord
    new_messages: list[Msg]

    def add(self, run: AgentRun) -> None:
        """Count one more reply of the run (its usage and messages)."""
        self.run = run
        self.usage = sum_usage(self.usage, run.usage)
        self.new_messages += run.new_messages


@overload
def approvals_record(approvals: None) -> None: ...
@overload
def approvals_record(approvals: Mapping[str, Verdict]) -> dict[str, DecisionRecord]: ...
def approvals_record(approvals: Mapping[str, Verdict] | None) -> dict[str, DecisionRecord] | None:
    """Approval decisions as the JSON a durable run reads (a ``Decision`` as its fields).

    For ``DBOSClient.send(workflow_id, approvals_record(decisions), topic=APPROVALS_TOPIC)``
    from a process that has not launched DBOS.
    """
    from agentkit.agent import Decision

    if approvals is None:
        return None
    return {
        k: dataclasses.asdict(v) if isinstance(v, Decision) else v for k, v in approvals.items()
    }


def approvals_from_record(record: Mapping[str, object]) -> dict[str, Verdict]:
    """Recorded approval decisions as the verdicts ``agent.run(approvals=...)`` takes.

    Raises:
        TypeError: for a recorded decision that is not one (a corrupt or foreign record).
    """
    return {k: _verdict(v) for k, v in record.items()}


def _verdict(recorded: object) -> Verdict:
    from agentkit.agent import Decision

    if isinstance(recorded, (bool, str)):
        return recorded
    if isinstance(recorded, dict) and set(recorded) <= {"approved", "reason", "input"}:
        approved, reason, given = (recorded.get(k) for k in ("approved", "reason", "input"))
        if (
            isinstance(approved, bool)
            and (reason is None or isinstance(reason, str))
            and (given is None or isinstance(given, dict))
        ):
            return Decision(approved, reason, given)
    raise TypeError(f"not a recorded approval decision: {str(recorded)[:200]!r}")


def recorded_output(
    output: RunOutput, workflow_id: str, output_type: type[BaseModel] | None, reply: Msg
) -> tuple[str | BaseModel | None, bool]:
    """The run's output validated again from its record; whether it has one."""
    from pydantic import ValidationError

    name = output.get("output_type")
    if output_type is None and not name:
        return reply.get_text(), True
    cls = output_type or resolve_output_type(str(name))
    data = output.get("output")
    if data is None:  # stopped before a valid answer (interrupted, pending, limit)
        return None, False
    try:
        return cls.model_validate(data), True
    except ValidationError as exc:
        raise StateError(
            f"the recorded output of durable run {workflow_id!r} is not a valid "
            f"{cls.__qualname__} any more (the class changed since the run): {exc}"
        ) from exc

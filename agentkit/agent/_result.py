"""The typed result of ``agent.run()``: ``RunResult[T]``, ``RunUsage``, ``PendingCall``.

``await agent(...)`` returns a ``Msg`` whose ``metadata`` dict says how the reply ended (the
AgentScope form). ``agent.run(...)`` returns the same reply wrapped in a ``RunResult`` whose
fields are typed, so ``mypy --strict`` checks the code that reads them::

    result = await agent.run("Plan a weekend in Rome", output_type=TripPlan)
    plan: TripPlan = result.output
    print(result.usage.input_tokens, result.stop_reason)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, cast

from typing_extensions import TypeVar

from agentkit.exceptions import StateError
from agentkit.messages import Msg

if TYPE_CHECKING:
    from agentkit.agent._guardrails import GuardrailTripped
    from agentkit.agent._state import Run
    from agentkit.events import CallInfo
    from agentkit.models._base import ChatUsage

__all__ = [
    "OutputT",
    "PendingCall",
    "RunResult",
    "RunUsage",
    "StopReason",
    "make_result",
    "stop_reason",
]

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's output: the ``output_type`` model, or ``str`` (the final text)."""
ResultT = TypeVar("ResultT", default=str, covariant=True)
"""``OutputT`` of a ``RunResult``: covariant, as a result is frozen (a ``RunResult[B]``
is a ``RunResult[A]`` for ``B`` a subclass of ``A``; ``RunResult[object]``: any result)."""

StopReason: TypeAlias = Literal[
    "final", "interrupted", "pending_approval", "max_iters", "usage_limit", "guardrail"
]
"""Why a run stopped.

- ``"final"``: the model answered.
- ``"interrupted"``: ``agent.interrupt()`` cut the run (memory repaired).
- ``"pending_approval"``: tool calls wait for a human (``result.pending``).
- ``"max_iters"``: the agent hit ``max_iters`` and answered with a summary.
- ``"usage_limit"``: a ``UsageLimits`` bound was reached (``result.usage_limit`` names it).
- ``"guardrail"``: a guardrail tripped (``result.guardrail`` says which and why).
"""


@dataclass(slots=True)
class RunUsage:
    """What one run consumed, summed over its model requests and tool calls.

    Attributes:
        requests: Model requests made.
        input_tokens: Prompt tokens billed.
        output_tokens: Completion tokens billed.
        tool_calls: Tool calls run (calls answered without running are not counted).
        duration: Seconds from the start of the run to its end.
        cost: Cost in USD, the sum of every response's ``ChatUsage.cost``; None when any
            response did not report one (never a partial sum).
        models: How many answers each model gave (by model name): with a
            ``FallbackModel``, the models that actually answered.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    duration: float = 0.0
    cost: float | None = 0.0
    models: dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add_response(self, usage: ChatUsage | None, model: str | None = None) -> None:
        """Count one model response's usage (a ``ChatUsage``, or None when unreported).

        Args:
            usage: The response's usage.
            model: The name of the model that answered (counted in ``models``).
        """
        if model is not None:
            self.models[model] = self.models.get(model, 0) + 1
        if usage is None:
            self.cost = None
            return
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        cost = usage.cost  # set by adapters that know their prices
        self.cost = None if cost is None or self.cost is None else self.cost + float(cost)

    def copy(self) -> RunUsage:
        """An independent copy (the run keeps counting into its own)."""
        return RunUsage(
            self.requests,
            self.input_tokens,
            self.output_tokens,
            self.tool_calls,
            self.duration,
            self.cost,
            dict(self.models),
        )


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A tool call waiting for a human's approval.

    Attributes:
        id: The call id (the key of ``approvals={id: True | False | "reason" | Decision}``);
            a call waiting inside an agent used as a tool has the id ``"outer/inner"``
            (the outer call's id, then the inner one's, at any depth).
        name: The tool's name.
        input: The arguments the model chose (JSON-safe).
    """

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunResult(Generic[ResultT]):
    """The outcome of ``agent.run()``.

    Attributes:
        reply: The reply message, the same ``Msg`` that ``await agent(...)`` returns.
        new_messages: The messages this run added to memory, in order.
        usage: Requests, tokens, tool calls, duration and cost of this run.
        stop_reason: Why the run stopped (see ``StopReason``).
        pending: Calls waiting for approval (empty unless ``stop_reason`` is
            ``"pending_approval"``, or an interrupted run left some), including the calls
            waiting inside agents used as tools (ids ``"outer/inner"``).
        usage_limit: The name of the ``UsageLimits`` field that stopped the run, if any.
        last_agent: The name of the agent that answered: the agent run, or the target
            of the last handoff (``ReActAgent(handoffs=...)``).
        guardrail: The guardrail that tripped and stopped the run (a value, not an
            exception), if any; such a run has no ``output``.
    """

    reply: Msg
    new_messages: list[Msg]
    usage: RunUsage
    stop_reason: StopReason
    pending: list[PendingCall] = field(default_factory=list)
    usage_limit: str | None = None
    last_agent: str = ""
    guardrail: GuardrailTripped | None = None
    _output: ResultT | None = None
    _has_output: bool = False

    @property
    def output(self) -> ResultT:
        """The validated ``output_type`` instance, or the final text without ``output_type``.

        Raises:
            StateError: for a structured run that stopped before the model gave a valid
                answer (interrupted, paused for approval, usage limit), and for a run a
                guardrail stopped.
        """
        if not self._has_output:
            raise StateError(
                f"this run has no output: it stopped with stop_reason={self.stop_reason!r} "
                "without an answer it may return (no valid structured answer, or a "
                "guardrail tripped)"
            )
        return cast(ResultT, self._output)  # set together with _has_output

    @property
    def interrupted(self) -> bool:
        """Whether ``agent.interrupt()`` cut the run."""
        return self.stop_reason == "interrupted"

    @property
    def text(self) -> str:
        """The reply's text (also for a structured run)."""
        return self.reply.get_text()

    @property
    def model_name(self) -> str | None:
        """The model that gave the run's last answer; None when no model answered.

        With a ``FallbackModel``, the one of its models that actually answered.
        """
        named = (self.reply.metadata or {}).get("model")
        return named if isinstance(named, str) else None


def stop_reason(run: Run, interrupted: bool, pending: bool) -> StopReason:
    """Why ``run`` stopped, by precedence (the result's ``stop_reason``, the trace's too).

    Args:
        run: The finished run.
        interrupted: Its reply was cut by ``interrupt()``.
        pending: Calls wait for approval.
    """
    if interrupted:
        return "interrupted"
    if run.outcome.guardrail is not None:
        return "guardrail"
    if run.usage_limit is not None:
        return "usage_limit"
    if pending:
        return "pending_approval"
    if run.outcome.max_iters_reached:
        return "max_iters"
    return "final"


def make_result(run: Run, reply: Msg, pending: list[CallInfo]) -> RunResult[Any]:
    """Build the ``RunResult`` of a finished ``Run`` (``pending``: the calls waiting)."""
    calls = [PendingCall(c["id"], c["name"], dict(c["input"])) for c in pending]
    output: Any
    if run.outcome.guardrail is not None:  # the answer, if any, was refused
        output, has_output = None, False
    elif run.output.plan is None:
        output, has_output = reply.get_text(), True
    else:
        output = run.output.value
        has_output = output is not None
    return RunResult(
        reply=reply,
        new_messages=list(run.added),
        usage=run.counts.copy(),
        stop_reason=stop_reason(run, bool((reply.metadata or {}).get("interrupted")), bool(calls)),
        pending=calls,
        usage_limit=run.usage_limit,
        last_agent=run.outcome.last_agent or reply.name,
        guardrail=run.outcome.guardrail,
        _output=output,
        _has_output=has_output,
    )

"""``UsageLimits``: bounds on what one run may consume.

Set them on the agent (``ReActAgent(..., usage_limits=UsageLimits(max_requests=5))``) or per
run (``agent.run(..., usage_limits=...)``, which replaces the agent's). The loop checks them
before each model request (projected: the request about to be made, the tool calls about to
run) and after each response (actual tokens and cost). Reaching one stops the run cleanly:
every tool call of the turn is answered, memory stays valid, and the result says
``stop_reason="usage_limit"``; with ``raise_on_limit=True`` the run raises
``UsageLimitExceeded`` after that repair instead.

Two bounds are time: ``max_wall_time`` (seconds for the whole reply loop) and
``model_call_timeout`` (seconds for one model call, streaming included). They are deadlines
on cancel scopes around the run's steps, so reaching one cuts the run the way
``agent.interrupt()`` does (the model stream is closed, running tools are cancelled), and
the repair is the interrupt's: what the model streamed is kept, every call gets a result.
The run then ends like at any other limit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from agentkit.exceptions import UsageError

if TYPE_CHECKING:
    from agentkit.agent._result import RunUsage

__all__ = ["CUT_TEXT", "LIMIT_TEXT", "UsageLimits"]

LIMIT_TEXT = "Tool call not run: the run reached its usage limit ({limit})."
CUT_TEXT = "Tool call cancelled before it finished: the run reached its usage limit ({limit})."


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Bounds on one run; None means unbounded.

    Attributes:
        max_requests: Model requests.
        max_input_tokens: Prompt tokens, summed over the run's requests.
        max_output_tokens: Completion tokens, summed.
        max_total_tokens: Prompt plus completion tokens, summed.
        max_tool_calls: Tool calls run.
        max_cost: Cost in USD (only enforced when the model reports a cost).
        max_wall_time: Seconds from the start of the run to its end. Counted from the
            run's start (``pre_reply`` hooks included); the steps (model calls, tool
            calls) are cut when it runs out. A run resumed after an approval is a run of
            its own, with a budget of its own: the wait for a human is never counted.
        model_call_timeout: Seconds for one model call: the request, the provider's
            retries and the whole streamed answer. Unlike the HTTP client's ``timeout``
            (per attempt, retried by the model's ``RetryPolicy``), a call that reaches it
            is not retried: the run stops, since the run's remaining work would wait on
            the same provider.
        raise_on_limit: Raise ``UsageLimitExceeded`` instead of returning a result with
            ``stop_reason="usage_limit"``.
    """

    max_requests: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_tool_calls: int | None = None
    max_cost: float | None = None
    max_wall_time: float | None = None
    model_call_timeout: float | None = None
    raise_on_limit: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "raise_on_limit" and value is not None and value < 0:
                raise UsageError(f"UsageLimits.{f.name} must be >= 0, got {value!r}")

    @property
    def timed(self) -> bool:
        """Whether a time bound is set (the loop then runs its steps under deadlines)."""
        return self.max_wall_time is not None or self.model_call_timeout is not None

    def before_request(self, usage: RunUsage) -> str | None:
        """The limit one more model request would pass (None: the request may be made)."""
        if self.max_requests is not None and usage.requests + 1 > self.max_requests:
            return "max_requests"
        return self.after_response(usage)  # already over a token/cost bound: no request

    def before_tools(self, usage: RunUsage, count: int) -> str | None:
        """The limit running ``count`` more tool calls would pass, if any."""
        if self.max_tool_calls is not None and usage.tool_calls + count > self.max_tool_calls:
            return "max_tool_calls"
        return None

    def after_response(self, usage: RunUsage) -> str | None:
        """The token or cost limit the usage so far has passed, if any."""
        if self.max_input_tokens is not None and usage.input_tokens > self.max_input_tokens:
            return "max_input_tokens"
        if self.max_output_tokens is not None and usage.output_tokens > self.max_output_tokens:
            return "max_output_tokens"
        if self.max_total_tokens is not None and usage.total_tokens > self.max_total_tokens:
            return "max_total_tokens"
        cost = usage.cost
        if self.max_cost is not None and cost is not None and cost > self.max_cost:
            return "max_cost"
        return None

    def describe(self, limit: str) -> str:
        """A sentence naming the limit and its bound."""
        return f"usage limit reached: {limit}={getattr(self, limit)!r}"

"""Capabilities: typed participants of every run of an agent, each method optional.

A capability is a subclass of :class:`Capability` that overrides the methods it needs::

    class Support(Capability[Deps]):
        async def instructions(self, ctx: RunContext[Deps]) -> str | None:
            return f"The customer is {ctx.deps.customer}."

        async def before_tool(
            self, ctx: ToolContext[Deps], call: ToolUseBlock
        ) -> ToolUseBlock | ToolResponse:
            if call["name"] == "refund" and not ctx.deps.may_refund:
                return ToolResponse.error("Refunds need a manager.")  # the call is skipped
            return call

    agent = ReActAgent("a", "sys", model, toolkit, deps_type=Deps, capabilities=[Support()])

The loop calls, for each run, in the order the capabilities were given:

- ``for_run(ctx)`` when the run starts: the instance the run uses (per-run state: return a
  fresh one; the default returns ``self``, so a capability without state is shared);
- ``before_run(ctx)``, then for each model request ``instructions(ctx)`` (appended to that
  request's system prompt, never stored), ``tools(ctx)`` (tools offered beside the
  toolkit's, see below), ``before_model(ctx, request)`` and ``after_model(ctx, response)``;
- for each tool call about to run ``before_tool(ctx, call)`` (a ``ToolResponse`` skips the
  call and is its result: a typed veto) and ``after_tool(ctx, result)``;
- ``after_run(ctx, result)`` with the run's ``RunResult``, or ``on_error(ctx, error)`` when
  the run raises (memory is repaired first; the error propagates afterwards).

Tools of a capability: ``tools(ctx)`` returns the ``Tool`` objects (``FunctionTool`` or any
``Tool``) the capability offers the model in the next request. Their definitions follow the
toolkit's in the request, in capability order; a call to one runs through the same path as
a toolkit tool (argument validation, timeout, output limit, approval when the tool requires
it, ``before_tool``/``after_tool``, events), and works for an agent without a toolkit. The
tools are asked for before each request, so the list may change during a run (a tool
search offering what it found); keep it stable where you can, so the prompt cache holds. A
name that a toolkit tool or another capability's tool already has is a ``UsageError``. To
hide toolkit tools from a request, filter ``request.tools`` in ``before_model``.

The agent's string hooks (``register_hook``) run before its capabilities at every point:
the reasoning and acting hooks are themselves a capability placed first in each run
(``pre_reasoning`` before the first ``before_model``, ``post_reasoning`` before the first
``after_model``, likewise for acting; see ``agentkit.agent._hooks``), and the reply hooks
wrap the whole reply. Only the methods a capability overrides are called: which ones is
found once, when the agent is built, so an agent without capabilities pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from agentkit.exceptions import UsageError
from agentkit.messages import Msg, ToolUseBlock
from agentkit.tools._context import DepsT, RunContext, ToolContext
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.agent._result import RunResult
    from agentkit.models._base import ChatResponse, ChatUsage, ModelRequest
    from agentkit.tools._base import Tool
    from agentkit.tools._toolkit import Toolkit

__all__ = [
    "MESSAGE_METADATA",
    "NO_CAPABILITIES",
    "Capabilities",
    "Capability",
    "spending",
    "spent",
]

MESSAGE_METADATA = "message_metadata"
"""``response.metadata[MESSAGE_METADATA]``: a dict merged into the metadata of the assistant
message stored for the answer (how an ``after_model`` capability, the ``Compactor``,
records something on the answer that a saved session keeps)."""


class Capability(Generic[DepsT]):
    """A participant of every run of an agent; override only the methods you need."""

    def for_run(self, ctx: RunContext[DepsT]) -> Capability[DepsT]:
        """The instance this run uses: a fresh one for per-run state (default: ``self``)."""
        return self

    async def before_run(self, ctx: RunContext[DepsT]) -> None:
        """Called when the run starts, before its first step."""

    async def instructions(self, ctx: RunContext[DepsT]) -> str | None:
        """Text appended to the system prompt of each model request of the run (None: none)."""
        return None

    async def tools(self, ctx: RunContext[DepsT]) -> Sequence[Tool]:
        """Tools offered to the model in the next request, beside the toolkit's (default: none).

        Called before each model request; a call to one of them runs like a toolkit tool's.
        """
        return ()

    async def before_model(self, ctx: RunContext[DepsT], request: ModelRequest) -> ModelRequest:
        """The request to send instead of ``request`` (default: ``request`` itself)."""
        return request

    async def after_model(self, ctx: RunContext[DepsT], response: ChatResponse) -> ChatResponse:
        """The model's answer to use instead of ``response`` (before it is stored)."""
        return response

    async def before_tool(
        self, ctx: ToolContext[DepsT], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        """The call to run instead of ``call``, or a ``ToolResponse``: its result, unrun."""
        return call

    async def after_tool(self, ctx: ToolContext[DepsT], result: ToolResponse) -> ToolResponse:
        """The result to store instead of ``result`` (vetoed calls' results too)."""
        return result

    async def after_run(self, ctx: RunContext[DepsT], result: RunResult[Any]) -> None:
        """Called with the run's result once it ended (interrupted or paused runs too)."""

    async def on_error(self, ctx: RunContext[DepsT], error: BaseException) -> None:
        """Called when the run raises, after memory was repaired; ``error`` propagates."""


_METHODS = (
    "for_run",
    "before_run",
    "instructions",
    "tools",
    "before_model",
    "after_model",
    "before_tool",
    "after_tool",
    "after_run",
    "on_error",
)


def _overrides(cap: Capability[DepsT], method: str) -> bool:
    return getattr(type(cap), method) is not getattr(Capability, method)


@dataclass(frozen=True, slots=True)
class Capabilities(Generic[DepsT]):
    """An agent's capabilities, with the ones that override each method listed apart.

    Built once per agent (and again per run only when some capability has per-run state),
    so that each hook point costs one empty-tuple check when nothing overrides it.
    """

    all: tuple[Capability[DepsT], ...] = ()
    for_run: tuple[Capability[DepsT], ...] = ()
    before_run: tuple[Capability[DepsT], ...] = ()
    instructions: tuple[Capability[DepsT], ...] = ()
    tools: tuple[Capability[DepsT], ...] = ()
    before_model: tuple[Capability[DepsT], ...] = ()
    after_model: tuple[Capability[DepsT], ...] = ()
    before_tool: tuple[Capability[DepsT], ...] = ()
    after_tool: tuple[Capability[DepsT], ...] = ()
    after_run: tuple[Capability[DepsT], ...] = ()
    on_error: tuple[Capability[DepsT], ...] = ()

    @classmethod
    def of(cls, capabilities: Sequence[object]) -> Capabilities[DepsT]:
        """Sort ``capabilities`` by the methods they override.

        Raises:
            UsageError: for an item that is not a ``Capability``.
        """
        caps: list[Capability[DepsT]] = []
        for cap in capabilities:
            if not isinstance(cap, Capability):
                raise UsageError(
                    f"capabilities must be Capability instances (subclass "
                    f"agentkit.Capability); got {type(cap).__name__}"
                )
            caps.append(cap)
        return _sort(caps) if caps else NO_CAPABILITIES

    def first(self, cap: Capability[DepsT]) -> Capabilities[DepsT]:
        """These capabilities with ``cap`` before all of them (the agent's string hooks)."""
        return _sort((cap, *self.all))

    def bind(self, ctx: RunContext[DepsT]) -> Capabilities[DepsT]:
        """The capabilities of one run: ``for_run`` applied where it is overridden."""
        bound: list[Capability[DepsT]] = []
        for cap in self.all:
            if _overrides(cap, "for_run"):
                fresh = cap.for_run(ctx)
                if not isinstance(fresh, Capability):
                    raise UsageError(
                        f"{type(cap).__name__}.for_run() must return a Capability, "
                        f"got {type(fresh).__name__}"
                    )
                bound.append(fresh)
            else:
                bound.append(cap)
        return _sort(bound)

    async def system(self, ctx: RunContext[DepsT], system: Msg) -> Msg:
        """``system`` with the capabilities' instructions for this request appended."""
        parts = []
        for cap in self.instructions:
            text = await cap.instructions(ctx)
            if text:
                parts.append(text)
        if not parts:
            return system
        base = system.content if isinstance(system.content, str) else system.get_text()
        return Msg(system.name, "\n\n".join([base, *parts] if base else parts), "system")

    async def offered_tools(
        self, ctx: RunContext[DepsT], toolkit: Toolkit | None
    ) -> dict[str, Tool]:
        """The tools the capabilities offer for the next request, by name, in order.

        Raises:
            UsageError: for a name a toolkit tool or an earlier capability's tool has.
        """
        offered: dict[str, Tool] = {}
        for cap in self.tools:
            for tool in await cap.tools(ctx):
                name = tool.name
                if name in offered or (toolkit is not None and toolkit.get_tool(name) is not None):
                    where = "another capability" if name in offered else "the toolkit"
                    raise UsageError(
                        f"{type(cap).__name__} offers a tool named {name!r}, a name {where} "
                        f"already has; rename one of them"
                    )
                offered[name] = tool
        return offered

    async def run_before_model(self, ctx: RunContext[DepsT], request: ModelRequest) -> ModelRequest:
        """``before_model`` of each capability, in order."""
        for cap in self.before_model:
            request = await cap.before_model(ctx, request)
        return request

    async def run_after_model(self, ctx: RunContext[DepsT], response: ChatResponse) -> ChatResponse:
        """``after_model`` of each capability, in order."""
        for cap in self.after_model:
            response = await cap.after_model(ctx, response)
        return response

    async def run_before_tool(
        self, ctx: ToolContext[DepsT], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        """``before_tool`` of each capability, in order, until one answers the call."""
        for cap in self.before_tool:
            outcome = await cap.before_tool(ctx, call)
            if isinstance(outcome, ToolResponse):
                return outcome
            call = outcome
        return call

    async def run_after_tool(self, ctx: ToolContext[DepsT], result: ToolResponse) -> ToolResponse:
        """``after_tool`` of each capability, in order."""
        for cap in self.after_tool:
            result = await cap.after_tool(ctx, result)
        return result

    async def run_before_run(self, ctx: RunContext[DepsT]) -> None:
        """``before_run`` of each capability, in order."""
        for cap in self.before_run:
            await cap.before_run(ctx)

    async def run_after_run(self, ctx: RunContext[DepsT], result: RunResult[Any]) -> None:
        """``after_run`` of each capability, in order."""
        for cap in self.after_run:
            await cap.after_run(ctx, result)

    async def run_on_error(self, ctx: RunContext[DepsT], error: BaseException) -> None:
        """``on_error`` of each capability, in order."""
        for cap in self.on_error:
            await cap.on_error(ctx, error)


def _sort(caps: Sequence[Capability[DepsT]]) -> Capabilities[DepsT]:
    lists = {m: tuple(c for c in caps if _overrides(c, m)) for m in _METHODS}
    return Capabilities(tuple(caps), **lists)


NO_CAPABILITIES = Capabilities()
"""An agent without capabilities: every list empty."""


# Where the usage of a capability's own model calls goes: the run it takes part in.
_spend: ContextVar[Callable[[ChatUsage | None], None] | None] = ContextVar(
    "agentkit_capability_spend", default=None
)


def spent(response: ChatResponse) -> None:
    """Count a capability's own model answer in the usage (tokens, cost) of its run.

    ``Summarize`` (compaction) calls it; a capability or strategy of your own that asks a
    model should too, so ``RunResult.usage`` and the run's ``UsageLimits`` see it.
    """
    spend = _spend.get()
    if spend is not None:
        spend(response.usage)


@contextmanager
def spending(count: Callable[[ChatUsage | None], None]) -> Iterator[None]:
    """Within the block, :func:`spent` counts into ``count`` (the run's usage)."""
    token = _spend.set(count)
    try:
        yield
    finally:
        _spend.reset(token)

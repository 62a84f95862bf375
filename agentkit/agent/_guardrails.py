"""Guardrails: capabilities that check a run's input, its final answer and its tool calls.

Each guardrail wraps a function of yours, sync or async, that returns a
:class:`GuardrailResult`; ``GuardrailResult.trip("why", info)`` trips it::

    @input_guardrail
    async def no_homework(ctx: RunContext[Deps], messages: list[Msg]) -> GuardrailResult:
        if "homework" in messages[-1].get_text():
            return GuardrailResult.trip("homework is not our business")
        return GuardrailResult.passed()

    agent = ReActAgent("a", "sys", model, capabilities=[no_homework])

- :class:`InputGuardrail` runs on the run's input (the messages it stored) before the first
  model request. Nothing else happens before every input guardrail has passed: no request
  (so no assistant text reaches a client) and no tool call. With ``run_in_parallel=True``
  the first request is raced with it for speed, but its events are held and its answer is
  neither stored nor acted on until every guardrail has passed; a trip drops it (its usage
  and cost still count: it was paid for).
- :class:`OutputGuardrail` runs on the final answer (the text, or the ``output_type``
  instance) before the run returns.
- :class:`ToolGuardrail` runs before a call (on the ``tool_use`` block) or after it (on its
  ``ToolResponse``). ``action="block_call"`` answers the call with an error result instead
  (the model is told and goes on); ``action="stop_run"`` also ends the run once the turn's
  calls are answered, and vetoes every later call of that turn.

A tripped guardrail (other than a blocked call) ends the run with
``result.stop_reason == "guardrail"`` and ``result.guardrail`` set to a
:class:`GuardrailTripped` value; the run then has no ``output``. The end is the one a usage
limit takes: every tool call is answered, memory stays valid. Guardrails of one kind run
concurrently; the first to trip stops the others. An exception raised by a guardrail
function is a bug, not a trip: it propagates (memory repaired first).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, overload

import anyio
from typing_extensions import TypeVar

from agentkit.agent._capabilities import Capabilities, Capability
from agentkit.agent._state import answered_by
from agentkit.exceptions import UsageError
from agentkit.messages import Msg, ToolUseBlock
from agentkit.tools._context import DepsT, RunContext, ToolContext
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.agent._setup import RunSetup
    from agentkit.agent._state import Run
    from agentkit.events import AgentEvent
    from agentkit.models._base import ChatResponse

__all__ = [
    "GuardrailResult",
    "GuardrailTripped",
    "InputGuardrail",
    "OutputGuardrail",
    "ToolGuardrail",
    "check_output",
    "guarded_reason",
    "guarding",
    "input_guardrail",
    "input_guards",
    "output_guardrail",
    "output_guards",
    "tool_guardrail",
]

GuardrailKind: TypeAlias = Literal["input", "output", "tool"]

STOPPED_TEXT = "Tool call not run: guardrail {name!r} stopped the run."


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """A guardrail function's verdict.

    Attributes:
        tripped: Whether the guardrail trips (stops the run, or blocks the call).
        message: Why (for ``result.guardrail.message``, and the model for a blocked call).
        info: Anything the guardrail wants to hand back (``result.guardrail.info``).
    """

    tripped: bool
    message: str = ""
    info: object = None

    @classmethod
    def passed(cls, info: object = None) -> GuardrailResult:
        """A verdict that lets the run go on."""
        return cls(False, "", info)

    @classmethod
    def trip(cls, message: str, info: object = None) -> GuardrailResult:
        """A verdict that trips the guardrail, saying why."""
        return cls(True, message, info)


@dataclass(frozen=True, slots=True)
class GuardrailTripped:
    """The guardrail that stopped a run (``result.guardrail``): a value, not an exception.

    Attributes:
        name: The guardrail's name (its function's name unless given).
        kind: ``"input"``, ``"output"`` or ``"tool"``.
        message: The guardrail's reason.
        info: The ``info`` of its ``GuardrailResult``.
    """

    name: str
    kind: GuardrailKind
    message: str
    info: object = None

    def to_dict(self) -> dict[str, object]:
        """The JSON-safe part (``reply.metadata["guardrail"]``): ``info`` is left out."""
        return {"name": self.name, "kind": self.kind, "message": self.message}


Verdict: TypeAlias = "GuardrailResult | Awaitable[GuardrailResult]"
GuardrailFunction: TypeAlias = Callable[..., Verdict]

OutputT = TypeVar("OutputT", default=object)
"""The type of the answer an output guardrail function accepts (the agent's output)."""
CheckedT = TypeVar(
    "CheckedT", bound="ToolUseBlock | ToolResponse", default="ToolUseBlock | ToolResponse"
)
"""What a tool guardrail function checks: the call (``when="before"``) or its result."""

InputCheck: TypeAlias = Callable[[RunContext[DepsT], list[Msg]], Verdict]
"""An input guardrail function: the run's context and its input messages."""
OutputCheck: TypeAlias = Callable[[RunContext[DepsT], OutputT], Verdict]
"""An output guardrail function: the run's context and its final answer."""
ToolCheck: TypeAlias = Callable[[ToolContext[DepsT], CheckedT], Verdict]
"""A tool guardrail function: the call's context and the call, or its result."""


class _Guardrail(Capability[DepsT]):
    """A named guardrail function; the subclasses say when it runs."""

    kind: GuardrailKind = "input"

    def __init__(self, function: GuardrailFunction, *, name: str | None = None) -> None:
        if not callable(function):
            raise UsageError(f"a guardrail needs a function, got {type(function).__name__}")
        self.function = function
        self.name: str = name or getattr(function, "__name__", None) or type(self).__name__

    async def check(self, ctx: RunContext[DepsT], value: object) -> GuardrailTripped | None:
        """Run the function on ``value``; the trip, or None when it passed."""
        verdict = self.function(ctx, value)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not isinstance(verdict, GuardrailResult):
            raise UsageError(
                f"guardrail {self.name!r} must return a GuardrailResult, "
                f"got {type(verdict).__name__}"
            )
        if not verdict.tripped:
            return None
        return GuardrailTripped(self.name, self.kind, verdict.message, verdict.info)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class InputGuardrail(_Guardrail[DepsT]):
    """Checks the run's input before its first model request.

    Args:
        function: ``(ctx: RunContext[D], messages: list[Msg]) -> GuardrailResult`` (sync or
            async); ``messages`` are the input messages this run stored (empty when the run
            continues from memory: read ``ctx.memory`` for the whole conversation).
        name: Its name in ``result.guardrail`` (default: the function's name).
        run_in_parallel: Race the first model request with this guardrail (faster); the
            request's events and answer are held until every guardrail has passed.
    """

    kind: GuardrailKind = "input"

    def __init__(
        self,
        function: GuardrailFunction,
        *,
        name: str | None = None,
        run_in_parallel: bool = False,
    ) -> None:
        super().__init__(function, name=name)
        self.run_in_parallel = run_in_parallel


class OutputGuardrail(_Guardrail[DepsT]):
    """Checks the run's final answer before the run returns.

    Args:
        function: ``(ctx: RunContext[D], output) -> GuardrailResult`` (sync or async);
            ``output`` is the final text, or the validated ``output_type`` instance.
        name: Its name in ``result.guardrail`` (default: the function's name).
    """

    kind: GuardrailKind = "output"


class ToolGuardrail(_Guardrail[DepsT]):
    """Checks tool calls before they run, or their results after.

    Args:
        function: ``(ctx: ToolContext[D], call: ToolUseBlock) -> GuardrailResult`` with
            ``when="before"``; ``(ctx: ToolContext[D], result: ToolResponse) ->
            GuardrailResult`` with ``when="after"`` (sync or async).
        name: Its name in ``result.guardrail`` (default: the function's name).
        when: ``"before"`` the call runs, or ``"after"`` (on its result).
        action: ``"block_call"``: a trip answers the call with an error result (before:
            the call never runs; after: its result is withheld from the model) and the
            run goes on. ``"stop_run"``: the same, and the run then ends with
            ``stop_reason="guardrail"``.
        tools: The names of the tools it checks (None: every tool).
    """

    kind: GuardrailKind = "tool"

    def __init__(
        self,
        function: GuardrailFunction,
        *,
        name: str | None = None,
        when: Literal["before", "after"] = "before",
        action: Literal["block_call", "stop_run"] = "block_call",
        tools: Collection[str] | None = None,
    ) -> None:
        super().__init__(function, name=name)
        if when not in ("before", "after"):
            raise UsageError(f"ToolGuardrail when= must be 'before' or 'after', got {when!r}")
        if action not in ("block_call", "stop_run"):
            raise UsageError(
                f"ToolGuardrail action= must be 'block_call' or 'stop_run', got {action!r}"
            )
        self.when = when
        self.action = action
        # Not ``self.tools``: that is the Capability method that offers tools.
        self.tool_names = None if tools is None else frozenset(tools)

    def _applies(self, name: str) -> bool:
        return self.tool_names is None or name in self.tool_names

    def _tripped(self, tripped: GuardrailTripped) -> None:
        if self.action == "stop_run":
            _record(tripped)

    async def before_tool(
        self, ctx: ToolContext[DepsT], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        """Veto the call when the run was stopped, or when this guardrail trips on it."""
        stopped = _stopped()
        if stopped is not None:  # a guardrail stopped the run: no call starts any more
            return ToolResponse.error(STOPPED_TEXT.format(name=stopped.name))
        if self.when != "before" or not self._applies(call["name"]):
            return call
        tripped = await self.check(ctx, call)
        if tripped is None:
            return call
        self._tripped(tripped)
        return ToolResponse.error(
            f"Tool call blocked by guardrail {self.name!r}: {tripped.message}"
        )

    async def after_tool(self, ctx: ToolContext[DepsT], result: ToolResponse) -> ToolResponse:
        """Withhold the result when this guardrail trips on it."""
        if self.when != "after" or not self._applies(ctx.tool_name):
            return result
        tripped = await self.check(ctx, result)
        if tripped is None:
            return result
        self._tripped(tripped)
        return ToolResponse.error(
            f"The result of this call was withheld by guardrail {self.name!r}: {tripped.message}"
        )


# -- decorators --------------------------------------------------------------------------
@overload
def input_guardrail(function: InputCheck[DepsT], /) -> InputGuardrail[DepsT]: ...
@overload
def input_guardrail(
    *, name: str | None = None, run_in_parallel: bool = False
) -> Callable[[InputCheck[DepsT]], InputGuardrail[DepsT]]: ...
def input_guardrail(
    function: InputCheck[DepsT] | None = None,
    /,
    *,
    name: str | None = None,
    run_in_parallel: bool = False,
) -> InputGuardrail[DepsT] | Callable[[InputCheck[DepsT]], InputGuardrail[DepsT]]:
    """Make ``function`` an :class:`InputGuardrail` (``@input_guardrail`` or with options)."""

    def make(fn: InputCheck[DepsT]) -> InputGuardrail[DepsT]:
        return InputGuardrail(fn, name=name, run_in_parallel=run_in_parallel)

    return make if function is None else make(function)


@overload
def output_guardrail(function: OutputCheck[DepsT, OutputT], /) -> OutputGuardrail[DepsT]: ...
@overload
def output_guardrail(
    *, name: str | None = None
) -> Callable[[OutputCheck[DepsT, OutputT]], OutputGuardrail[DepsT]]: ...
def output_guardrail(
    function: OutputCheck[DepsT, OutputT] | None = None, /, *, name: str | None = None
) -> OutputGuardrail[DepsT] | Callable[[OutputCheck[DepsT, OutputT]], OutputGuardrail[DepsT]]:
    """Make ``function`` an :class:`OutputGuardrail` (``@output_guardrail`` or with options)."""

    def make(fn: OutputCheck[DepsT, OutputT]) -> OutputGuardrail[DepsT]:
        return OutputGuardrail(fn, name=name)

    return make if function is None else make(function)


@overload
def tool_guardrail(function: ToolCheck[DepsT, CheckedT], /) -> ToolGuardrail[DepsT]: ...
@overload
def tool_guardrail(
    *,
    name: str | None = None,
    when: Literal["before", "after"] = "before",
    action: Literal["block_call", "stop_run"] = "block_call",
    tools: Collection[str] | None = None,
) -> Callable[[ToolCheck[DepsT, CheckedT]], ToolGuardrail[DepsT]]: ...
def tool_guardrail(
    function: ToolCheck[DepsT, CheckedT] | None = None,
    /,
    *,
    name: str | None = None,
    when: Literal["before", "after"] = "before",
    action: Literal["block_call", "stop_run"] = "block_call",
    tools: Collection[str] | None = None,
) -> ToolGuardrail[DepsT] | Callable[[ToolCheck[DepsT, CheckedT]], ToolGuardrail[DepsT]]:
    """Make ``function`` a :class:`ToolGuardrail` (``@tool_guardrail`` or with options)."""

    def make(fn: ToolCheck[DepsT, CheckedT]) -> ToolGuardrail[DepsT]:
        return ToolGuardrail(fn, name=name, when=when, action=action, tools=tools)

    return make if function is None else make(function)


# -- the run's side ------------------------------------------------------------------------
# The run a tool guardrail takes part in: where a "stop_run" trip is recorded. Tool calls
# run in child tasks, which see the run's context (contextvars are copied into tasks).
_RUN: ContextVar[Run | None] = ContextVar("agentkit_guarded_run", default=None)


@contextmanager
def guarding(run: Run) -> Iterator[None]:
    """Within the block, tool guardrails record their trips on ``run``."""
    token = _RUN.set(run)
    try:
        yield
    finally:
        _RUN.reset(token)


def _record(tripped: GuardrailTripped) -> None:
    run = _RUN.get()
    if run is not None and run.outcome.guardrail is None:  # the first trip is the run's
        run.outcome.guardrail = tripped


def _stopped() -> GuardrailTripped | None:
    run = _RUN.get()
    return None if run is None else run.outcome.guardrail


def input_guards(setup: RunSetup) -> tuple[InputGuardrail[Any], ...]:
    """The run's input guardrails, in order."""
    return tuple(c for c in setup.capabilities.all if isinstance(c, InputGuardrail))


def output_guards(setup: RunSetup) -> tuple[OutputGuardrail[Any], ...]:
    """The run's output guardrails, in order."""
    return tuple(c for c in setup.capabilities.all if isinstance(c, OutputGuardrail))


async def _check_all(
    guards: Collection[_Guardrail[DepsT]], ctx: RunContext[DepsT], value: object
) -> GuardrailTripped | None:
    """Run ``guards`` concurrently on ``value``; the first trip (the others are cancelled)."""
    trips: list[GuardrailTripped] = []
    if len(guards) == 1:
        (guard,) = guards
        return await guard.check(ctx, value)

    with _single_errors():
        async with anyio.create_task_group() as tg:

            async def one(guard: _Guardrail[DepsT]) -> None:
                tripped = await guard.check(ctx, value)
                if tripped is not None and not trips:
                    trips.append(tripped)
                    tg.cancel_scope.cancel()

            for guard in guards:
                tg.start_soon(one, guard)
    return trips[0] if trips else None


@contextmanager
def _single_errors() -> Iterator[None]:
    """Raise a task group's only error as itself (a model error stays a ``ModelError``)."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


class _Gate(Capability[DepsT]):
    """Holds the raced first answer until the parallel input guardrails have passed."""

    def __init__(self, passed: anyio.Event) -> None:
        self.passed = passed

    async def after_model(self, ctx: RunContext[DepsT], response: ChatResponse) -> ChatResponse:
        await self.passed.wait()  # a trip cancels the race here: the answer is never stored
        return response


async def guarded_reason(
    setup: RunSetup,
    run: Run,
    guards: tuple[InputGuardrail[Any], ...],
    reason: Callable[[RunSetup], Awaitable[Msg]],
) -> Msg | None:
    """The first model request of a run, behind its input guardrails.

    The guardrails without ``run_in_parallel`` run first; then the request (``reason``,
    called with the setup to use) races the parallel ones, its events buffered and its
    answer held before it is stored. Returns the stored answer, or None when a guardrail
    tripped (``run.outcome.guardrail`` set; nothing of the request stored, its usage counted).
    """
    messages = list(run.added)  # the input this run stored (before any answer)
    ctx = setup.context
    blocking = [g for g in guards if not g.run_in_parallel]
    parallel = [g for g in guards if g.run_in_parallel]
    if blocking:
        run.outcome.guardrail = await _check_all(blocking, ctx, messages)
        if run.outcome.guardrail is not None:
            return None
    if not parallel:
        return await reason(setup)
    passed = anyio.Event()
    gated = dataclasses.replace(
        setup, capabilities=Capabilities.of([_Gate(passed), *setup.capabilities.all])
    )
    emit = run.emit
    held: list[AgentEvent] = []
    if emit is not None:
        run.emit = held.append
    answer: Msg | None = None
    try:
        with _single_errors():
            async with anyio.create_task_group() as tg:

                async def check() -> None:
                    run.outcome.guardrail = await _check_all(parallel, ctx, messages)
                    if run.outcome.guardrail is not None:
                        tg.cancel_scope.cancel()  # the request too, wherever it is
                    else:
                        passed.set()

                tg.start_soon(check)
                answer = await reason(gated)
    finally:
        run.emit = emit
    if run.outcome.guardrail is not None:
        # The raced answer: dropped, but paid for.
        partial, run.turn.partial = run.turn.partial, None
        if partial is not None:
            run.count_response(partial.usage, answered_by(setup.model, partial))
        return None
    if emit is not None:
        for event in held:
            emit(event)
    return answer


async def check_output(setup: RunSetup, run: Run, output: object) -> bool:
    """Run the output guardrails on the final answer; whether one tripped (recorded)."""
    guards = output_guards(setup)
    if guards:
        run.outcome.guardrail = await _check_all(guards, setup.context, output)
    return run.outcome.guardrail is not None

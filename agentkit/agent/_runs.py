"""``agent.run()`` and ``agent.run_sync()``: the typed entry points, as a mixin.

``ReActAgent`` provides ``_reply``/``_resume`` (the same machinery as ``await agent(...)``
and ``agent.resume(...)``); this module turns their outcome into a ``RunResult[T]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, overload

import anyio
from typing_extensions import TypeVar

from agentkit.agent._construct import as_input, no_running_loop
from agentkit.agent._result import RunResult, make_result
from agentkit.agent._stream import EventStream
from agentkit.agent._structured import OutputPlan, output_plan
from agentkit.exceptions import UsageError, UsageLimitExceeded
from agentkit.messages import MsgInput

if TYPE_CHECKING:
    import types
    import typing

    from pydantic import BaseModel

    from agentkit.agent._conversation import Conversation, Verdict
    from agentkit.agent._limits import UsageLimits
    from agentkit.agent._state import Run
    from agentkit.agent._structured import ModeOutput
    from agentkit.events import AgentEvent
    from agentkit.messages import Msg

__all__ = ["TypedRuns"]

ModelT = TypeVar("ModelT", bound="BaseModel")
UnionOutput: TypeAlias = "types.UnionType | typing._SpecialForm | type[BaseModel]"
"""A union of pydantic models given as ``output_type`` (``A | B``, ``Union[A, B]``): static
typing cannot name its members from the value, so such a run is ``RunResult[Any]``; write
``result: RunResult[A | B] = await agent.run(q, output_type=A | B)``."""
DepsT = TypeVar("DepsT", default=None)
"""The type of a run's dependencies (``deps_type=``; None: the agent takes none)."""
OutputT = TypeVar("OutputT", default=str)
"""The type of a run's output (``output_type=`` at construction; ``str`` by default)."""


class TypedRuns(Generic[DepsT, OutputT]):
    """``run`` / ``run_sync`` for an agent that implements ``_reply`` and ``_resume``.

    Generic in the run's dependencies and output, so ``agent.run(..., deps=wrong)`` is a
    type error and ``result.output`` is typed without ``output_type=`` per call.
    """

    __slots__ = ()
    usage_limits: UsageLimits | None
    _output: OutputPlan | None  # the agent's output_type, planned once at construction

    @property
    def conversation(self) -> Conversation:
        """The agent's conversation (memory and pending calls)."""
        raise NotImplementedError

    # Each starts a run at once (refusing a busy agent right there) and returns the awaitable
    # that drives it to its end: await it in the same expression. Plain methods, not
    # coroutines: a waiting run holds no layer of its own for them.
    def _reply(
        self,
        msgs: list[Msg],
        structured: OutputPlan | None,
        deps: object,
        limits: UsageLimits | None,
    ) -> Awaitable[tuple[Run, Msg]]:
        raise NotImplementedError

    def _resume(
        self,
        approvals: dict[str, Verdict],
        output: OutputPlan | None,
        deps: object,
        limits: UsageLimits | None,
    ) -> Awaitable[tuple[Run, Msg]]:
        raise NotImplementedError

    def _abandon(self, msgs: list[Msg]) -> Awaitable[tuple[Run, Msg]]:
        raise NotImplementedError

    async def interrupt_pending(self, msg: MsgInput = None) -> RunResult[str]:
        """End a run paused for approval as interrupted, instead of deciding its calls.

        Every call waiting for approval gets an interrupted result (it never runs), then
        ``msg`` (if any) is added to memory, as after ``interrupt(msg)`` of a running reply:
        memory stays valid and the next message continues the conversation. Durable runs
        use it when an interrupt arrives while they wait for a decision.

        Returns:
            The result, with ``stop_reason="interrupted"`` and nothing pending.

        Raises:
            StateError: when no call is waiting for approval.
            AgentBusyError: when a reply is in progress.
        """
        run, reply = await self._abandon(as_input(msg))
        result: RunResult[str] = make_result(run, reply, self.conversation.pending_calls())
        return result

    @overload
    async def run(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    async def run(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: type[ModelT] | ModeOutput[ModelT],
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[ModelT]: ...

    @overload
    async def run(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: UnionOutput | ModeOutput[Any],
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[Any]: ...

    async def run(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: UnionOutput | ModeOutput[Any] | None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[object]:
        """Run the agent on ``input`` and return a typed ``RunResult``.

        Args:
            input: A Msg, a list of Msg, a string (a user message) or None (continue).
            deps: Dependencies for this run's tools (``ToolContext[D].deps``); never stored.
            output_type: A pydantic model the answer must match, or a union of them
                (``A | B``); ``result.output`` is then the validated instance (of the
                member the model chose), else the final text.
            usage_limits: Bounds for this run (replacing the agent's ``usage_limits``). A
                resume (``approvals=``) without them runs under the paused run's limits.
            approvals: Resume a run paused for approval instead of starting one:
                ``{call_id: True | False | "reason" | Decision(...)}`` (``input`` must then
                be None). Calls waiting inside an agent used as a tool have the ids
                ``"outer_id/inner_id"`` (as in ``result.pending``); each decision reaches
                the agent holding the call. Calls not listed stay pending.

        Returns:
            The result: ``output``, ``reply``, ``new_messages``, ``usage``, ``stop_reason``,
            ``pending``.

        Raises:
            UsageLimitExceeded: when a limit is reached and ``raise_on_limit`` is set.
            AgentBusyError: when a reply is already in progress on this agent.
            UsageError: for ``input`` and ``approvals`` together, or a bad approval.
        """
        limits = usage_limits if usage_limits is not None else self.usage_limits
        structured = self._output if output_type is None else output_plan(output_type)
        if approvals is not None:
            if input is not None:
                raise UsageError("pass input= to start a run or approvals= to resume one")
            if usage_limits is None:  # a resume runs under the limits of the paused run
                limits = self.conversation.paused_limits or limits
            run, reply = await self._resume(dict(approvals), structured, deps, limits)
        else:
            run, reply = await self._reply(as_input(input), structured, deps, limits)
        result: RunResult[object] = make_result(run, reply, self.conversation.pending_calls())
        self._check_limit(run, limits, result)
        return result

    @overload
    def run_sync(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def run_sync(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: type[ModelT] | ModeOutput[ModelT],
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[ModelT]: ...

    @overload
    def run_sync(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: UnionOutput | ModeOutput[Any],
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[Any]: ...

    def run_sync(
        self,
        input: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: UnionOutput | ModeOutput[Any] | None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, Verdict] | None = None,
    ) -> RunResult[object]:
        """:meth:`run` for code without a running event loop (scripts, notebooks' cells).

        Raises:
            UsageError: when called from inside a running event loop (use ``await run``).
        """
        no_running_loop()

        async def main() -> RunResult[object]:
            return await self.run(
                input,
                deps=deps,
                output_type=output_type,
                usage_limits=usage_limits,
                approvals=approvals,
            )

        return anyio.run(main)

    @overload
    def stream(
        self,
        msg: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: None = None,
        usage_limits: UsageLimits | None = None,
    ) -> EventStream[OutputT]: ...

    @overload
    def stream(
        self,
        msg: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: type[ModelT] | ModeOutput[ModelT],
        usage_limits: UsageLimits | None = None,
    ) -> EventStream[ModelT]: ...

    @overload
    def stream(
        self,
        msg: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: UnionOutput | ModeOutput[Any],
        usage_limits: UsageLimits | None = None,
    ) -> EventStream[Any]: ...

    def stream(
        self,
        msg: MsgInput = None,
        *,
        deps: DepsT | None = None,
        output_type: UnionOutput | ModeOutput[Any] | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> EventStream[Any]:
        """Reply to ``msg`` and iterate over the events (see ``agentkit.agent._stream``).

        Same arguments as :meth:`run`. Once the reply has ended, ``events.result`` is the
        ``RunResult`` that :meth:`run` would have returned.
        """
        output = output_type

        def start() -> Awaitable[RunResult[object]]:
            return self.run(msg, deps=deps, output_type=output, usage_limits=usage_limits)

        return EventStream(self, start)

    def add_event_listener(self, sink: Callable[[AgentEvent], None]) -> None:
        """Send the events of the next replies to ``sink`` too (``stream`` uses it)."""
        raise NotImplementedError

    def remove_event_listener(self, sink: Callable[[AgentEvent], None]) -> None:
        """Stop sending events to ``sink`` (from the next reply on)."""
        raise NotImplementedError

    def interrupt_threadsafe(self, msg: MsgInput = None) -> bool:
        """Interrupt the running reply from any thread."""
        raise NotImplementedError

    @staticmethod
    def _check_limit(
        run: Run, limits: UsageLimits | None, result: RunResult[object] | None
    ) -> None:
        """Raise ``UsageLimitExceeded`` for a run stopped by one of ``limits`` set to raise."""
        if run.usage_limit is not None and limits is not None and limits.raise_on_limit:
            raise UsageLimitExceeded(run.usage_limit, limits.describe(run.usage_limit), result)

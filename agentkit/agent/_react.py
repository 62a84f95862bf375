"""``ReActAgent``: the public agent class. The loop itself lives in ``loop.py``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import anyio.from_thread
import anyio.lowlevel

import agentkit._seams as _obs
from agentkit._ids import new_id
from agentkit.agent._cancel import cancel_run, current_task
from agentkit.agent._capabilities import Capabilities, Capability, spending
from agentkit.agent._construct import as_input, as_messages, resolve_model
from agentkit.agent._conversation import CallInfo, Conversation, Verdict
from agentkit.agent._copying import copy_slots
from agentkit.agent._handoffs import Handoff, HandoffInput, as_handoffs
from agentkit.agent._hooks import HookHost, HookRegistry, with_loop_hooks
from agentkit.agent._loop import drive, finalize, first_step, wrap_up, wrap_up_suspends
from agentkit.agent._result import make_result
from agentkit.agent._runs import DepsT, OutputT, TypedRuns
from agentkit.agent._setup import ApprovalPolicy, RunSetup
from agentkit.agent._state import Run
from agentkit.agent._steer import SteerOutcome
from agentkit.agent._steer import accept as accept_steers
from agentkit.agent._steer import close as close_steers
from agentkit.agent._steps import Settle, Step
from agentkit.agent._stream import fan_out
from agentkit.agent._structured import OutputPlan, output_plan
from agentkit.agent._validators import OutputValidator, ValidatorT
from agentkit.events import AgentEvent, ReplyFinished, ReplyStarted
from agentkit.exceptions import AgentBusyError, StateError, UsageError
from agentkit.memory import InMemoryMemory, Memory
from agentkit.messages import Msg, MsgInput
from agentkit.tools._context import RunContext

if TYPE_CHECKING:
    from types import UnionType

    from pydantic import BaseModel

    from agentkit.agent._limits import UsageLimits
    from agentkit.agent._printer import ConsolePrinter
    from agentkit.agent._structured import ModeOutput
    from agentkit.models._base import ChatModel
    from agentkit.tools import Tool, Toolkit

__all__ = ["ApprovalPolicy", "ReActAgent"]

_logger = logging.getLogger("agentkit.agent")


class ReActAgent(TypedRuns[DepsT, OutputT], HookHost):
    """A tool-using agent: reason (model call) -> act (tool calls) until it answers.

    Args:
        name: The agent's name (author of its messages).
        sys_prompt: The system prompt.
        model: The chat model.
        toolkit: Tools the model may call (a ``Toolkit``; None: no tools yet).
        deps_type: The type of the runs' dependencies (``agent.run(..., deps=...)``, seen by
            tools as ``ToolContext[D].deps``). It types the agent (``ReActAgent[D, ...]``)
            so that a wrong ``deps=`` is a type error; None: the agent takes none.
        output_type: A pydantic model every run's answer must match (``result.output`` is
            the validated instance; ``run(output_type=...)`` overrides it for one run), or
            a union of them (``A | B``: one response tool per member; annotate the agent
            as ``ReActAgent[D, A | B]``). None or ``str``: the final text.
        memory: Conversation memory (an ``InMemoryMemory`` by default).
        max_iters: Model calls per reply before the agent asks for a final summary.
        parallel_tool_calls: Run the tool calls of one turn concurrently.
        print_hint: Print the reply to the console as it streams (default False: a
            library does not print; the CLI turns it on).
        max_concurrency: At most this many tool calls in flight (None: no limit).
        approval_policy: For tools registered with ``requires_approval=True``: called with
            the ``tool_use`` block (sync or async); True approves the call automatically,
            False leaves it to a human (``resume``). Without a policy every such call waits.
        usage_limits: Bounds on every run (``agent.run(usage_limits=...)`` replaces them
            for one run).
        max_tool_retries: How many times one tool may raise ``ToolRetry`` in one run before
            its call is answered as a plain failure.
        capabilities: Typed participants of every run (``Capability`` subclasses: the
            ``Compactor``, guardrails, your own), called in this order at each point of
            the run; ``copy()`` keeps them. A capability with per-run state gives each run
            a fresh instance through ``for_run``.
        handoffs: Agents this one may hand the conversation to (an agent, or
            ``handoff(agent, input_filter=..., description=...)`` for more control): the
            model is offered one ``transfer_to_<name>`` tool per target, and the target
            answers in its place on a copy of itself (``result.last_agent`` names it);
            ``copy()`` keeps them. See ``agentkit.agent._handoffs``.

    Everything after ``toolkit`` is keyword-only. ``model`` may be a ``"provider:model"``
    string, resolved by ``agentkit.models.from_string``.

    """

    __slots__ = (
        "__weakref__",
        "_capabilities",
        "_conv",
        "_handoffs",
        "_limiter",
        "_listeners",
        "_output",
        "_printer",
        "_run",
        "_sys_msg",
        "_toolkit",
        "_validators",
        "approval_policy",
        "deps_type",
        "max_iters",
        "max_tool_retries",
        "model",
        "name",
        "parallel_tool_calls",
        "print_hint",
        "sys_prompt",
        "usage_limits",
    )

    def __init__(
        self,
        name: str,
        sys_prompt: str,
        model: ChatModel | str,
        toolkit: Toolkit | None = None,
        *,
        deps_type: type[DepsT] | None = None,
        output_type: type[OutputT] | ModeOutput[OutputT] | UnionType | None = None,
        memory: Memory | None = None,
        max_iters: int = 10,
        parallel_tool_calls: bool = True,
        print_hint: bool = False,
        max_concurrency: int | None = None,
        approval_policy: ApprovalPolicy | None = None,
        usage_limits: UsageLimits | None = None,
        max_tool_retries: int = 2,
        capabilities: Sequence[Capability[DepsT]] = (),
        handoffs: Sequence[HandoffInput] = (),
    ) -> None:
        if max_iters < 1:
            raise UsageError("max_iters must be at least 1")
        if max_tool_retries < 0:
            raise UsageError("max_tool_retries must be >= 0")
        self.name = name
        self.sys_prompt = sys_prompt
        self.deps_type = deps_type
        self._output = output_plan(output_type)  # checked here, once for every run
        self.model = resolve_model(model)
        self._toolkit: Toolkit | None = toolkit
        self._conv = Conversation(memory if memory is not None else InMemoryMemory())
        self.max_iters = max_iters
        self.parallel_tool_calls = parallel_tool_calls
        self.print_hint = print_hint
        self.approval_policy = approval_policy
        self.usage_limits = usage_limits
        self.max_tool_retries = max_tool_retries
        self._limiter = anyio.CapacityLimiter(max_concurrency) if max_concurrency else None
        self._capabilities = Capabilities.of(capabilities)  # sorted by method, once
        self._handoffs = as_handoffs(handoffs)
        self._hooks: HookRegistry | None = None
        self._listeners: tuple[Callable[[AgentEvent], None], ...] = ()  # replaced, never mutated
        self._printer: ConsolePrinter | None = None
        self._run: Run | None = None
        self._sys_msg: Msg | None = None
        self._validators: tuple[OutputValidator, ...] = ()  # replaced, never mutated

    def copy(
        self, *, memory: Memory | None = None, toolkit: Toolkit | None = None
    ) -> ReActAgent[DepsT, OutputT]:
        """A new agent with this one's configuration and a conversation of its own.

        The copy shares the model, toolkit, capabilities, output validators, approval
        policy, limits and concurrency limiter (configuration); it starts with this agent's
        hooks in a registry of its own (a hook registered or removed later on either side
        stays on that side); it gets a fresh conversation (``memory`` or an empty
        ``InMemoryMemory``), no pending calls and no listeners.
        Cheap: use it to serve one template agent to many conversations (the template may
        be replying meanwhile).
        Pass ``toolkit=agent.toolkit.copy()`` for a toolkit of its own (copy-on-write, so
        it costs nothing until the conversation changes its tools or groups).
        """
        fresh: dict[str, object] = {
            "_conv": Conversation(memory if memory is not None else InMemoryMemory()),
            "_listeners": (),
            "_printer": None,
            "_run": None,
            # Its own registry: a hook registered on either side later stays on that side.
            "_hooks": None if self._hooks is None else self._hooks.copy(),
        }
        if toolkit is not None:
            fresh["_toolkit"] = toolkit
        return copy_slots(self, fresh)

    # -- configuration -----------------------------------------------------------------
    def output_validator(self, function: ValidatorT) -> ValidatorT:
        """Register ``function`` to check every final answer (a decorator).

        ``function(ctx: RunContext[D], output: T) -> T``, sync or async, receives the
        validated ``output_type`` instance (or the final text of a text run) and returns
        the answer to use. Raising ``ToolRetry("...")`` rejects it: the model is told
        the message and answers again, within the structured-output retry budget (past
        it the run raises ``StructuredOutputError``). Validators run in the order they
        were registered; ``copy()`` keeps them.
        """
        self._validators = (*self._validators, function)
        return function

    @property
    def output_validators(self) -> tuple[OutputValidator, ...]:
        """The registered output validators, in order."""
        return self._validators

    @property
    def memory(self) -> Memory:
        """The conversation memory."""
        return self._conv.memory

    @memory.setter
    def memory(self, value: Memory) -> None:
        self._conv.memory = value

    @property
    def output_type(self) -> object:
        """The ``output_type`` every run's answer must match, as given (None: the text)."""
        return _given(self._output)

    @property
    def conversation(self) -> Conversation:
        """Memory plus what outlives a run (pending calls, deferred messages): the state."""
        return self._conv

    @property
    def session_versions(self) -> dict[tuple[str, str], int]:
        """The session versions the conversation was loaded at or saved as (see ``Session``)."""
        return self._conv.session_versions

    @property
    def toolkit(self) -> Toolkit:
        """The agent's ``Toolkit`` (an empty one is created on first access if none)."""
        if self._toolkit is None:
            from agentkit.tools import Toolkit

            self._toolkit = Toolkit()
        assert self._toolkit is not None
        return self._toolkit

    @toolkit.setter
    def toolkit(self, value: Toolkit | None) -> None:
        self._toolkit = value

    @property
    def capabilities(self) -> tuple[Capability[DepsT], ...]:
        """The agent's capabilities, in the order they are called."""
        return self._capabilities.all

    @property
    def handoffs(self) -> tuple[Handoff, ...]:
        """The agents this one may hand the conversation to (one tool each)."""
        return self._handoffs

    @handoffs.setter
    def handoffs(self, value: Sequence[HandoffInput]) -> None:
        # Settable after construction: two agents that hand off to each other.
        self._handoffs = as_handoffs(value)

    @property
    def max_concurrency(self) -> int | None:
        """At most this many tool calls in flight (None: unbounded)."""
        return None if self._limiter is None else int(self._limiter.total_tokens)

    @property
    def is_replying(self) -> bool:
        """Whether a reply is in progress."""
        return self._run is not None

    @property
    def pending_tool_calls(self) -> list[CallInfo]:
        """Calls waiting for approval, as ``{"id", "name", "input"}`` dicts."""
        return self._conv.pending_calls()

    def system_msg(self) -> Msg:
        """The system message (rebuilt only when ``sys_prompt`` changes)."""
        msg = self._sys_msg
        if msg is None or msg.content != self.sys_prompt:
            msg = self._sys_msg = Msg("system", self.sys_prompt, "system")
        return msg

    # -- replying ----------------------------------------------------------------------
    async def __call__(
        self,
        msg: MsgInput = None,
        *,
        output_type: type[BaseModel] | None = None,
        deps: DepsT | None = None,
    ) -> Msg:
        """Reply to ``msg`` (None: continue from memory).

        The AgentScope-compatible form; :meth:`run` returns the same reply in a typed
        ``RunResult``.

        Args:
            msg: A Msg, a list of Msg, a string (a user message) or None.
            output_type: A pydantic model the final answer must match; the validated
                value (JSON form) is put in ``reply.metadata["structured_output"]``.
            deps: Dependencies for this reply's tools (``ToolContext.deps``).

        Returns:
            The reply. ``metadata`` holds ``usage``, ``iterations`` and ``time``, and
            ``interrupted``, ``pending_tool_calls`` or ``max_iters_reached`` when relevant.

        Raises:
            AgentBusyError: when a reply is already in progress on this agent.
            MemoryInvariantError: when ``msg`` holds a tool call without its result (or a
                result without its call); nothing is stored then.
        """
        output = self._output if output_type is None else output_plan(output_type)
        limits = self.usage_limits
        run, reply = await self._reply(as_input(msg), output, deps, limits)
        self._check_limit(run, limits, None)
        return reply

    async def resume(
        self,
        approvals: Mapping[str, Verdict] | None = None,
        *,
        output_type: type[BaseModel] | None = None,
    ) -> Msg:
        """Settle calls waiting for approval and continue the reply.

        The continued reply runs under the ``UsageLimits`` of the reply that paused (each
        reply counts its own usage).

        Args:
            approvals: ``{call_id: True | False | "reason" | Decision(...)}``: True runs the
                call; False or a reason denies it (the model is told); a ``Decision`` may
                also replace the arguments (``input=``). Calls waiting inside an agent used
                as a tool have the ids ``"outer/inner"``. Calls not listed stay pending.
            output_type: For a structured reply that paused; defaults to the model of the
                paused reply.

        Raises:
            AgentBusyError: when a reply is in progress.
            UsageError: for an id that is not pending or a verdict of the wrong type.
            StateError: when no call is waiting for approval at all.
        """
        limits = self._conv.paused_limits or self.usage_limits  # the paused run's, if any
        output = output_plan(output_type)
        run, reply = await self._resume(dict(approvals or {}), output, None, limits)
        self._check_limit(run, limits, None)
        return reply

    def _reply(
        self,
        msgs: list[Msg],
        structured: OutputPlan | None,
        deps: object,
        limits: UsageLimits | None,
    ) -> Awaitable[tuple[Run, Msg]]:
        """Start a reply to ``msgs``; the awaitable drives it (``TypedRuns._reply``)."""
        run, setup = self._start(structured, deps, limits)
        run.inbox = msgs
        kwargs: dict[str, Any] = {"msg": msgs, "output_type": _given(structured)}
        return self._drive(run, setup, kwargs, _reply_start)

    def _resume(
        self,
        approvals: dict[str, Verdict],
        output: OutputPlan | None,
        deps: object,
        limits: UsageLimits | None,
    ) -> Awaitable[tuple[Run, Msg]]:
        """Start resuming a paused reply; the awaitable drives it (``TypedRuns._resume``)."""
        if self._run is not None:
            raise AgentBusyError(f"agent {self.name!r} is already replying")
        conv = self._conv
        conv.check_approvals(self.name, approvals, output)
        structured = output or conv.paused_output
        run, setup = self._start(structured, deps, limits)
        run.iteration = conv.iteration
        kwargs: dict[str, Any] = {
            "msg": [],
            "approvals": approvals,
            "output_type": _given(structured),
        }
        return self._drive(run, setup, kwargs, _resume_start)

    def _abandon(self, msgs: list[Msg]) -> Awaitable[tuple[Run, Msg]]:
        """End a reply paused for approval as interrupted (``TypedRuns.interrupt_pending``)."""
        conv = self._conv
        if not conv.has_pending:
            raise StateError(f"agent {self.name!r} has no tool calls waiting for approval")
        run, setup = self._start(conv.paused_output, None, None)
        run.iteration = conv.iteration

        async def start(
            setup: RunSetup, conv: Conversation, run: Run, kwargs: dict[str, Any]
        ) -> Step:
            # The pending calls become an open batch; the interrupt's repair (finalize)
            # answers it exactly as it answers calls cut by a local interrupt.
            calls, conv.pending = conv.pending, []
            run.begin_batch(calls)
            self._interrupt(msgs)
            await anyio.sleep_forever()
            raise AssertionError("unreachable")  # pragma: no cover

        return self._drive(run, setup, {"msg": [], "approvals": {}}, start)

    async def observe(self, msg: Msg | Sequence[Msg] | None) -> None:
        """Add messages to memory without replying (deferred while busy or pending).

        Raises:
            MemoryInvariantError: when they hold a tool call without its result (or a
                result without its call); nothing is added then.
        """
        msgs = as_input(msg)
        if self._run is not None or self._conv.has_pending:
            self._conv.deferred.extend(msgs)
        else:
            await self.memory.add(msgs)

    async def steer(self, msg: MsgInput) -> SteerOutcome:
        """Add a user message to the run in progress, without stopping it.

        The message is stored right before the run's next model request (never between a
        tool call and its result). Accepted while the final answer streams, or after the
        last request, it gets a follow-up turn of the same run that answers it. While calls
        wait for approval it is kept (with the state) and stored when the run resumes,
        before its next request. A run that ends otherwise (a usage limit, an interrupt, an
        error) keeps it for the conversation's next request. Accepted is never lost.

        Args:
            msg: A string (a user message), a Msg or a list of Msg.

        Returns:
            ``"next_request"`` (stored before a model request of this run, or of the
            conversation's next one when the run ended first) or ``"follow_up"`` (the run
            made one more turn to answer it). Returns once the message is placed: while a
            tool runs, that is when the tools have finished.

        Raises:
            StateError: when no run is in progress and no call waits for approval.
            UsageError: for an empty message.
            MemoryInvariantError: when ``msg`` holds a tool call without its result.
        """
        msgs = as_input(msg)  # no await before the message is queued: order is call order
        if not msgs:
            raise UsageError("steer needs a message")
        if self._run is None and not self._conv.has_pending:
            raise StateError(f"agent {self.name!r} has no run in progress to steer")
        queued = accept_steers(self._conv, self._run, msgs)
        return "next_request" if queued is None else await queued.wait()

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a ``Tool`` for another agent's toolkit (``agentkit.pipelines``)."""
        from agentkit.pipelines import agent_as_tool

        tool: Tool = agent_as_tool(self, name, description)
        return tool

    # -- interrupt ---------------------------------------------------------------------
    async def interrupt(self, msg: MsgInput = None) -> bool:
        """Interrupt the reply in progress (a no-op when idle).

        Args:
            msg: Messages added to memory after the repairs, seen by the next reply.

        Returns:
            Whether a reply was interrupted.
        """
        return self._interrupt(msg)

    def interrupt_threadsafe(self, msg: MsgInput = None) -> bool:
        """Like :meth:`interrupt`, from a thread other than the event loop's (a console)."""
        run = self._run
        if run is None or run.control.token is None:
            return False
        if threading.get_ident() == run.control.thread:  # on the loop's own thread: no hop needed
            return self._interrupt(msg)
        try:
            return anyio.from_thread.run_sync(self._interrupt, msg, token=run.control.token)
        except RuntimeError:  # the event loop is closed: nothing left to interrupt
            return False

    def _interrupt(self, msg: MsgInput) -> bool:
        run = self._run
        if run is None or run.control.scope is None:
            return False
        control = run.control
        if msg is not None:  # a plain interrupt (the common one) checks and copies nothing
            control.interrupt_msgs = (*control.interrupt_msgs, *as_input(msg))
        control.interrupted = True
        cancel_run(run.control.scope, control.task)
        return True

    # -- run driving -------------------------------------------------------------------
    def _start(
        self, output: OutputPlan | None, deps: object, limits: UsageLimits | None
    ) -> tuple[Run, RunSetup]:
        if self._run is not None:
            raise AgentBusyError(f"agent {self.name!r} is already replying")
        emit = None
        if self.print_hint or self._listeners:
            emit = self._make_emit()
        run = Run(emit, output)
        context: RunContext[object] = RunContext(
            deps=deps,
            run_id=new_id(),
            agent_name=self.name,
            usage=run.counts,
            memory=self._conv.memory,
            model=self.model,
        )
        capabilities = self._capabilities
        if capabilities.for_run:  # per-run instances; may raise: before the run is set
            capabilities = capabilities.bind(context)
        # Built from the registry as it is now: a hook registered since the last run counts.
        capabilities = with_loop_hooks(self, self._hooks, capabilities)
        self._run = run
        run.control.bind_loop()
        setup = RunSetup(
            name=self.name,
            model=self.model,
            system=self.system_msg,
            toolkit=self._toolkit,
            owner=self,
            limiter=self._limiter,
            limits=limits,
            context=context,
            capabilities=capabilities,
            max_iters=self.max_iters,
            parallel_tool_calls=self.parallel_tool_calls,
            approval_policy=self.approval_policy,
            max_tool_retries=self.max_tool_retries,
            output_validators=self._validators,
        )
        return run, setup

    def _make_emit(self) -> Callable[[AgentEvent], None]:
        sinks: list[Callable[[AgentEvent], None]] = list(self._listeners)
        if self.print_hint:
            if self._printer is None or self._printer.name != self.name:
                from agentkit.agent._printer import ConsolePrinter

                self._printer = ConsolePrinter(self.name)
            sinks.append(self._printer)
        return fan_out(sinks)

    def add_event_listener(self, sink: Callable[[AgentEvent], None]) -> None:
        """Send the events of the next replies to ``sink`` too (``agent.stream`` uses it)."""
        self._listeners = (*self._listeners, sink)

    def remove_event_listener(self, sink: Callable[[AgentEvent], None]) -> None:
        """Stop sending events to ``sink`` (from the next reply on)."""
        listeners = list(self._listeners)
        listeners.remove(sink)  # ValueError for a sink never added, as before
        self._listeners = tuple(listeners)

    def _drive(
        self, run: Run, setup: RunSetup, kwargs: dict[str, Any], start: _Start
    ) -> Awaitable[tuple[Run, Msg]]:
        """The coroutine that runs the reply's steps from ``start``, between the reply hooks.

        A plain function handing on that coroutine: without capabilities and
        instrumentation (the common case) a waiting reply holds no forwarding layer, nor
        a no-op span's exit, between ``agent(...)`` and its steps.
        """
        if not setup.capabilities.all and _obs.installed() is None:
            return self._drive_reply(run, setup, kwargs, start)
        return self._wrapped(run, setup, kwargs, start)

    async def _wrapped(
        self, run: Run, setup: RunSetup, kwargs: dict[str, Any], start: _Start
    ) -> tuple[Run, Msg]:
        """The reply inside its span, counting a capability's own model calls as its own."""
        with _obs.run_span(self, run):  # observability seam: the invoke_agent span
            if not setup.capabilities.all:
                return await self._drive_reply(run, setup, kwargs, start)
            with spending(run.count_response):  # a capability's own model calls: this run's
                return await self._drive_reply(run, setup, kwargs, start)

    async def _drive_reply(
        self, run: Run, setup: RunSetup, kwargs: dict[str, Any], start: _Start
    ) -> tuple[Run, Msg]:
        """Run the steps from ``start`` between the reply hooks, interruptible.

        Repairs memory after a cut.
        """
        conv = self._conv
        caps = setup.capabilities
        control = run.control
        try:
            try:
                with anyio.CancelScope() as scope:
                    control.scope = scope
                    control.task = current_task()
                    # Inside the scope: a listener may interrupt on this very event.
                    if run.emit is not None:
                        run.emit(ReplyStarted(self.name))
                    if caps.before_run:
                        await caps.run_before_run(setup.context)
                    # Without reply hooks, the steps straight: a layer less held while
                    # the model answers.
                    hooks = self._hooks
                    if hooks is None or not (hooks.has("pre_reply") or hooks.has("post_reply")):
                        step = await start(setup, conv, run, kwargs)
                        reply = await drive(setup, conv, run, step)
                    else:
                        reply = await self._with_reply_hooks(run, setup, kwargs, start)
            except BaseException as exc:
                # An error, or a cancellation from outside (not our interrupt): repair
                # memory, then let it propagate.
                control.scope = None  # from here on, interrupt() is a no-op
                with anyio.CancelScope(shield=True):
                    await finalize(setup, conv, run, exc)
                    close_steers(conv, run)  # undelivered steers: kept for the next request
                    await conv.flush_deferred(run)
                if caps.on_error:
                    await _report_error(caps, setup.context, exc)
                raise
            control.scope = None
            late = control.interrupt_msgs  # given to interrupt(): stored after any repair
            if scope.cancelled_caught or late or run.steering or conv.has_deferred:
                done = None if scope.cancelled_caught else reply
                if wrap_up_suspends(conv, run):
                    with anyio.CancelScope(shield=True):  # writes that must all land
                        reply = await wrap_up(setup, conv, run, done)
                else:  # no write can suspend, so no cancellation can cut them: no shield
                    reply = await wrap_up(setup, conv, run, done)
            else:  # nothing to write (the common case): no await, so no shield to enter
                close_steers(conv, run)
            if caps.after_run:
                run.counts.duration = time.perf_counter() - control.started
                result = make_result(run, reply, conv.pending_calls())
                await caps.run_after_run(setup.context, result)
            if run.emit is not None:
                run.emit(ReplyFinished(reply))
            return run, reply
        finally:
            # A reply paused for approval resumes with its structured model and iterations.
            conv.pause(run.output.plan, run.iteration, setup.limits)
            run.counts.duration = time.perf_counter() - control.started
            self._run = None

    async def _with_reply_hooks(
        self, run: Run, setup: RunSetup, kwargs: dict[str, Any], start: _Start
    ) -> Msg:
        hooks = self._hooks
        if hooks is not None and hooks.has("pre_reply"):
            kwargs = await hooks.run_pre("pre_reply", self, kwargs)
            given = kwargs.get("output_type")
            if given is not _given(run.output.plan):  # the hook asked for another answer
                run.output.plan = output_plan(given)
        conv = self._conv
        reply = await drive(setup, conv, run, await start(setup, conv, run, kwargs))
        if hooks is not None and hooks.has("post_reply"):
            reply = await hooks.run_post("post_reply", self, kwargs, reply)
        return reply

    # -- state -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """A JSON-safe snapshot: memory, pending calls, iteration, toolkit state.

        Deps, hooks and the model are not part of it (they are configuration, or live
        objects that a state file cannot hold).

        Raises:
            AgentBusyError: while a model call or tool calls are in flight (memory is
                mid-step then); from a ``post_reply`` hook it works.
        """
        run = self._run
        if run is not None and (
            run.turn.calling_model or run.batch is not None or run.turn.partial is not None
        ):
            raise AgentBusyError(f"agent {self.name!r} is mid-step; snapshot after the reply")
        state = self._conv.state_dict(self.name, run.iteration if run is not None else None)
        toolkit_state = getattr(self._toolkit, "state_dict", None)
        if toolkit_state is not None:
            state["toolkit"] = toolkit_state()
        return state

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore a snapshot from :meth:`state_dict` (validated before anything changes).

        States written by older agentkit versions are migrated first
        (``agentkit.agent._state.migrate_state``).

        Raises:
            StateError: on an unknown ``schema_version`` or inconsistent content.
            AgentBusyError: while a reply is in progress.
        """
        if self._run is not None:
            raise AgentBusyError(f"agent {self.name!r} is replying; cannot load state now")
        checked = self._conv.check_state(state)  # refuse a corrupt state before any change
        state = checked.state
        # The toolkit first (it may still refuse its part), then memory; if memory refuses,
        # the toolkit gets its old state back: a failed load changes nothing.
        toolkit, restore = self._toolkit, None
        if "toolkit" in state and toolkit is not None and hasattr(toolkit, "load_state_dict"):
            restore = toolkit.state_dict()
            toolkit.load_state_dict(state["toolkit"])
        try:
            self._conv.apply_state(checked)
        except BaseException:
            if restore is not None:
                assert toolkit is not None
                toolkit.load_state_dict(restore)
            raise

    def __repr__(self) -> str:
        return f"ReActAgent(name={self.name!r}, model={self.model!r})"


_Start: TypeAlias = Callable[[RunSetup, Conversation, Run, dict[str, Any]], Awaitable[Step]]
"""Where a reply's steps start (``ReActAgent._drive``), from the reply's ``kwargs`` (as the
``pre_reply`` hooks left them): a module function, not a closure over the run, so a waiting
reply holds no function and cells of its own."""


def _reply_start(
    setup: RunSetup, conv: Conversation, run: Run, kwargs: dict[str, Any]
) -> Awaitable[Step]:
    return first_step(setup, conv, run, as_messages(kwargs["msg"]))


async def _resume_start(
    setup: RunSetup, conv: Conversation, run: Run, kwargs: dict[str, Any]
) -> Step:
    return Settle(tuple(kwargs["approvals"].items()))


# A failing run must not hang on a capability's error report (it runs shielded).
_ON_ERROR_TIMEOUT = 5.0


async def _report_error(
    caps: Capabilities[DepsT], ctx: RunContext[DepsT], error: BaseException
) -> None:
    """``on_error`` of the capabilities, shielded and bounded; their own errors are logged."""
    with anyio.move_on_after(_ON_ERROR_TIMEOUT, shield=True):
        try:
            await caps.run_on_error(ctx, error)
        except Exception:  # the run's own error is what propagates
            _logger.exception("a capability's on_error failed")


def _given(output: OutputPlan | None) -> object:
    """The ``output_type`` a plan was built from (None: a plain-text answer)."""
    return None if output is None else output.output_type

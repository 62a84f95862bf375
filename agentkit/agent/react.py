"""``ReActAgent``: the public agent class. The loop itself lives in ``loop.py``."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from agentkit.agent import loop
from agentkit.agent.acting import describe_call
from agentkit.agent.events import AgentEvent, ReplyFinished, ReplyStarted
from agentkit.agent.hooks import HookHost, HookRegistry
from agentkit.agent.state import SCHEMA_VERSION, Run, parse_agent_state
from agentkit.agent.stream import EventStream
from agentkit.exceptions import AgentBusyError, StateError
from agentkit.memory import InMemoryMemory, Memory, MemoryInvariantError, check_memory_invariant
from agentkit.messages import Msg, ToolUseBlock
from agentkit.observability import seams as _obs

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent.printer import ConsolePrinter
    from agentkit.models.base import ChatModel
    from agentkit.tools import Tool, Toolkit

__all__ = ["ApprovalPolicy", "ReActAgent"]

logger = logging.getLogger("agentkit.agent")

ApprovalPolicy = Callable[[ToolUseBlock], "bool | Awaitable[bool]"]
MsgInput = Msg | Sequence[Msg] | str | None


def _as_messages(msg: MsgInput) -> list[Msg]:
    if msg is None:
        return []
    if isinstance(msg, Msg):
        return [msg]
    if isinstance(msg, str):
        return [Msg("user", msg, "user")]
    items = list(msg)
    for item in items:
        if not isinstance(item, Msg):
            raise TypeError(f"expected Msg, list of Msg, str or None; got {type(item).__name__}")
    return items


def _as_input(msg: MsgInput) -> list[Msg]:
    """Messages given to the agent, checked: they may not leave a tool call unanswered.

    Memory at rest has every call answered, so input that is balanced on its own keeps it
    valid; anything else would be refused by every provider on the next request, and the
    saved state could not be loaded back.
    """
    msgs = _as_messages(msg)
    if any(not isinstance(m.content, str) for m in msgs):
        try:
            check_memory_invariant(msgs)
        except MemoryInvariantError as exc:
            raise MemoryInvariantError(
                exc.call_id,
                f"{exc.problem} in the messages given to the agent (give tool calls and "
                "their results together, or edit agent.memory directly)",
            ) from None
    return msgs


class ReActAgent(HookHost):
    """A tool-using agent: reason (model call) -> act (tool calls) until it answers.

    Args:
        name: The agent's name (author of its messages).
        sys_prompt: The system prompt.
        model: The chat model.
        toolkit: Tools the model may call (a ``Toolkit``; None: no tools yet).
        memory: Conversation memory (an ``InMemoryMemory`` by default).
        max_iters: Model calls per reply before the agent asks for a final summary.
        parallel_tool_calls: Run the tool calls of one turn concurrently.
        print_hint: Print the reply to the console as it streams.
        max_concurrency: At most this many tool calls in flight (None: no limit).
        approval_policy: For tools registered with ``requires_approval=True``: called with
            the ``tool_use`` block (sync or async); True approves the call automatically,
            False leaves it to a human (``resume``). Without a policy every such call waits.

    Attributes:
        memory: The conversation memory.
        model: The chat model.
    """

    __slots__ = (
        "__weakref__",
        "_deferred",
        "_iteration",
        "_limiter",
        "_listeners",
        "_pending",
        "_printer",
        "_run",
        "_suspended",
        "_suspended_name",
        "_sys_msg",
        "_toolkit",
        "approval_policy",
        "max_iters",
        "memory",
        "model",
        "name",
        "parallel_tool_calls",
        "print_hint",
        "sys_prompt",
    )

    def __init__(
        self,
        name: str,
        sys_prompt: str,
        model: ChatModel,
        toolkit: Toolkit | None = None,
        memory: Memory | None = None,
        max_iters: int = 10,
        parallel_tool_calls: bool = True,
        print_hint: bool = True,
        *,
        max_concurrency: int | None = None,
        approval_policy: ApprovalPolicy | None = None,
    ) -> None:
        if max_iters < 1:
            raise ValueError("max_iters must be at least 1")
        self.name = name
        self.sys_prompt = sys_prompt
        self.model = model
        self._toolkit: Toolkit | None = toolkit
        self.memory: Memory = memory if memory is not None else InMemoryMemory()
        self.max_iters = max_iters
        self.parallel_tool_calls = parallel_tool_calls
        self.print_hint = print_hint
        self.approval_policy = approval_policy
        self._limiter = anyio.CapacityLimiter(max_concurrency) if max_concurrency else None
        self._hooks: HookRegistry | None = None
        self._listeners: list[Callable[[AgentEvent], None]] = []
        self._printer: ConsolePrinter | None = None
        self._run: Run | None = None
        self._pending: list[ToolUseBlock] = []
        self._deferred: list[Msg] = []
        self._suspended: type[BaseModel] | None = None
        # Qualified name of a paused structured reply's model, kept across save/load (the
        # class itself is never imported from a saved state).
        self._suspended_name: str | None = None
        self._sys_msg: Msg | None = None
        self._iteration = 0  # iterations of a reply paused for approval

    # -- configuration -----------------------------------------------------------------
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
    def max_concurrency(self) -> int | None:
        """At most this many tool calls in flight (None: unbounded)."""
        return None if self._limiter is None else int(self._limiter.total_tokens)

    @property
    def is_replying(self) -> bool:
        """Whether a reply is in progress."""
        return self._run is not None

    @property
    def pending_tool_calls(self) -> list[dict[str, Any]]:
        """Calls waiting for approval, as ``{"id", "name", "input"}`` dicts."""
        return [describe_call(c) for c in self._pending]

    def system_msg(self) -> Msg:
        """The system message (rebuilt only when ``sys_prompt`` changes)."""
        msg = self._sys_msg
        if msg is None or msg.content != self.sys_prompt:
            msg = self._sys_msg = Msg("system", self.sys_prompt, "system")
        return msg

    # -- replying ----------------------------------------------------------------------
    async def __call__(
        self, msg: MsgInput = None, structured_model: type[BaseModel] | None = None
    ) -> Msg:
        """Reply to ``msg`` (None: continue from memory).

        Args:
            msg: A Msg, a list of Msg, a string (a user message) or None.
            structured_model: A pydantic model the final answer must match; the validated
                value (JSON form) is put in ``reply.metadata["structured_output"]``.

        Returns:
            The reply. ``metadata`` holds ``usage``, ``iterations`` and ``time``, and
            ``interrupted``, ``pending_tool_calls`` or ``max_iters_reached`` when relevant.

        Raises:
            AgentBusyError: when a reply is already in progress on this agent.
            MemoryInvariantError: when ``msg`` holds a tool call without its result (or a
                result without its call); nothing is stored then.
        """
        msgs = _as_input(msg)
        run = self._start(structured_model)
        run.inbox = msgs
        return await self._drive(run, self._reply_body, msgs, structured_model)

    async def resume(
        self,
        approvals: dict[str, bool | str] | None = None,
        structured_model: type[BaseModel] | None = None,
    ) -> Msg:
        """Settle calls waiting for approval and continue the reply.

        Args:
            approvals: ``{call_id: True | False | "reason"}``: True runs the call; False or
                a reason denies it (the model is told). Calls not listed stay pending.
            structured_model: For a structured reply that paused; defaults to the model of
                the paused reply.

        Raises:
            AgentBusyError: when a reply is in progress.
            ValueError: for an id that is not pending or a verdict of the wrong type.
            StateError: when no call is waiting for approval at all.
        """
        if self._run is not None:
            raise AgentBusyError(f"agent {self.name!r} is already replying")
        approvals = dict(approvals or {})
        pending_ids = {c["id"] for c in self._pending}
        for call_id, verdict in approvals.items():
            if call_id not in pending_ids:
                raise ValueError(f"tool call {call_id!r} is not waiting for approval")
            if not isinstance(verdict, bool | str):
                raise ValueError(f"approval for {call_id!r} must be True, False or a reason")
        if not pending_ids:  # a silent empty "reply" would hide the caller's mistake
            raise StateError(f"agent {self.name!r} has no tool calls waiting for approval")
        if structured_model is None and self._suspended is None and self._suspended_name:
            raise StateError(
                f"this state paused a structured reply for {self._suspended_name}; pass "
                "structured_model= to resume() (model classes are not stored in a state)"
            )
        run = self._start(structured_model or self._suspended)
        run.iteration = self._iteration
        body = self._resume_body
        return await self._drive(run, body, approvals, structured_model or self._suspended)

    def stream(
        self, msg: MsgInput = None, structured_model: type[BaseModel] | None = None
    ) -> EventStream:
        """Reply to ``msg`` and iterate over the events (see ``agentkit.agent.stream``)."""
        return EventStream(self, lambda: self(msg, structured_model=structured_model))

    async def observe(self, msg: Msg | Sequence[Msg] | None) -> None:
        """Add messages to memory without replying (deferred while busy or pending).

        Raises:
            MemoryInvariantError: when they hold a tool call without its result (or a
                result without its call); nothing is added then.
        """
        msgs = _as_input(msg)
        if self._run is not None or self._pending:
            self._deferred.extend(msgs)
        else:
            await self.memory.add(msgs)

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
        if run is None or run.token is None:
            return False
        if threading.get_ident() == run.thread:  # on the loop's own thread: no hop needed
            return self._interrupt(msg)
        try:
            return anyio.from_thread.run_sync(self._interrupt, msg, token=run.token)
        except RuntimeError:  # the event loop is closed: nothing left to interrupt
            return False

    def _interrupt(self, msg: MsgInput) -> bool:
        run = self._run
        if run is None or run.scope is None:
            return False
        run.interrupt_msgs.extend(_as_input(msg))
        run.interrupted = True
        run.scope.cancel()
        return True

    # -- run driving -------------------------------------------------------------------
    def _start(self, structured_model: type[BaseModel] | None) -> Run:
        if self._run is not None:
            raise AgentBusyError(f"agent {self.name!r} is already replying")
        emit = None
        if self.print_hint or self._listeners:
            emit = self._make_emit()
        run = self._run = Run(emit, structured_model)
        run.token = anyio.lowlevel.current_token()
        run.thread = threading.get_ident()
        return run

    def _make_emit(self) -> Callable[[AgentEvent], None]:
        sinks = list(self._listeners)
        if self.print_hint:
            if self._printer is None or self._printer.name != self.name:
                from agentkit.agent.printer import ConsolePrinter

                self._printer = ConsolePrinter(self.name)
            sinks.append(self._printer)

        def emit(event: AgentEvent) -> None:
            # Events are for display: a failing sink (a console printer on a closed or
            # broken stdout...) must not abort the reply's work. It is logged and dropped.
            for sink in list(sinks):
                try:
                    sink(event)
                except Exception:
                    logger.warning(
                        "event sink %r failed; it gets no more events of this reply",
                        sink,
                        exc_info=True,
                    )
                    sinks.remove(sink)

        return emit

    async def _reply_body(
        self, run: Run, msgs: list[Msg], structured: type[BaseModel] | None
    ) -> Msg:
        return await self._with_reply_hooks(
            run, {"msg": msgs, "structured_model": structured}, loop.reply
        )

    async def _resume_body(
        self, run: Run, approvals: dict[str, bool | str], structured: type[BaseModel] | None
    ) -> Msg:
        kwargs: dict[str, Any] = {
            "msg": [],
            "approvals": approvals,
            "structured_model": structured,
        }
        return await self._with_reply_hooks(run, kwargs, loop.resume)

    async def _with_reply_hooks(
        self, run: Run, kwargs: dict[str, Any], body: Callable[..., Awaitable[Msg]]
    ) -> Msg:
        hooks = self._hooks
        if hooks is not None and hooks.has("pre_reply"):
            kwargs = await hooks.run_pre("pre_reply", self, kwargs)
            run.structured = kwargs.get("structured_model")
        if "approvals" in kwargs:
            reply = await body(self, run, kwargs["approvals"])
        else:
            reply = await body(self, run, _as_messages(kwargs["msg"]))
        if hooks is not None and hooks.has("post_reply"):
            reply = await hooks.run_post("post_reply", self, kwargs, reply)
        return reply

    async def _drive(self, run: Run, body: Callable[..., Awaitable[Msg]], *args: Any) -> Msg:
        with _obs.run_span(self, run):  # observability seam: the invoke_agent span
            return await self._drive_reply(run, body, *args)

    async def _drive_reply(self, run: Run, body: Callable[..., Awaitable[Msg]], *args: Any) -> Msg:
        if run.emit is not None:
            run.emit(ReplyStarted(self.name))
        try:
            try:
                with anyio.CancelScope() as scope:
                    run.scope = scope
                    reply = await body(run, *args)
            except BaseException as exc:
                # An error, or a cancellation from outside (not our interrupt): repair
                # memory, then let it propagate.
                run.scope = None  # from here on, interrupt() is a no-op
                with anyio.CancelScope(shield=True):
                    await loop.finalize(self, run, exc)
                    await self._flush_deferred()
                raise
            run.scope = None
            with anyio.CancelScope(shield=True):
                if scope.cancelled_caught:
                    reply = await loop.finalize(self, run, None)
                elif run.interrupt_msgs:  # interrupted too late to cut anything
                    await self.memory.add(run.interrupt_msgs)
                await self._flush_deferred()
            if run.emit is not None:
                run.emit(ReplyFinished(reply))
            return reply
        finally:
            # A reply paused for approval resumes with its structured model and iterations.
            self._suspended = run.structured if self._pending else None
            self._suspended_name = None
            self._iteration = run.iteration if self._pending else 0
            self._run = None

    async def _flush_deferred(self) -> None:
        if self._deferred and not self._pending:
            msgs, self._deferred = self._deferred, []
            await self.memory.add(msgs)

    # -- state -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot: memory, pending calls, iteration, toolkit state.

        Raises:
            AgentBusyError: while a model call or tool calls are in flight (memory is
                mid-step then); from a ``post_reply`` hook it works.
        """
        run = self._run
        if run is not None and (
            run.calling_model or run.batch is not None or run.partial is not None
        ):
            raise AgentBusyError(f"agent {self.name!r} is mid-step; snapshot after the reply")
        state: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "memory": self.memory.state_dict(),
            "pending_tool_calls": [json.loads(json.dumps(c)) for c in self._pending],
            "deferred_messages": [m.to_dict() for m in self._deferred],
            "iteration": run.iteration if run is not None else self._iteration,
            "structured_model": _qualname(self._suspended) or self._suspended_name,
        }
        toolkit_state = getattr(self._toolkit, "state_dict", None)
        if toolkit_state is not None:
            state["toolkit"] = toolkit_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a snapshot from :meth:`state_dict` (validated before anything changes).

        Raises:
            StateError: on a wrong ``schema_version`` or inconsistent content.
            AgentBusyError: while a reply is in progress.
        """
        if self._run is not None:
            raise AgentBusyError(f"agent {self.name!r} is replying; cannot load state now")
        pending, deferred, iteration = parse_agent_state(state)
        # The toolkit first (it may still refuse its part), then memory; if memory refuses,
        # the toolkit gets its old state back: a failed load changes nothing.
        toolkit, restore = self._toolkit, None
        if "toolkit" in state and toolkit is not None and hasattr(toolkit, "load_state_dict"):
            restore = toolkit.state_dict()
            toolkit.load_state_dict(state["toolkit"])
        try:
            self.memory.load_state_dict(state["memory"])
        except BaseException:
            if restore is not None:
                assert toolkit is not None
                toolkit.load_state_dict(restore)
            raise
        self._pending = pending
        self._deferred = deferred
        self._iteration = iteration
        self._suspended = None
        name = state.get("structured_model")
        self._suspended_name = name if isinstance(name, str) and pending else None

    def __repr__(self) -> str:
        return f"ReActAgent(name={self.name!r}, model={self.model!r})"


def _qualname(cls: type | None) -> str | None:
    return None if cls is None else f"{cls.__module__}.{cls.__qualname__}"

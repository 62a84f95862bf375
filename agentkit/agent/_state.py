"""Per-reply run state, and the agent's JSON state (``state_dict`` / ``load_state_dict``).

``Run`` is the ledger of one reply: what lives across its steps, grouped by responsibility
(interrupt control, the model's latest answer, the structured output, the tool calls, the
outcome). It holds what interrupt finalization needs to repair memory: the model's latest
(cumulative) chunk while it streams, and the tool calls of the current turn with a result
slot per call. Everything else lives in memory, so a reply can be cut at any await.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import anyio

from agentkit._formats import Migration, upgrade
from agentkit.agent._result import RunUsage
from agentkit.exceptions import StateError
from agentkit.memory import MemoryInvariantError, check_memory_invariant
from agentkit.messages import ContentBlock, Msg, Role, TextBlock, ToolUseBlock, validate_block
from agentkit.models._base import ChatResponse, ChatUsage, ToolDefinition

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent._conversation import NestedResume, NestedWait
    from agentkit.agent._guardrails import GuardrailTripped
    from agentkit.agent._steer import Steer
    from agentkit.agent._structured import OutputPlan
    from agentkit.events import AgentEvent
    from agentkit.memory import Memory
    from agentkit.tools._base import Tool
    from agentkit.tools._context import ModelView
    from agentkit.tools._response import ToolResponse

__all__ = [
    "MIGRATIONS",
    "PENDING",
    "SCHEMA_VERSION",
    "CallBook",
    "ModelTurn",
    "Outcome",
    "OutputState",
    "ReplyControl",
    "Run",
    "migrate_state",
    "new_msg",
    "parse_agent_state",
    "store",
]

SCHEMA_VERSION = 2
"""The version of the agent state layout this agentkit writes (``state["schema_version"]``).

agentkit 0.1 and 0.2 write version 1. Version 2 adds ``nested_calls`` (present only while a
pending call waits on calls inside it: an agent used as a tool, paused for approval), so an
agentkit that cannot resume those refuses the state instead of re-running the tool.
Every bump ships a migration in ``MIGRATIONS`` (from the previous version) and keeps
loading the saved-state corpora under ``tests/state_corpus/`` (see ``agentkit._formats``).
"""


def _v1_to_v2(state: dict[str, object]) -> dict[str, object]:
    """Version 1 had no nested waits: only the version changes."""
    return {**state, "schema_version": 2}


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}
"""``{n: fn}``: ``fn`` turns a version-``n`` state into a version-``n + 1`` state."""


def migrate_state(state: object) -> dict[str, object]:
    """Bring a saved agent state to ``SCHEMA_VERSION``, one migration at a time.

    The input is never modified (each migration returns a new dict).

    Raises:
        StateError: for something that is not a state dict, or a version this agentkit
            cannot read (saved by a newer agentkit, or older than any migration).
    """
    return upgrade(
        state,
        what="agent state",
        key="schema_version",
        current=SCHEMA_VERSION,
        migrations=MIGRATIONS,
    )


class _Pending:
    """Marks a result slot whose call waits for human approval."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()

_NONE_APPROVED: frozenset[str] = frozenset()

Emit = Callable[["AgentEvent"], None]


class _LoopToken:
    """The last asyncio loop that started a reply, with its token (one reference: atomic)."""

    __slots__ = ("pair",)

    def __init__(self) -> None:
        self.pair: tuple[asyncio.AbstractEventLoop, anyio.lowlevel.EventLoopToken] | None = None


_LAST_LOOP = _LoopToken()


def _loop_token() -> anyio.lowlevel.EventLoopToken:
    """``anyio.lowlevel.current_token()``, reused while the same asyncio loop runs replies.

    ``current_token`` detects the async library on every call (about 1.4 us, more than the
    rest of the run state together); the token of a loop is the same for all its replies.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): anyio tells
        return anyio.lowlevel.current_token()
    pair = _LAST_LOOP.pair
    if pair is not None and pair[0] is loop:
        return pair[1]
    token = anyio.lowlevel.current_token()
    _LAST_LOOP.pair = (loop, token)
    return token


class ReplyControl:
    """Where the reply runs and how ``interrupt`` cuts it.

    Set by ``ReActAgent`` when the reply starts (``_start`` binds the loop, ``_drive_reply``
    the scope and task); ``interrupt`` sets ``interrupted`` and adds to ``interrupt_msgs``,
    which ``loop.finalize`` stores after the repairs.

    Attributes:
        started: ``time.perf_counter()`` at the reply's start (its wall time counts from here).
        scope: The cancel scope around the reply body (None: ``interrupt`` is a no-op).
        task: The asyncio task that runs the reply (None under another event loop).
        token: The event loop token, for ``interrupt_threadsafe``.
        thread: The event loop's thread id.
        interrupted: ``interrupt`` was called during this reply.
        interrupt_msgs: Messages given to ``interrupt``, added after the repairs (a tuple,
            replaced by each ``interrupt``: no list made for the replies never interrupted).
    """

    __slots__ = ("interrupt_msgs", "interrupted", "scope", "started", "task", "thread", "token")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.scope: anyio.CancelScope | None = None
        self.task: object = None
        self.token: anyio.lowlevel.EventLoopToken | None = None
        self.thread = 0
        self.interrupted = False
        self.interrupt_msgs: tuple[Msg, ...] = ()

    def bind_loop(self) -> None:
        """Record the running event loop's token and thread (``interrupt_threadsafe``)."""
        self.token = _loop_token()
        self.thread = threading.get_ident()


class ModelTurn:
    """The latest model answer: while it streams, and what the loop keeps of it.

    Written by ``_reasoning.reason`` (each model call); ``loop.finalize`` takes the partial
    chunk after a cut, the guardrails drop a raced one, and a handoff sets ``last_text``
    to its target's answer.

    Attributes:
        partial: The latest (cumulative) chunk not yet stored in memory.
        calling_model: A model call is in flight (``state_dict`` refuses until it is stored).
        finish_reason: The provider's finish reason of the latest answer, if known.
        last_text: Text blocks of the latest assistant turn (the reply's content).
    """

    __slots__ = ("calling_model", "finish_reason", "last_text", "partial")

    def __init__(self) -> None:
        self.partial: ChatResponse | None = None
        self.calling_model = False
        self.finish_reason: str | None = None
        self.last_text: Sequence[TextBlock] = ()  # a list once a turn is stored


class OutputState:
    """The structured answer the reply asks for, and how far the model got with it.

    ``plan`` is set when the reply starts (a ``pre_reply`` hook may replace it); the answer
    is accepted by ``_acting`` (a response tool), ``_validators`` (a text mode) or a handoff;
    steering's follow-up turn clears it; ``_loop`` counts prose answers as failures.

    Attributes:
        plan: The structured answer asked for (None: the reply's text).
        data: The accepted answer in JSON form (None: none yet).
        value: The accepted answer as its pydantic instance.
        failures: Invalid or missing structured answers so far.
        streamed: The last ``PartialOutput`` sent (so the accepted one is sent once).
        definitions: ``plan`` and its response tools, built on first use
            (:meth:`response_tools`).
    """

    __slots__ = ("data", "definitions", "failures", "plan", "streamed", "value")

    def __init__(self, plan: OutputPlan | None) -> None:
        self.plan = plan
        self.data: dict[str, object] | None = None
        self.value: BaseModel | None = None
        self.failures = 0
        self.streamed: dict[str, object] | None = None
        self.definitions: tuple[OutputPlan, list[ToolDefinition]] | None = None

    def response_tools(self) -> list[ToolDefinition]:
        """The response tools of ``plan``, built once per reply.

        Built here rather than kept with the plan: a ``pre_reply`` hook may change
        ``plan`` (the pair's plan is checked), and nothing outlives the reply.
        """
        plan = self.plan
        if plan is None:
            return []
        cached = self.definitions
        if cached is None or cached[0] is not plan:
            cached = self.definitions = (plan, plan.response_definitions())
        return cached[1]


class CallBook:
    """What the reply keeps about its tool calls besides ``Run.batch`` and ``Run.approved``.

    ``results`` is reset with each batch (``Run.begin_batch``) and filled by ``_acting`` and
    ``_handoffs``; ``waits`` and ``resumes`` are the nested-approval bookkeeping (``_settle``
    and ``_deny_pending`` set ``resumes``, the calls consume it; ``Conversation.hold`` takes
    ``waits``); ``retries`` and ``offered`` are ``_acting``'s.

    Attributes:
        results: One slot per call in ``Run.batch``: None (not finished), a final
            ``ToolResponse``, or ``PENDING``.
        waits: Calls of the batch that wait on calls inside them, by id (``NestedWait``).
        resumes: Calls re-invoked to route decisions inside them, by id (``NestedResume``).
        retries: ``ToolRetry`` answers per tool name in this reply.
        offered: The tools the capabilities offered for the latest request, by name (None:
            not asked yet); calls to them are resolved here before the toolkit.
    """

    __slots__ = ("offered", "results", "resumes", "retries", "waits")

    def __init__(self) -> None:
        self.results: list[ToolResponse | None] = []
        self.waits: dict[str, NestedWait] = {}
        self.resumes: dict[str, NestedResume] = {}
        self.retries: dict[str, int] = {}
        self.offered: dict[str, Tool] | None = None


class Outcome:
    """What the reply reports about how it went, beyond ``Run.counts`` and ``usage_limit``.

    ``usage`` and ``answered_by`` change with every counted response
    (:meth:`Run.count_response`; a handoff adds its target's tokens); the guardrails set
    ``guardrail``, ``_loop``'s summary and a handoff set ``max_iters_reached``, and a
    handoff sets ``last_agent``.

    Attributes:
        usage: Token usage summed over the reply's model calls, as reply metadata gives it
            (cache, reasoning and audio tokens, time): ``RunUsage`` has none of these.
        answered_by: The model of the latest answer (a ``FallbackModel``'s choice).
        last_agent: The agent that answered after a handoff (None: this one did).
        guardrail: The guardrail that tripped and stopped the reply, if any.
        max_iters_reached: The reply hit ``max_iters`` and asked for a summary.
    """

    __slots__ = ("answered_by", "guardrail", "last_agent", "max_iters_reached", "usage")

    def __init__(self) -> None:
        self.usage = ChatUsage()
        self.answered_by: str | None = None
        self.last_agent: str | None = None
        self.guardrail: GuardrailTripped | None = None
        self.max_iters_reached = False


class Run:
    """Mutable state of one reply (one ``await agent(...)`` or ``agent.resume(...)``).

    Holds only what lives across the reply's steps (a step's own payload is in its step
    value, see ``agentkit.agent._steps``), grouped by who changes it.

    Attributes:
        emit: Event sink, or None when nobody listens (then no event is even built). The
            guardrails swap it while they hold a raced answer's events.
        inbox: The reply's input messages until they are stored (never lost to a cut).
        added: Messages this run stored in memory, in order (``RunResult.new_messages``).
        steering: Steers queued by ``agent.steer`` for the next model request
            (``agentkit.agent._steer``; a tuple, replaced as steers arrive); None once the
            loop is over.
        iteration: Model calls made for this task (kept across approval pauses).
        counts: Requests, tokens, tool calls and cost of this run (``RunUsage``), read live
            by ``UsageLimits`` and ``RunContext.usage``.
        usage_limit: The name of the limit that stopped the run, if any.
        batch: Tool calls of the current turn that are stored but not yet answered.
        approved: Ids of calls a human approved in this run (``tool_call_approved``); add
            with :meth:`approve`.
        control: The reply's task, cancel scope and interrupt (:class:`ReplyControl`).
        turn: The latest model answer (:class:`ModelTurn`).
        output: The structured answer asked for and accepted (:class:`OutputState`).
        calls: Results and nested-approval bookkeeping of the batch (:class:`CallBook`).
        outcome: Token usage, answering model and agent, guardrail, max_iters
            (:class:`Outcome`).
    """

    __slots__ = (
        "added",
        "approved",
        "batch",
        "calls",
        "control",
        "counts",
        "emit",
        "inbox",
        "iteration",
        "outcome",
        "output",
        "steering",
        "turn",
        "usage_limit",
    )

    def __init__(self, emit: Emit | None, structured: OutputPlan | None) -> None:
        self.emit = emit
        self.inbox: Sequence[Msg] = ()  # the input's list, between start and storing
        self.added: list[Msg] = []
        self.steering: tuple[Steer, ...] | None = ()
        self.iteration = 0
        self.counts = RunUsage()
        self.usage_limit: str | None = None
        self.batch: list[ToolUseBlock] | None = None
        self.approved: AbstractSet[str] = _NONE_APPROVED  # a set of its own on the first
        self.control = ReplyControl()
        self.turn = ModelTurn()
        self.output = OutputState(structured)
        self.calls = CallBook()
        self.outcome = Outcome()

    def count_response(self, usage: ChatUsage | None, model: str | None = None) -> None:
        """Add one model response's usage (and the model that gave it) to the totals."""
        outcome = self.outcome
        if usage is not None:
            outcome.usage = outcome.usage + usage
        self.counts.add_response(usage, model)
        if model is not None:
            outcome.answered_by = model

    def approve(self, call_id: str) -> None:
        """Record that a human (or the approval policy) approved the call ``call_id``."""
        # The set is made on the first approval: most runs approve nothing, and an empty
        # set is one more object the collector tracks for as long as the run lasts.
        self.approved = {*self.approved, call_id}

    def begin_batch(self, calls: list[ToolUseBlock]) -> None:
        """Record the calls of a turn that must be answered (call right after storing them)."""
        self.batch = calls
        self.calls.results = [None] * len(calls)

    def metadata(self) -> dict[str, object]:
        """Reply metadata common to every outcome."""
        outcome = self.outcome
        metadata: dict[str, object] = {
            "usage": outcome.usage.to_dict(),
            "iterations": self.iteration,
            "time": time.perf_counter() - self.control.started,
        }
        if outcome.answered_by is not None:
            metadata["model"] = outcome.answered_by
        if outcome.last_agent is not None:
            metadata["last_agent"] = outcome.last_agent
        return metadata


def answered_by(model: ModelView, response: ChatResponse) -> str:
    """The name of the model that gave ``response``: a ``FallbackModel`` marks it."""
    named = (response.metadata or {}).get("model")
    return named if isinstance(named, str) and named else str(model.model_name)


async def store(memory: Memory, msgs: Msg | list[Msg], run: Run | None = None) -> None:
    """Add to memory so that a cancellation cannot cut the write halfway.

    With ``run``, the messages are also recorded as the run's new messages.
    """
    if memory.atomic_add:
        await memory.add(msgs)
    else:
        with anyio.CancelScope(shield=True):
            await memory.add(msgs)
    if run is None:
        return
    if isinstance(msgs, Msg):
        run.added.append(msgs)
    else:
        run.added.extend(msgs)


def new_msg(
    name: str,
    content: str | Sequence[ContentBlock],
    role: Role,
    metadata: dict[str, object] | None = None,
) -> Msg:
    """A Msg (its id from ``agentkit._ids``)."""
    return Msg(name, content if isinstance(content, str) else list(content), role, metadata)


def _check_version(state: object) -> dict[str, object]:
    """The state itself if it is of ``SCHEMA_VERSION`` (no migration runs here)."""
    return upgrade(
        state, what="agent state", key="schema_version", current=SCHEMA_VERSION, migrations={}
    )


def parse_agent_state(state: object) -> tuple[list[ToolUseBlock], list[Msg], int]:
    """Validate an agent state dict; return pending calls, deferred messages, iteration.

    Memory messages (when given as ``{"messages": [...]}``) are checked against the
    tool-call invariant, so a corrupt snapshot is rejected before anything is replaced.

    Raises:
        StateError: naming what is wrong.
    """
    data = _check_version(state)
    pending_raw = data.get("pending_tool_calls", [])
    if not isinstance(pending_raw, list):
        raise StateError("'pending_tool_calls' must be a list")
    pending: list[ToolUseBlock] = []
    for i, block in enumerate(pending_raw):
        try:
            checked = validate_block(block, f"pending_tool_calls[{i}]")
        except ValueError as exc:
            raise StateError(str(exc)) from exc
        if checked["type"] != "tool_use":
            raise StateError(f"pending_tool_calls[{i}] must be a tool_use block")
        pending.append(checked)
    deferred = _parse_messages(data.get("deferred_messages", []), "deferred_messages")
    iteration = data.get("iteration", 0)
    if not isinstance(iteration, int) or iteration < 0:
        raise StateError("'iteration' must be a non-negative int")
    memory = data.get("memory")
    if not isinstance(memory, dict):
        raise StateError("agent state needs a 'memory' dict")
    messages = memory.get("messages")
    if isinstance(messages, list):
        try:
            check_memory_invariant(
                _parse_messages(messages, "memory.messages"), [c["id"] for c in pending]
            )
        except MemoryInvariantError as exc:
            raise StateError(f"agent state memory is inconsistent: {exc}") from exc
    return pending, deferred, iteration


def _parse_messages(raw: object, where: str) -> list[Msg]:
    if not isinstance(raw, list):
        raise StateError(f"{where!r} must be a list")
    out = []
    ids: set[Hashable] = set()
    for i, item in enumerate(raw):
        try:
            msg = Msg.from_dict(item)
        except ValueError as exc:
            raise StateError(f"{where}[{i}] is invalid: {exc}") from exc
        key = msg.id_key
        if key in ids:  # memory would keep one of them: the tool-call pairing breaks
            raise StateError(f"{where}[{i}] repeats the message id {msg.id!r}")
        ids.add(key)
        out.append(msg)
    return out

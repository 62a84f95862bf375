"""``DBOSAgent``: every run of an agent as a DBOS workflow that survives its process.

The wrapped agent is a *template*: its model, toolkit, prompt, hooks and limits. Each run is
one workflow on a fresh copy, restored from the workflow's input (the conversation state as
agentkit JSON, plus the new input), so one ``DBOSAgent`` serves any number of concurrent
conversations. Inside the workflow every model request and every tool call is a DBOS step
(see ``agentkit.durable._steps``); if the process dies, a worker that recovers the workflow
re-runs it from the top, and every completed step returns its recorded result instead of
running again.

Source of truth: within a run, the DBOS step log; between runs, the session store (when the
run names a ``session_id``) or the caller (who passes ``state=`` and gets ``result.state``).
The run loads the session before the workflow starts (the state and its version become the
workflow's input) and saves it as the workflow's last step, based on that version: a save
that finds another writer's newer state raises ``SessionConflictError`` rather than
overwriting it, and a save repeated by recovery after it had committed is recognised and not
repeated.

Approvals: a run whose agent waits for approval publishes the calls as the workflow event
``agentkit.pending`` and waits in ``DBOS.recv`` on the topic ``agentkit.approvals``; any
process delivers ``{call_id: True | False | "reason"}`` with :meth:`DBOSAgent.approve`
(``DBOS.send``), or ``DBOSClient.send(workflow_id, decisions, topic=APPROVALS_TOPIC)``.

Interrupts: the run holds its session (or its workflow id) on the control channel of
``control=`` (:mod:`agentkit.session._control`), so ``interrupt_session(control,
session_id)`` from any process stops it; the workflow then records the repaired memory and
ends with ``interrupted=True``.

Steering: while the workflow runs, ``agent.steer`` on its agent (``steer_session`` through
the control channel, a served steer, a ``run_on`` caller) is recorded: the steer is sent to
the workflow (``DBOS.send`` on the topic ``agentkit.steers``) and the run takes it with
``DBOS.recv`` right before its next model request, or at a final answer for a follow-up
turn (``agentkit.agent._steer``). A steer that is still unread when the run ends is stored
as the workflow's last act before its output (kept for the conversation's next request).
Each ``recv`` is recorded, so a recovered run takes every steer at the same point again:
a steer accepted before a SIGKILL is delivered once, never lost, never twice.
``DBOSAgent.steer(workflow_id, msg)`` records one from any process.

Typed runs: ``run(..., deps=, output_type=, usage_limits=)``. What the workflow records is
JSON: the output type by name (``"module:qualname"``), the limits by their fields, and of
the deps only that there were some. Deps are objects of this process (a database pool, a
client): they reach the run's tools when this process executes the workflow for the call
that gave them; any other execution (recovery after a crash, a queued run taken by another
worker, a fork) gets them from ``deps_factory(workflow_id, session_id)``, and without a
factory a run that had deps fails before its first step rather than run its tools with
``ctx.deps`` None. The output type is found again by its name among the types this process
has run with, or in its already imported modules (nothing is imported because a record
names it); the result is validated again from the recorded JSON.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import sys
import weakref
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from agentkit._ids import new_id, new_uuid
from agentkit.agent._construct import no_running_loop
from agentkit.agent._limits import UsageLimits
from agentkit.agent._result import OutputT, PendingCall, RunResult, RunUsage, StopReason
from agentkit.agent._steer import Steer, SteerOutcome, steer_source
from agentkit.durable._records import RunOutput, RunRequest, UsageRecord
from agentkit.durable._remote import DurableRemote
from agentkit.durable._steps import DurableModel, DurableToolkit, RunSteps
from agentkit.durable._versions import check_code_version, code_version
from agentkit.exceptions import SessionConflictError, StateError, UsageError
from agentkit.messages import Msg
from agentkit.session._control import hold_session

if TYPE_CHECKING:
    from dbos import DBOSClient
    from pydantic import BaseModel

    from agentkit.agent import Decision, ReActAgent
    from agentkit.session._base import Session

ModelT = TypeVar("ModelT", bound="BaseModel")

DepsFactory = Callable[[str, "str | None"], Any]
"""``deps_factory(workflow_id, session_id)``: the deps of a run executed without the ones
its caller gave (sync or async)."""

SaveStep = Callable[[str, RunRequest, RunOutput], Coroutine[Any, Any, RunOutput]]
"""``save(workflow_id, request, output)``: the workflow's last step instead of the session
save; what it returns (JSON) is merged into the workflow's output."""

__all__ = [
    "APPROVALS_TOPIC",
    "PENDING_EVENT",
    "STEER_TOPIC",
    "DBOSAgent",
    "DurableRunResult",
    "approvals_record",
]

APPROVALS_TOPIC = "agentkit.approvals"
STEER_TOPIC = "agentkit.steers"
"""The topic of the steers sent to a run: ``{"id": nonce, "messages": [Msg JSON]}``."""
PENDING_EVENT = "agentkit.pending"
INTERRUPT_KEY = "agentkit.interrupt"
"""The key of an interrupt mailed to a run waiting for approval (never a call id)."""


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


def _type_name(cls: type[BaseModel] | None) -> str | None:
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


def _limits_record(limits: UsageLimits | None) -> dict[str, Any] | None:
    return None if limits is None else dataclasses.asdict(limits)


def _sum_usage(total: UsageRecord, usage: RunUsage) -> UsageRecord:
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


def _as_input(msg: Msg | Sequence[Msg] | str | None) -> list[dict[str, object]]:
    if msg is None:
        return []
    if isinstance(msg, str):
        msg = Msg("user", msg, "user")
    items = [msg] if isinstance(msg, Msg) else list(msg)
    return [m.to_dict() for m in items]


@dataclass(frozen=True, slots=True)
class _Typed:
    """What a workflow execution runs with besides its messages (never recorded as is)."""

    deps: Any
    output_type: type[BaseModel] | None
    limits: UsageLimits | None


@dataclass
class _Outcome:
    """A durable run's replies so far: the last one, summed usage, every new message."""

    run: RunResult[Any]
    usage: UsageRecord
    new_messages: list[Msg]

    def add(self, run: RunResult[Any]) -> None:
        self.run = run
        self.usage = _sum_usage(self.usage, run.usage)
        self.new_messages += run.new_messages


class _DurableHolder:
    """What ``hold_session`` interrupts: the running reply, or the wait for approvals.

    A reply in progress is interrupted locally. With none running but calls pending, the
    workflow waits in ``DBOS.recv``: the interrupt is sent there (``DBOS.send`` to the
    workflow itself), so the decision to stop is a recorded message, replayed on recovery.
    """

    def __init__(self, agent: ReActAgent, workflow_id: str) -> None:
        self.agent = agent
        self.workflow_id = workflow_id

    async def steer(self, msg: Any) -> SteerOutcome:
        """Steer the run (recorded: see the module docs); StateError once it has ended."""
        return await self.agent.steer(msg)

    async def interrupt(self, msg: Any = None) -> bool:
        """Interrupt the reply, or mail the interrupt to the approval wait."""
        if await self.agent.interrupt(msg):
            return True
        if not self.agent.pending_tool_calls:
            return False
        await _send_outside_workflow(self.workflow_id, {INTERRUPT_KEY: msg})
        return True


async def _send_outside_workflow(
    workflow_id: str,
    message: dict[str, Any],
    topic: str = APPROVALS_TOPIC,
    idempotency_key: str | None = None,
) -> None:
    """``DBOS.send`` as an outside process would: not as a step of the current workflow.

    The listener that calls this runs in a task started inside the workflow, whose context
    DBOS would take for workflow code (and give the send a step id, breaking replay): the
    send runs in an empty context instead.
    """
    import anyio.to_thread
    from dbos import DBOS

    def send() -> None:
        DBOS.send(workflow_id, message, topic=topic, idempotency_key=idempotency_key)

    await anyio.to_thread.run_sync(contextvars.Context().run, send)


class _RecordedSteer(Steer):
    """A steer of a durable run: sent to the workflow, then placed by the run itself."""

    __slots__ = ("live", "source")

    def __init__(self, msgs: list[Msg], source: _WorkflowSteers | None, live: bool) -> None:
        super().__init__(msgs)
        self.source = source
        self.live = live

    async def wait(self) -> SteerOutcome:
        """Send it (recorded), then wait until the run has placed it; return where."""
        if self.source is not None:
            await self.source.flush()
        if not self.live:  # the run is paused (or past its loop): its next request has it
            self.resolve("next_request")
        await self.done.wait()
        if self.outcome is None:
            raise StateError(
                "the durable run ended with an error before it took the steer; the steer is "
                "recorded with the failed workflow, not in the conversation"
            )
        return self.outcome


class _WorkflowSteers:
    """The steer source of one workflow execution (``agentkit.agent._steer.SteerSource``).

    ``accept`` queues a steer here (in call order) and its caller's ``wait`` sends the queue
    to the workflow, in order, under a lock. ``pull`` (workflow code, at the loop's points)
    receives what was sent; ``drain`` (at the run's end) closes the source, sends what is
    queued and receives the rest.
    """

    def __init__(self, workflow_id: str) -> None:
        import anyio

        self.workflow_id = workflow_id
        self.outbox: list[tuple[str, _RecordedSteer]] = []
        self.sent: dict[str, _RecordedSteer] = {}
        self.lock = anyio.Lock()
        self.closed = False
        self.pulls = 0

    def accept(self, msgs: list[Msg], live: bool) -> Steer:
        """Queue a steer to send (refused once the run has ended)."""
        if self.closed:
            raise StateError(f"durable run {self.workflow_id!r} has ended: nothing to steer")
        steer = _RecordedSteer(msgs, self, live)
        self.outbox.append((new_id(), steer))
        return steer

    async def flush(self) -> None:
        """Send every queued steer to the workflow, in order."""
        async with self.lock:
            await self._send_queued()

    async def _send_queued(self) -> None:
        while self.outbox:
            nonce, steer = self.outbox[0]
            record = {"id": nonce, "messages": [m.to_dict() for m in steer.msgs]}
            # Keyed by the nonce: a send retried after an error is recorded once.
            await _send_outside_workflow(self.workflow_id, record, STEER_TOPIC, nonce)
            self.outbox.pop(0)
            self.sent[nonce] = steer

    async def pull(self) -> list[Steer]:
        """The steers sent since the last pull (each ``recv`` is a recorded operation)."""
        from dbos import DBOS

        found: list[Steer] = []
        self.pulls += 1
        if self.pulls == 1:
            # The run's first request: a steer sent before it is read at the next one (or
            # at the end), so a run without steers keeps its first steps where they were.
            return found
        while True:
            record = await DBOS.recv_async(STEER_TOPIC, 0)
            if not isinstance(record, dict):
                return found
            # The recorded messages, not this process's objects: a replay places the same.
            msgs = [Msg.from_dict(m) for m in record.get("messages") or []]
            local = self.sent.pop(str(record.get("id")), None)
            if local is not None:
                local.msgs = msgs
                found.append(local)
            elif msgs:
                found.append(Steer(msgs))

    def settle(self) -> None:
        """The run paused for approval: every steer sent so far is answered ``next_request``.

        They are recorded, and the resumed run's next request (or the run's end) takes them;
        their callers need not wait for a decision that may come days later.
        """
        for _, steer in self.outbox:
            steer.resolve("next_request")
        for steer in self.sent.values():
            steer.resolve("next_request")

    async def drain(self, agent: ReActAgent) -> None:
        """The run is over: refuse new steers, keep the unread ones for the next request."""
        async with self.lock:
            self.closed = True
            await self._send_queued()
        for steer in await self.pull():
            await agent.observe(steer.msgs)  # pending calls: deferred, else stored now
            steer.resolve("next_request")

    def abandon(self) -> None:
        """The workflow failed: wake the callers still waiting (their ``wait`` raises)."""
        self.closed = True
        for _, steer in self.outbox:
            steer.source = None
            steer.done.set()
        for steer in self.sent.values():
            steer.done.set()


class DBOSAgent:
    """Durable runs of ``agent`` on DBOS (see the module docs).

    Create it before ``DBOS.launch()``: it registers its workflow under
    ``workflow_name`` (``"agentkit.<name>"``), the name recovery and queues find it by.

    Args:
        agent: The template agent (not run itself; never modified).
        name: A name unique in the application, stable across deploys.
        sessions: Store of the conversations (runs that pass ``session_id``).
        control: Store whose control channel delivers interrupts (default: ``sessions``).
        approval_timeout: Seconds a run waits for approval decisions before it ends with
            the calls still pending.
        deps_factory: ``deps_factory(workflow_id, session_id)`` (sync or async) builds the
            deps of a run executed without the ones its caller passed: a recovery after a
            crash, a queued run taken by another worker, a forked workflow. Without it such
            an execution of a run that had deps fails before its first step.
        save: ``save(workflow_id, request, output)``: the workflow's last step, run as the
            DBOS step ``agentkit.save`` in place of the session save (for callers that
            keep the conversation in a layout of their own, as ``create_app(durable=True)``
            does). Recovery runs it like any step: once it has completed, never again.
    """

    def __init__(
        self,
        agent: ReActAgent,
        *,
        name: str,
        sessions: Session | None = None,
        control: Session | None = None,
        approval_timeout: float = 7 * 24 * 3600,
        deps_factory: DepsFactory | None = None,
        save: SaveStep | None = None,
    ) -> None:
        from dbos import DBOS, WorkflowSerializationFormat

        self.template = agent
        self.name = name
        self.sessions = sessions
        self.control = control if control is not None else sessions
        self.approval_timeout = approval_timeout
        self.deps_factory = deps_factory
        self.workflow_name = f"agentkit.{name}"
        # Deps given to run()/enqueue() in this process, by workflow id, until the workflow
        # takes them: they are never part of its input.
        self._live_deps: dict[str, Any] = {}
        # Agents prepared by run_on() callers in this process, by workflow id, likewise.
        self._live_agents: dict[str, ReActAgent] = {}
        self.save = save

        async def run_workflow(request: RunRequest) -> RunOutput:
            return await self._run_workflow(request)

        run_workflow.__qualname__ = f"DBOSAgent[{name}]"
        self.workflow = DBOS.workflow(
            name=self.workflow_name, serialization_type=WorkflowSerializationFormat.PORTABLE
        )(run_workflow)

    # -- building requests ---------------------------------------------------------------
    async def request(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        output_type: type[BaseModel] | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> RunRequest:
        """The workflow input for a run (JSON): what ``DBOSClient.enqueue`` needs too.

        With ``session_id`` (and ``sessions``), the session's state and version are read now.
        The output type is recorded by name and the limits by their fields.
        """
        version = None
        if session_id is not None and self.sessions is not None and state is None:
            found = await self.sessions.load_versioned(session_id)
            state, version = (None, 0) if found is None else found
        return {
            "input": _as_input(msg),
            "state": state,
            "session_id": session_id,
            "session_version": version,
            "output_type": _type_name(output_type),
            "usage_limits": _limits_record(usage_limits),
            "has_deps": False,
            "code": code_version(self.template),
        }

    @overload
    async def run(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: Any = None,
        output_type: None = None,
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult[str]: ...

    @overload
    async def run(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: Any = None,
        output_type: type[ModelT],
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult[ModelT]: ...

    async def run(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: Any = None,
        output_type: type[BaseModel] | None = None,
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult[Any]:
        """Run durably and wait for the result.

        Args:
            msg: The new input (a string is a user message).
            deps: The run's dependencies (its tools' ``ctx.deps``), in this process only:
                never recorded. Another execution of the run gets ``deps_factory``'s.
            output_type: A pydantic model the answer must match (``result.output``).
            usage_limits: Bounds for the run (replacing the template's); recorded, so a
                recovered run keeps them.
            session_id: Load and save the conversation in ``sessions``.
            state: The conversation state to start from (without a session store).
            workflow_id: The workflow id (idempotency: a second run with the same id
                returns the first one's result). Default: generated.

        Raises:
            SessionConflictError: the session changed while the run was going on.
            UsageError: when called in a DBOS step (a workflow starts runs, a step cannot).
        """
        from dbos import DBOS, SetWorkflowID

        _not_in_step("run")
        request = await self.request(
            msg,
            session_id=session_id,
            state=state,
            output_type=output_type,
            usage_limits=usage_limits,
        )
        wid = workflow_id or new_uuid()
        if deps is not None:
            request["has_deps"] = True
            self._live_deps[wid] = deps
        try:
            with SetWorkflowID(wid):
                handle = await DBOS.start_workflow_async(self.workflow, request)
            output = await handle.get_result()
        finally:
            self._live_deps.pop(wid, None)
        return self.result(output, handle.get_workflow_id(), output_type)

    async def run_on(
        self,
        agent: ReActAgent,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        workflow_id: str,
        approvals: dict[str, Any] | None = None,
        deps: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> DurableRunResult[Any]:
        """Run durably on ``agent``, a copy of the template its caller prepared and watches.

        When this process executes the workflow, the run is ``agent`` itself: its model and
        toolkit are made durable in place, and the caller sees its events (listeners) and
        may interrupt or steer it, as for any run. Any other execution (a recovery) runs on
        a fresh copy of the template restored from the recorded state, which is
        ``agent.state_dict()`` now: what the caller added to ``agent`` besides its state
        (a prompt, tools) is not part of a recovered run.

        Args:
            agent: The run's agent (a copy of the template, not the template).
            msg: The new input.
            workflow_id: The workflow id (unique per run).
            approvals: Decisions on the calls ``agent`` has pending (the first reply
                resolves them): ``True``, ``False``, a denial's reason or a ``Decision``.
            deps: The run's dependencies in this process (never recorded).
            meta: JSON the workflow records and gives to the ``save`` step.
        """
        from dbos import DBOS, SetWorkflowID

        _not_in_step("run_on")
        request = await self.request(msg, state=agent.state_dict())
        request["approvals"] = approvals_record(approvals)
        request["meta"] = meta
        if deps is not None:
            request["has_deps"] = True
            self._live_deps[workflow_id] = deps
        self._live_agents[workflow_id] = agent
        try:
            with SetWorkflowID(workflow_id):
                handle = await DBOS.start_workflow_async(self.workflow, request)
            output = await handle.get_result()
        finally:
            self._live_deps.pop(workflow_id, None)
            self._live_agents.pop(workflow_id, None)
        return self.result(output, workflow_id)

    @overload
    def run_sync(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: Any = None,
        output_type: None = None,
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult[str]: ...

    @overload
    def run_sync(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: Any = None,
        output_type: type[ModelT],
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult[ModelT]: ...

    def run_sync(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: Any = None,
        output_type: type[BaseModel] | None = None,
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult[Any]:
        """:meth:`run` for code without a running event loop, outside DBOS workflows.

        Raises:
            UsageError: inside a DBOS workflow or step (the run would be a second event
                loop's, outside the workflow's step log: use ``await durable.run(...)`` in
                an async workflow), or inside a running event loop.
        """
        from dbos import DBOS

        if DBOS.workflow_id is not None:
            raise UsageError(
                "DBOSAgent.run_sync() cannot be used inside a DBOS workflow or step: its "
                "run would not be part of the workflow; use 'await durable.run(...)' in an "
                "async workflow"
            )
        no_running_loop()
        import anyio

        call = partial(
            self.run,
            msg,
            deps=deps,
            output_type=output_type,
            usage_limits=usage_limits,
            session_id=session_id,
            state=state,
            workflow_id=workflow_id,
        )
        result: DurableRunResult[Any] = anyio.run(call)
        return result

    def stream(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a durable run does not stream.

        Each model answer is one DBOS step whose record is the complete answer, so there
        are no chunks to replay; a stream would have to run the agent outside DBOS, which
        a durable agent never does silently.

        Raises:
            UsageError: always.
        """
        raise UsageError(
            "DBOSAgent.stream() is not available: a durable run records each model answer "
            "whole, so it cannot stream. Use 'await durable.run(...)' (the reply and new "
            "messages are in the result), or stream the template agent, which is not durable"
        )

    async def enqueue(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        queue_name: str,
        *,
        deps: Any = None,
        output_type: type[BaseModel] | None = None,
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> Any:
        """Enqueue a run on a DBOS queue; return the DBOS handle.

        ``DBOSAgent.result(await handle.get_result(), output_type=...)`` is the run's
        result. The queue (registered by the workers with ``DBOS.register_queue_async``)
        bounds how many runs execute at once, per worker and in total. ``deps`` reach the
        run when this process takes it from the queue; a run another worker takes gets
        that worker's ``deps_factory``.
        """
        from dbos import DBOS, SetWorkflowID

        _not_in_step("enqueue")
        request = await self.request(
            msg,
            session_id=session_id,
            state=state,
            output_type=output_type,
            usage_limits=usage_limits,
        )
        wid = workflow_id or new_uuid()
        if deps is not None:
            request["has_deps"] = True
            self._live_deps[wid] = deps  # taken by the workflow when it starts here
        with SetWorkflowID(wid):
            return await DBOS.enqueue_workflow_async(queue_name, self.workflow, request)

    @overload
    @staticmethod
    def result(
        output: RunOutput, workflow_id: str = "", output_type: None = None
    ) -> DurableRunResult[Any]: ...

    @overload
    @staticmethod
    def result(
        output: RunOutput, workflow_id: str = "", *, output_type: type[ModelT]
    ) -> DurableRunResult[ModelT]: ...

    @overload
    @staticmethod
    def result(
        output: RunOutput, workflow_id: str, output_type: type[ModelT]
    ) -> DurableRunResult[ModelT]: ...

    @staticmethod
    def result(
        output: RunOutput, workflow_id: str = "", output_type: type[BaseModel] | None = None
    ) -> DurableRunResult[Any]:
        """Turn a workflow's JSON output into a result (raises its session conflict).

        A structured run's output is validated again from its record, as ``output_type``
        or else as the type the workflow recorded (by name, see ``resolve_output_type``).

        Raises:
            SessionConflictError: the session changed while the run was going on.
            StateError: the recorded output is not a valid ``output_type`` (the model
                class changed since the run).
            UsageError: the recorded output type is not known to this process.
        """
        conflict = output.get("session_conflict")
        if conflict is not None:
            raise SessionConflictError(
                conflict["session_id"], conflict["expected"], conflict["actual"]
            )
        reply = Msg.from_dict(output["reply"])
        pending = [PendingCall(c["id"], c["name"], c["input"]) for c in output.get("pending") or []]
        interrupted = bool(output.get("interrupted"))
        stop: StopReason = output.get("stop_reason") or (
            "interrupted" if interrupted else "pending_approval" if pending else "final"
        )
        value, has_value = _recorded_output(output, workflow_id, output_type, reply)
        return DurableRunResult(
            reply=reply,
            new_messages=[Msg.from_dict(m) for m in output.get("new_messages") or []],
            usage=RunUsage(**output.get("usage") or {}),
            stop_reason=stop,
            pending=pending,
            usage_limit=output.get("usage_limit"),
            last_agent=output.get("last_agent") or reply.name,
            _output=value,
            _has_output=has_value,
            state=output["state"],
            workflow_id=workflow_id,
            session_version=output.get("session_version"),
        )

    @staticmethod
    async def approve(workflow_id: str, decisions: dict[str, bool | str | Decision]) -> None:
        """Deliver approval decisions to a run waiting for them (from any process).

        ``DBOSClient.send(workflow_id, approvals_record(decisions), topic=APPROVALS_TOPIC)``
        does the same from a process without DBOS launched.
        """
        from dbos import DBOS

        await DBOS.send_async(workflow_id, approvals_record(decisions), topic=APPROVALS_TOPIC)

    @staticmethod
    async def steer(
        workflow_id: str, msg: Msg | Sequence[Msg] | str, *, client: DBOSClient | None = None
    ) -> None:
        """Record a steer for the durable run ``workflow_id`` (from any process).

        Returns once DBOS has recorded it. The run takes it right before its next model
        request (or in a follow-up turn at its final answer), or, when it reads it only
        as it ends, keeps it for the conversation's next request; a run that has ended
        never reads it. To learn where it went, steer through the control channel instead
        (``steer_session``), which the run's worker answers.

        Args:
            workflow_id: The run's workflow id.
            msg: A string (a user message), a Msg or a list of Msg.
            client: A ``DBOSClient``, for a process that has not launched DBOS.

        Raises:
            UsageError: for an empty message.
        """
        from dbos import DBOS, WorkflowSerializationFormat

        items = _as_input(msg)
        if not items:
            raise UsageError("steer needs a message")
        nonce = new_id()  # an idempotency key, not a secret
        record = {"id": nonce, "messages": items}
        if client is None:
            await DBOS.send_async(workflow_id, record, STEER_TOPIC, idempotency_key=nonce)
        else:
            await client.send_async(
                workflow_id,
                record,
                STEER_TOPIC,
                idempotency_key=nonce,
                serialization_type=WorkflowSerializationFormat.PORTABLE,
            )

    # -- the workflow --------------------------------------------------------------------
    def fresh_copy(self, steps: RunSteps) -> ReActAgent:
        """A copy of the template with its own memory and durable model/toolkit."""
        # A conversation of its own.
        return _make_durable(self.template.copy(), steps, self.template)

    async def _typed(self, request: RunRequest, workflow_id: str) -> _Typed:
        """The deps, output type and limits of this execution (see the module docs).

        Runs before the first step, so a run that cannot have them fails having done
        nothing.
        """
        name = request.get("output_type")
        output_type = resolve_output_type(name) if name else None
        recorded = request.get("usage_limits")
        limits = UsageLimits(**recorded) if recorded is not None else None
        deps = self._live_deps.pop(workflow_id, None)
        if deps is None and self.deps_factory is not None:
            deps = self.deps_factory(workflow_id, request.get("session_id"))
            if inspect.isawaitable(deps):
                deps = await deps
        elif deps is None and request.get("has_deps"):
            raise UsageError(
                f"durable run {workflow_id!r} was started with deps=, which are never "
                "recorded, and this execution of it (a recovery, a queued run taken by "
                "another process, a fork) has none: give DBOSAgent(..., deps_factory=...) "
                "to build them"
            )
        return _Typed(deps, output_type, limits)

    async def _run_workflow(self, request: RunRequest) -> RunOutput:
        from dbos import DBOS

        workflow_id = str(DBOS.workflow_id)
        steps = RunSteps(workflow_id)
        # Everything that reads the record runs before the first step: a record that does
        # not decode, or one from other code, fails this workflow having done nothing.
        if not isinstance(request, dict):
            raise StateError(
                f"the recorded input of durable run {workflow_id!r} does not decode as an "
                f"agentkit run request: it is a {type(request).__name__}, not an object"
            )
        await check_code_version(workflow_id, request.get("code"), code_version(self.template))
        typed = await self._typed(request, workflow_id)
        live = self._live_agents.pop(workflow_id, None)
        try:
            if live is not None:  # run_on() in this process: the caller's agent, state in it
                agent = _make_durable(live, steps)
            else:
                agent = self.fresh_copy(steps)
                state = request.get("state")
                if state is not None:
                    agent.load_state_dict(state)
            msgs = [Msg.from_dict(m) for m in request.get("input") or []]
        except (StateError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(
                f"the recorded input of durable run {workflow_id!r} does not decode as an "
                f"agentkit run request (a corrupt or foreign DBOS record): {exc}"
            ) from exc
        key = str(request.get("session_id") or workflow_id)
        if self.control is None:
            outcome = await self._steered(agent, msgs, typed, request.get("approvals"))
        else:
            # Held for the whole run, approval waits included: an interrupt that finds no
            # reply running but calls pending is mailed to the workflow's own recv.
            holder = _DurableHolder(agent, workflow_id)
            async with hold_session(self.control, key, holder):
                outcome = await self._steered(agent, msgs, typed, request.get("approvals"))
        steps.raise_corrupt()  # a tool step whose record did not decode: fail, never finish
        return await self._finish(request, agent, outcome)

    async def _steered(
        self,
        agent: ReActAgent,
        msgs: list[Msg],
        typed: _Typed,
        first: dict[str, Any] | None,
    ) -> _Outcome:
        """``_drive`` with the run's steers recorded (see the module docs)."""
        from dbos import DBOS

        steers = _WorkflowSteers(str(DBOS.workflow_id))
        with steer_source(agent.memory, steers):
            try:
                outcome = await self._drive(agent, msgs, typed, first, steers.settle)
                await steers.drain(agent)
            except BaseException:
                steers.abandon()
                raise
        return outcome

    async def _drive(
        self,
        agent: ReActAgent,
        msgs: list[Msg],
        typed: _Typed,
        first: dict[str, Any] | None = None,
        on_pause: Callable[[], None] | None = None,
    ) -> _Outcome:
        """The first reply, then one more per approval decision, until nothing is pending.

        ``first``: recorded decisions the first reply resolves (instead of new input);
        ``on_pause``: called each time the run starts waiting for decisions.
        """
        from dbos import DBOS

        output_type: Any = typed.output_type  # one call for both run() overloads
        if first:
            run = await agent.run(
                approvals=_approvals_from_record(first),
                deps=typed.deps,
                output_type=output_type,
                usage_limits=typed.limits,
            )
        else:
            run = await agent.run(
                msgs, deps=typed.deps, output_type=output_type, usage_limits=typed.limits
            )
        outcome = _Outcome(run, _sum_usage({}, run.usage), list(run.new_messages))
        while agent.pending_tool_calls and not outcome.run.interrupted:
            if on_pause is not None:
                on_pause()
            await DBOS.set_event_async(PENDING_EVENT, agent.pending_tool_calls)
            decisions = await DBOS.recv_async(APPROVALS_TOPIC, self.approval_timeout)
            if not isinstance(decisions, dict):
                break  # timed out: the run ends with the calls pending (state keeps them)
            if INTERRUPT_KEY in decisions:  # recorded by recv: replays the same way
                text = decisions[INTERRUPT_KEY]
                run = await agent.interrupt_pending(text if isinstance(text, str) else None)
            else:
                pending_ids = {c["id"] for c in agent.pending_tool_calls}
                approvals = {k: v for k, v in decisions.items() if k in pending_ids}
                run = await agent.run(
                    approvals=_approvals_from_record(approvals),
                    deps=typed.deps,
                    output_type=output_type,
                )
            outcome.add(run)
        return outcome

    async def _finish(self, request: RunRequest, agent: ReActAgent, outcome: _Outcome) -> RunOutput:
        """The workflow's output; saves the session as the workflow's last step."""
        from dbos import DBOS

        run = outcome.run
        state = agent.state_dict()
        structured = (run.reply.metadata or {}).get("structured_output")
        output: RunOutput = {
            "reply": run.reply.to_dict(),
            "state": state,
            "interrupted": run.interrupted,
            "pending": agent.pending_tool_calls,
            "session_version": None,
            "usage": outcome.usage,
            "stop_reason": run.stop_reason,
            "usage_limit": run.usage_limit,
            "last_agent": run.last_agent,
            "output_type": request.get("output_type"),
            "output": structured if isinstance(structured, dict) else None,
            "new_messages": [m.to_dict() for m in outcome.new_messages],
        }
        if self.save is not None:
            saved = await DBOS.run_step_async(
                {"name": "agentkit.save"}, self.save, str(DBOS.workflow_id), request, output
            )
            output.update(saved)
        elif request.get("session_id") is not None and self.sessions is not None:
            saved = await DBOS.run_step_async(
                {"name": "agentkit.save_session"}, self._save_session, request, state
            )
            output.update(saved)
        return output

    async def _save_session(self, request: RunRequest, state: dict[str, object]) -> RunOutput:
        assert self.sessions is not None
        sid, expected = request["session_id"], request.get("session_version")
        assert sid is not None  # the workflow saves only a run that has a session
        try:
            version = await self.sessions.save_state(sid, state, expected_version=expected)
        except SessionConflictError as exc:
            # Saved already by this step before a crash (recovery runs it again)?
            found = await self.sessions.load_versioned(sid)
            if expected is not None and found == (state, expected + 1):
                return {"session_version": expected + 1}
            return {
                "session_conflict": {
                    "session_id": sid,
                    "expected": exc.expected,
                    "actual": exc.actual,
                }
            }
        return {"session_version": version}


def _make_durable(
    agent: ReActAgent,
    steps: RunSteps,
    origin: ReActAgent | None = None,
    made: dict[int, ReActAgent] | None = None,
) -> ReActAgent:
    """``agent`` with its model and toolkit as DBOS steps (in place), handoffs included.

    A handoff target runs its own loop (its model calls and tools), so it gets a durable
    copy too: otherwise a recovery would send the target's requests and run its tools
    again instead of replaying them. A remote target (``A2AAgent``) gets a
    ``DurableRemote``: each exchange with it is a step. ``origin`` is the agent ``agent``
    was copied from (a target handing back to it gets ``agent``); ``made`` maps the
    targets already copied, so handoff cycles (a -> b -> a) end.
    """
    from agentkit.agent import ReActAgent  # the agent package is loaded by now

    made = {} if made is None else made
    made[id(origin if origin is not None else agent)] = agent
    agent.model = DurableModel(agent.model, steps)
    agent.toolkit = DurableToolkit(agent.toolkit, steps)
    agent.print_hint = False
    if agent.handoffs:
        targets = []
        for target in agent.handoffs:
            local = target.agent
            if not isinstance(local, ReActAgent):  # a remote agent: its exchange is a step
                targets.append(dataclasses.replace(target, agent=DurableRemote(local, steps)))
                continue
            durable = made.get(id(local))
            if durable is None:
                durable = _make_durable(local.copy(), steps, local, made)
            targets.append(dataclasses.replace(target, agent=durable))
        agent.handoffs = targets
    return agent


@overload
def approvals_record(approvals: None) -> None: ...
@overload
def approvals_record(approvals: dict[str, Any]) -> dict[str, Any]: ...
def approvals_record(approvals: dict[str, Any] | None) -> dict[str, Any] | None:
    """Approval decisions as the JSON a durable run reads (a ``Decision`` as its fields).

    For ``DBOSClient.send(workflow_id, approvals_record(decisions), topic=APPROVALS_TOPIC)``
    from a process that has not launched DBOS.
    """
    if approvals is None:
        return None
    return {
        k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
        for k, v in approvals.items()
    }


def _approvals_from_record(record: dict[str, Any]) -> dict[str, Any]:
    from agentkit.agent import Decision

    return {k: Decision(**v) if isinstance(v, dict) else v for k, v in record.items()}


def _not_in_step(what: str) -> None:
    """Refuse starting a durable run from inside a DBOS step (outside the step log)."""
    from dbos import DBOS

    if DBOS.step_id is not None and DBOS.workflow_id is not None:
        raise UsageError(
            f"DBOSAgent.{what}() cannot be called inside a DBOS step: start durable runs "
            "from workflow code or outside DBOS"
        )


def _recorded_output(
    output: RunOutput, workflow_id: str, output_type: type[BaseModel] | None, reply: Msg
) -> tuple[Any, bool]:
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

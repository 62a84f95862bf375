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

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from agentkit._ids import new_id, new_uuid
from agentkit.agent._construct import no_running_loop
from agentkit.agent._limits import UsageLimits
from agentkit.agent._result import PendingCall, RunUsage, StopReason
from agentkit.agent._runs import DepsT
from agentkit.durable._records import RunOutput, RunRequest
from agentkit.durable._results import (
    DurableRunResult,
    approvals_record,
    as_input,
    limits_record,
    recorded_output,
    type_name,
)
from agentkit.durable._steering import APPROVALS_TOPIC, STEER_TOPIC
from agentkit.durable._versions import code_version
from agentkit.durable._workflow import DepsFactory, DurableWorkflow, SaveStep
from agentkit.exceptions import SessionConflictError, UsageError
from agentkit.messages import Msg

if TYPE_CHECKING:
    from dbos import DBOSClient, WorkflowHandleAsync
    from pydantic import BaseModel

    from agentkit.agent import Decision, ReActAgent
    from agentkit.agent._conversation import Verdict
    from agentkit.session._base import Session

ModelT = TypeVar("ModelT", bound="BaseModel")

__all__ = ["DBOSAgent"]


class DBOSAgent(DurableWorkflow[DepsT]):
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
        agent: ReActAgent[DepsT],
        *,
        name: str,
        sessions: Session | None = None,
        control: Session | None = None,
        approval_timeout: float = 7 * 24 * 3600,
        deps_factory: DepsFactory[DepsT] | None = None,
        save: SaveStep | None = None,
    ) -> None:
        from dbos import DBOS, WorkflowSerializationFormat

        super().__init__(
            agent,
            sessions=sessions,
            control=control,
            approval_timeout=approval_timeout,
            deps_factory=deps_factory,
            save=save,
        )
        self.name = name
        self.workflow_name = f"agentkit.{name}"

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
            "input": as_input(msg),
            "state": state,
            "session_id": session_id,
            "session_version": version,
            "output_type": type_name(output_type),
            "usage_limits": limits_record(usage_limits),
            "has_deps": False,
            "code": code_version(self.template),
        }

    @overload
    async def run(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        deps: DepsT | None = None,
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
        deps: DepsT | None = None,
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
        deps: DepsT | None = None,
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
        agent: ReActAgent[DepsT],
        msg: Msg | Sequence[Msg] | str | None,
        *,
        workflow_id: str,
        approvals: Mapping[str, Verdict] | None = None,
        deps: DepsT | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> DurableRunResult[str | BaseModel]:
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
        request["meta"] = None if meta is None else dict(meta)
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
        deps: DepsT | None = None,
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
        deps: DepsT | None = None,
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
        deps: DepsT | None = None,
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

    def stream(self, *args: object, **kwargs: object) -> NoReturn:
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
        deps: DepsT | None = None,
        output_type: type[BaseModel] | None = None,
        usage_limits: UsageLimits | None = None,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> WorkflowHandleAsync[RunOutput]:
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
        value, has_value = recorded_output(output, workflow_id, output_type, reply)
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

        items = as_input(msg)
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


def _not_in_step(what: str) -> None:
    """Refuse starting a durable run from inside a DBOS step (outside the step log)."""
    from dbos import DBOS

    if DBOS.step_id is not None and DBOS.workflow_id is not None:
        raise UsageError(
            f"DBOSAgent.{what}() cannot be called inside a DBOS step: start durable runs "
            "from workflow code or outside DBOS"
        )

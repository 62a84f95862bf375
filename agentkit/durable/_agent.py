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
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit.agent._result import PendingCall, RunResult, RunUsage, StopReason
from agentkit.durable._records import RunOutput, RunRequest, UsageRecord
from agentkit.durable._steps import DurableModel, DurableToolkit, RunSteps
from agentkit.exceptions import SessionConflictError
from agentkit.messages import Msg
from agentkit.session._control import hold_session

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.session._base import Session

__all__ = ["APPROVALS_TOPIC", "PENDING_EVENT", "DBOSAgent", "DurableRunResult"]

APPROVALS_TOPIC = "agentkit.approvals"
PENDING_EVENT = "agentkit.pending"
INTERRUPT_KEY = "agentkit.interrupt"
"""The key of an interrupt mailed to a run waiting for approval (never a call id)."""


@dataclass(frozen=True, slots=True)
class DurableRunResult(RunResult[str]):
    """A durable run's ``RunResult``, with what the workflow recorded besides.

    Attributes:
        state: The conversation state after the run (agentkit JSON).
        workflow_id: The DBOS workflow id.
        session_version: The session's version after the save (None without a session).
    """

    state: dict[str, object] = field(default_factory=dict)
    workflow_id: str = ""
    session_version: int | None = None


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


@dataclass
class _Outcome:
    """A durable run's replies so far: the last one, summed usage, every new message."""

    run: RunResult[str]
    usage: UsageRecord
    new_messages: list[Msg]

    def add(self, run: RunResult[str]) -> None:
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

    async def interrupt(self, msg: Any = None) -> bool:
        """Interrupt the reply, or mail the interrupt to the approval wait."""
        if await self.agent.interrupt(msg):
            return True
        if not self.agent.pending_tool_calls:
            return False
        await _send_outside_workflow(self.workflow_id, {INTERRUPT_KEY: msg})
        return True


async def _send_outside_workflow(workflow_id: str, message: dict[str, Any]) -> None:
    """``DBOS.send`` as an outside process would: not as a step of the current workflow.

    The listener that calls this runs in a task started inside the workflow, whose context
    DBOS would take for workflow code (and give the send a step id, breaking replay): the
    send runs in an empty context instead.
    """
    import anyio.to_thread
    from dbos import DBOS

    def send() -> None:
        DBOS.send(workflow_id, message, topic=APPROVALS_TOPIC)

    await anyio.to_thread.run_sync(contextvars.Context().run, send)


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
    """

    def __init__(
        self,
        agent: ReActAgent,
        *,
        name: str,
        sessions: Session | None = None,
        control: Session | None = None,
        approval_timeout: float = 7 * 24 * 3600,
    ) -> None:
        from dbos import DBOS, WorkflowSerializationFormat

        self.template = agent
        self.name = name
        self.sessions = sessions
        self.control = control if control is not None else sessions
        self.approval_timeout = approval_timeout
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
    ) -> RunRequest:
        """The workflow input for a run (JSON): what ``DBOSClient.enqueue`` needs too.

        With ``session_id`` (and ``sessions``), the session's state and version are read now.
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
        }

    async def run(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        *,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> DurableRunResult:
        """Run durably and wait for the result.

        Args:
            msg: The new input (a string is a user message).
            session_id: Load and save the conversation in ``sessions``.
            state: The conversation state to start from (without a session store).
            workflow_id: The workflow id (idempotency: a second run with the same id
                returns the first one's result). Default: generated.

        Raises:
            SessionConflictError: the session changed while the run was going on.
        """
        from dbos import DBOS, SetWorkflowID

        request = await self.request(msg, session_id=session_id, state=state)
        scope = SetWorkflowID(workflow_id) if workflow_id else contextlib.nullcontext()
        with scope:
            handle = await DBOS.start_workflow_async(self.workflow, request)
        return self.result(await handle.get_result(), handle.get_workflow_id())

    async def enqueue(
        self,
        msg: Msg | Sequence[Msg] | str | None,
        queue_name: str,
        *,
        session_id: str | None = None,
        state: dict[str, object] | None = None,
        workflow_id: str | None = None,
    ) -> Any:
        """Enqueue a run on a DBOS queue; return the DBOS handle.

        ``DBOSAgent.result(await handle.get_result())`` is the run's result. The queue
        (registered by the workers with ``DBOS.register_queue_async``) bounds how many
        runs execute at once, per worker and in total.
        """
        from dbos import DBOS, SetWorkflowID

        request = await self.request(msg, session_id=session_id, state=state)
        scope = SetWorkflowID(workflow_id) if workflow_id else contextlib.nullcontext()
        with scope:
            return await DBOS.enqueue_workflow_async(queue_name, self.workflow, request)

    @staticmethod
    def result(output: RunOutput, workflow_id: str = "") -> DurableRunResult:
        """Turn a workflow's JSON output into a result (raises its session conflict)."""
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
        return DurableRunResult(
            reply=reply,
            new_messages=[Msg.from_dict(m) for m in output.get("new_messages") or []],
            usage=RunUsage(**output.get("usage") or {}),
            stop_reason=stop,
            pending=pending,
            _output=reply.get_text(),
            _has_output=True,
            state=output["state"],
            workflow_id=workflow_id,
            session_version=output.get("session_version"),
        )

    @staticmethod
    async def approve(workflow_id: str, decisions: dict[str, bool | str]) -> None:
        """Deliver approval decisions to a run waiting for them (from any process)."""
        from dbos import DBOS

        await DBOS.send_async(workflow_id, decisions, topic=APPROVALS_TOPIC)

    # -- the workflow --------------------------------------------------------------------
    def fresh_copy(self, steps: RunSteps) -> ReActAgent:
        """A copy of the template with its own memory and durable model/toolkit."""
        agent = self.template.copy()  # a conversation of its own, nothing shared
        agent.model = DurableModel(self.template.model, steps)
        agent.toolkit = DurableToolkit(self.template.toolkit, steps)
        agent.print_hint = False
        return agent

    async def _run_workflow(self, request: RunRequest) -> RunOutput:
        from dbos import DBOS

        steps = RunSteps()
        agent = self.fresh_copy(steps)
        state = request.get("state")
        if state is not None:
            agent.load_state_dict(state)
        key = str(request.get("session_id") or DBOS.workflow_id)
        msgs = [Msg.from_dict(m) for m in request.get("input") or []]
        if self.control is None:
            return await self._finish(request, agent, await self._drive(agent, msgs))
        # Held for the whole run, approval waits included: an interrupt that finds no
        # reply running but calls pending is mailed to the workflow's own recv.
        holder = _DurableHolder(agent, str(DBOS.workflow_id))
        async with hold_session(self.control, key, holder):
            outcome = await self._drive(agent, msgs)
        return await self._finish(request, agent, outcome)

    async def _drive(self, agent: ReActAgent, msgs: list[Msg]) -> _Outcome:
        """The first reply, then one more per approval decision, until nothing is pending."""
        from dbos import DBOS

        run = await agent.run(msgs)
        outcome = _Outcome(run, _sum_usage({}, run.usage), list(run.new_messages))
        while agent.pending_tool_calls and not outcome.run.interrupted:
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
                run = await agent.run(approvals=approvals)
            outcome.add(run)
        return outcome

    async def _finish(self, request: RunRequest, agent: ReActAgent, outcome: _Outcome) -> RunOutput:
        """The workflow's output; saves the session as the workflow's last step."""
        from dbos import DBOS

        run = outcome.run
        state = agent.state_dict()
        output: RunOutput = {
            "reply": run.reply.to_dict(),
            "state": state,
            "interrupted": run.interrupted,
            "pending": agent.pending_tool_calls,
            "session_version": None,
            "usage": outcome.usage,
            "stop_reason": run.stop_reason,
            "new_messages": [m.to_dict() for m in outcome.new_messages],
        }
        if request.get("session_id") is not None and self.sessions is not None:
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

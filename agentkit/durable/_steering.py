"""Steering, interrupts and approval waits of a running durable workflow.

A steer of a durable run is recorded: ``WorkflowSteers`` sends it to the workflow
(``DBOS.send`` on ``STEER_TOPIC``) and the run takes it with ``DBOS.recv`` at the loop's
points, so a recovered run takes every steer at the same point again. ``DurableHolder`` is
what the control channel interrupts: the running reply, or the wait for approvals (the
interrupt is then mailed to the workflow's own ``recv``, so it is recorded as well).
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import TYPE_CHECKING, Generic

from agentkit._ids import new_id
from agentkit.agent._runs import DepsT
from agentkit.agent._steer import Steer, SteerOutcome
from agentkit.exceptions import StateError
from agentkit.messages import Msg

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.messages import MsgInput

__all__ = [
    "APPROVALS_TOPIC",
    "INTERRUPT_KEY",
    "PENDING_EVENT",
    "STEER_TOPIC",
    "DurableHolder",
    "WorkflowSteers",
]

APPROVALS_TOPIC = "agentkit.approvals"
"""The topic of approval decisions: ``{call_id: decision JSON}`` (or an interrupt)."""
STEER_TOPIC = "agentkit.steers"
"""The topic of the steers sent to a run: ``{"id": nonce, "messages": [Msg JSON]}``."""
PENDING_EVENT = "agentkit.pending"
"""The workflow event that lists the calls a paused run waits on."""
INTERRUPT_KEY = "agentkit.interrupt"
"""The key of an interrupt mailed to a run waiting for approval (never a call id)."""


class DurableHolder(Generic[DepsT]):
    """What ``hold_session`` interrupts: the running reply, or the wait for approvals.

    A reply in progress is interrupted locally. With none running but calls pending, the
    workflow waits in ``DBOS.recv``: the interrupt is sent there (``DBOS.send`` to the
    workflow itself), so the decision to stop is a recorded message, replayed on recovery.
    """

    def __init__(self, agent: ReActAgent[DepsT], workflow_id: str) -> None:
        self.agent = agent
        self.workflow_id = workflow_id

    async def steer(self, msg: MsgInput) -> SteerOutcome:
        """Steer the run (recorded: see the module docs); StateError once it has ended."""
        return await self.agent.steer(msg)

    async def interrupt(self, msg: MsgInput = None) -> bool:
        """Interrupt the reply, or mail the interrupt to the approval wait."""
        if await self.agent.interrupt(msg):
            return True
        if not self.agent.pending_tool_calls:
            return False
        await send_outside_workflow(self.workflow_id, {INTERRUPT_KEY: msg})
        return True


async def send_outside_workflow(
    workflow_id: str,
    message: Mapping[str, object],
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

    def __init__(self, msgs: list[Msg], source: WorkflowSteers | None, live: bool) -> None:
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


class WorkflowSteers:
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
            await send_outside_workflow(self.workflow_id, record, STEER_TOPIC, nonce)
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

    async def drain(self, agent: ReActAgent[DepsT]) -> None:
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

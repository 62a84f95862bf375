"""Running one reply of a thread and streaming it as AG-UI events into a ``RunChannel``.

A run is a task of the server's task group, not of the HTTP request: a client that
disconnects does not stop it (Stop is explicit: ``POST /threads/{id}/interrupt``). The thread
is committed when the run ends, whatever the outcome, before the run's last event, with the
cleanup shielded from cancellation, so a restart (or another worker) finds the history and
the pending approvals.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)

from agentkit.agent import ReActAgent
from agentkit.agent._conversation import Verdict
from agentkit.events import AgentEvent, CallInfo, Interrupted, ReplyStarted
from agentkit.exceptions import SessionError
from agentkit.messages import Msg
from agentkit.pipelines import AgentTool
from agentkit.serve._convert import agui_fields
from agentkit.serve._encode import encode, encode_as, encode_snapshot
from agentkit.serve._events import Translator
from agentkit.serve._frontend import FrontendTool, set_current_state
from agentkit.serve._ownership import Claim, CommitFailed
from agentkit.serve._threads import RunChannel, ThreadRecord

__all__ = ["APPROVAL_SCHEMA", "RunRequest", "current_deps", "execute_run", "interrupt_for"]

logger = logging.getLogger("agentkit.serve")

APPROVAL_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "true runs the call"},
        "reason": {"type": "string", "description": "why it is denied (told to the model)"},
    },
    "required": ["approved"],
}
"""The ``response_schema`` of an approval interrupt (the resume ``payload``)."""

_DEPS: contextvars.ContextVar[object] = contextvars.ContextVar("agentkit_serve_deps", default=None)


def current_deps() -> Any:
    """The ``deps`` that ``create_app(deps=...)`` built for the request running this code.

    Tools called by a served agent may read it (the authenticated user, a database handle).
    None outside a served run, or when the app has no ``deps`` builder.
    """
    return _DEPS.get()


def _start_call(
    agent: ReActAgent[Any, Any],
    msgs: list[Msg],
    approvals: dict[str, Verdict] | None,
    deps: object,
    state: object = None,
) -> Callable[[], Awaitable[Msg]]:
    """The seam between the server and the agent's run API: the only place a run starts.

    The run gets ``deps`` as its typed dependencies (``ToolContext[D].deps`` in tools); they
    also travel in a context variable, for code that reads :func:`current_deps`; the
    thread's AG-UI state travels in one too (``current_state``).
    """
    _DEPS.set(deps)
    set_current_state(state)

    async def start() -> Msg:
        if approvals is not None:
            return (await agent.run(deps=deps, approvals=approvals)).reply
        return (await agent.run(msgs, deps=deps)).reply

    return start


def failed_run_message(run_id: str) -> str:
    """What the person sees when a run fails: no exception text (the log has the detail)."""
    return f"Sorry, something went wrong while answering. (reference: run {run_id})"


def interrupt_for(call: CallInfo) -> Interrupt:
    """The AG-UI ``Interrupt`` asking for approval of one pending tool call.

    The arguments are shown whole: nothing a person approves is hidden behind a cut.
    """
    args = json.dumps(call.get("input", {}), ensure_ascii=False)
    return Interrupt(
        id=call["id"],
        reason="tool_approval",
        message=f"Approve the call {call['name']}({args})?",
        tool_call_id=call["id"],
        response_schema=APPROVAL_SCHEMA,
        # The call itself, for a client that shows it (a call inside an agent used as a
        # tool is known to the client only from here).
        metadata={"name": call["name"], "input": call.get("input", {})},
    )


DurableStart = Callable[["RunRequest", Callable[[], Awaitable[None]]], Awaitable[Msg]]
"""``start(req, commit)``: runs the turn as a durable workflow that calls ``commit`` as
its last step (see ``agentkit.serve._durable``)."""


class RunRequest:
    """Everything one run needs (built by the HTTP layer after validating the input).

    ``durable``: how a durable app starts the turn (None: the agent runs as is). A durable
    turn commits inside its workflow; ``committed`` then holds the commit's outcome.
    """

    def __init__(
        self,
        channel: RunChannel,
        record: ThreadRecord,
        agent: ReActAgent,
        msgs: Sequence[Msg],
        approvals: dict[str, Verdict] | None,
        deps: object,
        durable: DurableStart | None = None,
    ) -> None:
        self.channel = channel
        self.record = record
        self.agent = agent
        self.msgs = list(msgs)
        self.approvals = approvals
        self.deps = deps
        self.durable = durable
        self.committed: tuple[RunErrorEvent | None] | None = None  # (error or None,) once done


def _emit(channel: RunChannel, events: Sequence[BaseEvent]) -> None:
    for event in events:
        channel.push(encode(event))


def _push(channel: RunChannel, encoded: Sequence[str]) -> None:
    """Push events the translator encoded already."""
    for text in encoded:
        channel.push(text)


def _is_agent_tool(agent: ReActAgent) -> Callable[[str], bool]:
    def check(name: str) -> bool:
        return isinstance(agent.toolkit.get_tool(name), AgentTool)

    return check


async def _snapshot(agent: ReActAgent, extra: Sequence[Msg] = ()) -> str:
    """The encoded ``MESSAGES_SNAPSHOT`` of the agent's memory (and ``extra``)."""
    messages = [*(await agent.memory.get_memory()), *extra]
    return encode_snapshot(agui_fields(messages))


class _Relay:
    """Translates the agent's events as they happen and pushes them to the channel.

    A listener called in the run's own task: no queue and no second task between the agent
    and the SSE stream, so an event (the last one of a stopped run included) reaches the
    readers in the loop iteration that produced it. A translation failure stops the run and
    is raised after it, as a run error.
    """

    __slots__ = ("agent", "channel", "error", "interrupted", "translator")

    def __init__(self, req: RunRequest, translator: Translator) -> None:
        self.channel = req.channel
        self.agent = req.agent
        self.translator = translator
        self.interrupted = False
        self.error: Exception | None = None

    def __call__(self, event: AgentEvent) -> None:
        if self.error is not None:
            return
        try:
            self.interrupted |= isinstance(event, Interrupted)
            if isinstance(event, ReplyStarted) and self.channel.stop_requested:
                self.agent.interrupt_threadsafe()  # Stop arrived before the reply began
            _push(self.channel, self.translator.translate(event))
        except Exception as exc:  # raised by _stream once the run has stopped
            self.error = exc
            self.agent.interrupt_threadsafe()


async def _stream(
    req: RunRequest, translator: Translator, commit: Callable[[], Awaitable[None]]
) -> bool:
    """Run the agent, pushing translated events; return whether it was interrupted.

    A durable turn runs as its workflow (which calls ``commit`` as its last step); the
    relay listens to the workflow's agent all the same, so the stream stays live.
    """
    agent = req.agent
    relay = _Relay(req, translator)
    start = _start_call(agent, req.msgs, req.approvals, req.deps, req.record.state)
    if req.durable is not None:
        start = partial(req.durable, req, commit)
    agent.add_event_listener(relay)
    try:
        await start()
    finally:
        agent.remove_event_listener(relay)
    if relay.error is not None:
        raise relay.error
    return relay.interrupted


def _finished(req: RunRequest, translator: Translator, interrupted: bool) -> RunFinishedEvent:
    channel, agent = req.channel, req.agent
    # A frontend tool's call waits for the client to run it, not for an approval.
    pending = [
        c
        for c in agent.pending_tool_calls
        if not isinstance(agent.toolkit.get_tool(c["name"]), FrontendTool)
    ]
    outcome: RunFinishedCancelledOutcome | RunFinishedInterruptOutcome | RunFinishedSuccessOutcome
    if interrupted:
        outcome = RunFinishedCancelledOutcome()
    elif pending:
        outcome = RunFinishedInterruptOutcome(interrupts=[interrupt_for(c) for c in pending])
    else:
        outcome = RunFinishedSuccessOutcome()
    return RunFinishedEvent(thread_id=channel.thread_id, run_id=channel.run_id, outcome=outcome)


async def execute_run(req: RunRequest, claim: Claim, on_end: Callable[[], None]) -> None:
    """Run one reply of a thread to its end; commit it, then finish the stream.

    The run holds its thread's lease (renewed) and its session on the control channel (a
    Stop from any worker) while the agent runs. When the agent has stopped (its memory is
    repaired), the turn is committed to the store and only then do the last events go out:
    a client that sees ``RUN_FINISHED`` (or the next request, on any worker) finds the turn
    stored. A commit that fails ends the run with ``RUN_ERROR`` instead.
    """
    channel, agent = req.channel, req.agent
    known = {c["id"] for c in agent.pending_tool_calls}
    translator = Translator(channel.run_id, _is_agent_tool(agent), known_calls=known)
    final: BaseEvent | None = None

    async def commit() -> None:  # a durable turn's last step
        req.committed = (await _commit(req, claim, translator),)

    try:
        async with claim.holding(agent):
            final = await _turn(req, translator, commit)
    except Exception as exc:  # the hold itself failed (the control channel's connection)
        store = _store_failure(exc)
        logger.error(
            "run %s of thread %s failed: %s: %s",
            channel.run_id,
            channel.thread_id,
            type(exc).__name__,
            store or exc,
            exc_info=exc,
        )
        _push(channel, translator.finish())
        if store is not None:
            message = "the thread store became unavailable during this reply; send it again"
            final = RunErrorEvent(message=message, code="store_unavailable")
        else:
            final = RunErrorEvent(message=failed_run_message(channel.run_id), code="agent_error")
    finally:
        with anyio.CancelScope(shield=True):
            if final is None:  # cancelled from outside: the server is shutting down
                _push(channel, translator.finish())
                message = "the server stopped during this run; the thread is saved"
                final = RunErrorEvent(message=message, code="server_shutdown")
            if req.committed is None:
                req.committed = (await _commit(req, claim, translator),)
            final = req.committed[0] or final
            channel.push(await _snapshot(agent))
            _emit(channel, [final])
            channel.close()
            on_end()
            await claim.answer_stops()


def _store_failure(exc: BaseException) -> SessionError | None:
    """The store error behind ``exc`` (itself, or inside an exception group), if any."""
    if isinstance(exc, SessionError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _store_failure(inner)
            if found is not None:
                return found
    return None


async def _turn(
    req: RunRequest, translator: Translator, commit: Callable[[], Awaitable[None]]
) -> BaseEvent:
    """The agent's part of the run: every event but the last; returns the last one."""
    channel, agent = req.channel, req.agent
    try:
        _push(
            channel,
            [encode_as(RunStartedEvent, thread_id=channel.thread_id, run_id=channel.run_id)],
        )
        channel.push(await _snapshot(agent, req.msgs))
        state_before = _state_json(req.record.state)
        if req.record.state is not None:
            _emit(channel, [StateSnapshotEvent(snapshot=req.record.state)])
        interrupted = False
        if not channel.stop_requested:
            interrupted = await _stream(req, translator, commit)
        else:  # stopped before it began: the message is kept, nothing runs
            await agent.observe(req.msgs)
            interrupted = True
        _push(channel, translator.finish())
        if _state_json(req.record.state) != state_before:  # a tool changed it
            _emit(channel, [StateSnapshotEvent(snapshot=req.record.state)])
        return _finished(req, translator, interrupted)
    except Exception as exc:
        logger.error(
            "run %s of thread %s failed: %s: %s",
            channel.run_id,
            channel.thread_id,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )
        _push(channel, translator.finish())
        return RunErrorEvent(message=failed_run_message(channel.run_id), code="agent_error")


def _state_json(state: object) -> str:
    """A comparable form of the state (whatever a tool may have put in it)."""
    return json.dumps(state, sort_keys=True, default=repr)


async def _commit(req: RunRequest, claim: Claim, translator: Translator) -> RunErrorEvent | None:
    """Commit the turn (releasing the thread); None, or the error that replaces its end."""
    req.channel.committing = True  # before any await: what the save captures is final
    req.record.aliases.extend(translator.aliases)
    try:
        await claim.commit(req.agent)
    except CommitFailed as exc:
        logger.error(
            "lost the turn of run %s of thread %s (%s): %s",
            req.channel.run_id,
            req.channel.thread_id,
            exc.code,
            exc,
        )
        message = (
            "this reply could not be saved (the thread store is unavailable); send it again"
            if exc.code == "store_unavailable"
            else "another run took over this thread; this reply was not saved"
        )
        return RunErrorEvent(message=message, code=exc.code)
    req.channel.committed_at = time.perf_counter()
    return None

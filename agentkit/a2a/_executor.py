"""The SDK's ``AgentExecutor`` for an agentkit agent: one A2A task = one agent turn.

The context id is the conversation: the agent's state (memory, calls waiting for approval)
is loaded from the store at the start of each task and saved, shielded, before the task's
final status goes out (so a client that sees ``completed`` can send the next message to
any worker). Events map as follows:

* ``TextDelta`` -> artifact chunks of the ``answer`` artifact (coalesced while the store
  writes the previous one); the final artifact replaces them with the reply itself (text,
  plus a data part for a structured ``output_type``).
* ``ToolCallStarted`` / ``ToolProgress`` / ``ToolResult`` -> ``working`` status updates
  whose message says what the agent does (the call as a data part ``{"toolCall": ...}``).
* ``stop_reason="pending_approval"`` -> ``input-required``, the calls in the status message
  (``{"pendingApprovals": [...]}``, arguments whole); the client's next message in the
  task decides them (``_decisions``).
* ``CancelTask`` -> ``agent.interrupt()`` (memory repaired) -> ``canceled``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, Parse
from pydantic import BaseModel

from agentkit.a2a._decisions import DECISION_HELP, DecisionError, parse_decision
from agentkit.a2a._store import context_key
from agentkit.a2a._trace import continue_trace
from agentkit.agent import Decision, ReActAgent, RunResult
from agentkit.events import AgentEvent, TextDelta, ToolCallStarted, ToolProgress, ToolResult
from agentkit.messages import Msg
from agentkit.session import Session, hold_session

__all__ = ["ANSWER_ARTIFACT", "AgentFactory", "AgentkitExecutor", "message_text"]

AgentFactory: TypeAlias = (
    "ReActAgent[Any, Any] | Callable[[], ReActAgent[Any, Any] | Awaitable[ReActAgent[Any, Any]]]"
)
ANSWER_ARTIFACT = "answer"
CANCEL_GRACE = 10.0
"""Seconds an interrupted run gets to repair its memory and save before it is cancelled."""


def message_text(message: Message) -> str:
    """The text of an A2A message: text parts as they are, data parts as JSON."""
    chunks = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            chunks.append(part.text)
        elif kind == "data":
            chunks.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        elif kind == "url":
            chunks.append(f"[file: {part.url}]")
    return "\n".join(chunks)


def _data_part(value: object) -> Part:
    data = Parse(json.dumps(value, ensure_ascii=False), struct_pb2.Value())
    return Part(data=data)


class _ContextState:
    """What a context stores: the agent's state and the task waiting for a decision."""

    def __init__(self, agent: ReActAgent[Any, Any]) -> None:
        self.agent = agent
        self.pending_task: str | None = None
        self.session_versions: dict[tuple[str, str], int] = {}  # the session's conflict check

    def state_dict(self) -> dict[str, object]:
        return {"agent": self.agent.state_dict(), "pendingTask": self.pending_task}

    def load_state_dict(self, state: dict[str, object]) -> None:
        agent_state = state.get("agent")
        if isinstance(agent_state, dict):
            self.agent.load_state_dict(agent_state)
        pending = state.get("pendingTask")
        self.pending_task = pending if isinstance(pending, str) else None


@dataclass
class _Live:
    """A task running on this worker."""

    context_id: str
    agent: ReActAgent[Any, Any] | None = None
    cancel_requested: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)


class AgentkitExecutor(AgentExecutor):
    """Runs an agentkit agent for the SDK's request handler.

    Args:
        factory: A ``ReActAgent`` (copied per task) or a callable returning a fresh one.
        session: Where each context's agent state is kept.
        tasks: The task store (to tell whether a waiting task was canceled elsewhere).
    """

    def __init__(self, factory: AgentFactory, session: Session, tasks: TaskStore) -> None:
        self.factory = factory
        self.session = session
        self.tasks = tasks
        self.live: dict[str, _Live] = {}  # task id -> its run here
        self._busy: dict[str, str] = {}  # context id -> the task running it here

    async def new_agent(self) -> ReActAgent[Any, Any]:
        """A fresh agent from the factory (or a copy of the template agent)."""
        if isinstance(self.factory, ReActAgent):
            agent: object = self.factory.copy()
        else:
            agent = self.factory()
            if inspect.isawaitable(agent):
                agent = await agent
        if not isinstance(agent, ReActAgent):
            raise TypeError(f"the agent factory returned {type(agent).__name__}, not ReActAgent")
        agent.print_hint = False  # a server has no console
        return agent

    # -- execute -----------------------------------------------------------------------
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run one turn of the context's agent for the task (see the module docs)."""
        task_id, context_id = str(context.task_id), str(context.context_id)
        message = context.message or Message()
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:
            task = Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
            await event_queue.enqueue_event(task)
        running = self._busy.get(context_id)
        if running is not None and running != task_id:
            await updater.reject(
                self._say(
                    updater,
                    f"context {context_id!r} is running task {running!r}; wait for it or cancel it",
                )
            )
            return
        live = self.live[task_id] = _Live(context_id)
        self._busy[context_id] = task_id
        headers = context.call_context.state.get("headers")
        try:
            with continue_trace(headers):  # the run's spans continue the caller's trace
                await self._execute(message, updater, live)
        finally:
            self.live.pop(task_id, None)
            self._busy.pop(context_id, None)
            live.done.set()

    @staticmethod
    def _say(updater: TaskUpdater, text: str, data: object = None) -> Message:
        parts = [Part(text=text)]
        if data is not None:
            parts.append(_data_part(data))
        return updater.new_agent_message(parts)

    async def _execute(self, message: Message, updater: TaskUpdater, live: _Live) -> None:
        agent = await self.new_agent()
        holder = _ContextState(agent)
        key = context_key(live.context_id)
        await self.session.load(key, holder)
        task_id = updater.task_id
        approvals: dict[str, bool | str | Decision] | None = None
        pending = [c["id"] for c in agent.pending_tool_calls]
        if pending and holder.pending_task == task_id:
            try:
                approvals = parse_decision(message, pending)
            except DecisionError as exc:
                await self._ask_again(updater, agent, f"{exc}; {DECISION_HELP}")
                return
            if not approvals:
                await self._ask_again(updater, agent, f"calls wait for approval: {DECISION_HELP}")
                return
        elif pending:
            waiting = await self._waiting_task(holder.pending_task)
            if waiting is not None:
                await updater.reject(
                    self._say(
                        updater,
                        f"context {live.context_id!r} waits for a decision in task {waiting!r}: "
                        "answer it there or cancel it",
                    )
                )
                return
            # The task that paused was canceled or ended elsewhere: its calls never run.
            await agent.interrupt_pending()
            holder.pending_task = None
        if live.cancel_requested:
            await updater.cancel()
            return
        await updater.start_work()
        live.agent = agent
        result: RunResult[Any] | None = None
        try:
            async with hold_session(self.session, key, agent):  # CancelTask from any worker
                result = await self._drive(agent, updater, message, approvals)
        finally:
            live.agent = None
            holder.pending_task = task_id if result is not None and result.pending else None
            with anyio.CancelScope(shield=True):  # the turn is committed before it is reported
                await self.session.save(key, holder)
        await self._finish(updater, agent, result)

    async def _waiting_task(self, task_id: str | None) -> str | None:
        """``task_id`` if that task still waits for input, else None."""
        if task_id is None:
            return None
        from a2a.server.context import ServerCallContext

        task = await self.tasks.get(task_id, ServerCallContext())
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            return task_id
        return None

    async def _ask_again(self, updater: TaskUpdater, agent: ReActAgent[Any, Any], why: str) -> None:
        calls = [dict(c) for c in agent.pending_tool_calls]
        await updater.requires_input(self._say(updater, why, {"pendingApprovals": calls}))

    async def _drive(
        self,
        agent: ReActAgent[Any, Any],
        updater: TaskUpdater,
        message: Message,
        approvals: dict[str, bool | str | Decision] | None,
    ) -> RunResult[Any]:
        send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)

        def sink(event: AgentEvent) -> None:
            # Never raise into the agent: an event after the pump stopped (the task is
            # being torn down) is dropped, and the agent's repairs go on.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                send.send_nowait(event)

        agent.add_event_listener(sink)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump, receive, updater)
            try:
                if approvals is not None:
                    result = await agent.run(approvals=approvals)
                else:
                    result = await agent.run(Msg("user", message_text(message), "user"))
            finally:
                send.close()  # the pump drains what is left, then ends
        return result

    async def _pump(
        self, receive: MemoryObjectReceiveStream[AgentEvent], updater: TaskUpdater
    ) -> None:
        """Forward agent events as task updates, coalescing text while a write is going."""
        started = False
        async with receive:
            async for first in receive:
                batch = [first]
                while True:
                    try:
                        batch.append(receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                text: list[str] = []
                for event in batch:
                    if isinstance(event, TextDelta):
                        text.append(event.delta)
                        continue
                    if text:
                        await self._chunk(updater, "".join(text), append=started)
                        started, text = True, []
                    await self._status(updater, event)
                if text:
                    await self._chunk(updater, "".join(text), append=started)
                    started = True

    @staticmethod
    async def _chunk(updater: TaskUpdater, text: str, *, append: bool) -> None:
        await updater.add_artifact(
            [Part(text=text)],
            artifact_id=ANSWER_ARTIFACT,
            name=ANSWER_ARTIFACT,
            append=append,
            last_chunk=False,
        )

    async def _status(self, updater: TaskUpdater, event: AgentEvent) -> None:
        if isinstance(event, ToolCallStarted):
            call = event.tool_call
            data = {"toolCall": {"id": call["id"], "name": call["name"], "input": call["input"]}}
            say = self._say(updater, f"calling {call['name']}", data)
        elif isinstance(event, ToolProgress):
            text = "".join(b["text"] for b in event.chunk.content if b["type"] == "text")
            if not text:
                return
            say = self._say(updater, text, {"toolProgress": event.tool_call_id})
        elif isinstance(event, ToolResult):
            status = "failed" if event.result.get("is_error") else "done"
            say = self._say(updater, f"{event.result['name']} {status}")
        else:
            return
        await updater.update_status(TaskState.TASK_STATE_WORKING, message=say)

    async def _finish(
        self, updater: TaskUpdater, agent: ReActAgent[Any, Any], result: RunResult[Any] | None
    ) -> None:
        assert result is not None  # _drive returned (an exception skips _finish)
        meta = {"stopReason": result.stop_reason}
        if result.stop_reason == "interrupted":
            await updater.update_status(TaskState.TASK_STATE_CANCELED, metadata=meta)
            return
        if result.stop_reason == "pending_approval":
            calls = [{"id": p.id, "name": p.name, "input": p.input} for p in result.pending]
            names = ", ".join(
                f"{p.name}({json.dumps(p.input, ensure_ascii=False)})" for p in result.pending
            )
            say = self._say(
                updater, f"approval needed: {names}; {DECISION_HELP}", {"pendingApprovals": calls}
            )
            await updater.update_status(
                TaskState.TASK_STATE_INPUT_REQUIRED, message=say, metadata=meta
            )
            return
        parts = [Part(text=result.text)] if result.text else []
        output = result.output if agent.output_type is not None else None
        if isinstance(output, BaseModel):
            parts.append(_data_part(output.model_dump(mode="json")))
        if parts:
            await updater.add_artifact(
                parts,
                artifact_id=ANSWER_ARTIFACT,
                name=ANSWER_ARTIFACT,
                append=False,
                last_chunk=True,
            )
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=meta)

    # -- cancel ------------------------------------------------------------------------
    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """``CancelTask``: interrupt the task's run (memory repaired), or drop its wait."""
        task_id = str(context.task_id)
        live = self.live.get(task_id)
        if live is not None:
            live.cancel_requested = True  # seen before the run starts, if it has not yet
            if live.agent is not None:
                await live.agent.interrupt()
            with anyio.move_on_after(CANCEL_GRACE):
                await live.done.wait()  # the run saved its turn and reported "canceled"
            return
        # Parked in input-required (no run): its calls end as interrupted, never run.
        if context.context_id:
            key = context_key(context.context_id)
            holder = _ContextState(await self.new_agent())
            if await self.session.load(key, holder) and holder.pending_task == task_id:
                if holder.agent.pending_tool_calls:
                    await holder.agent.interrupt_pending()
                holder.pending_task = None
                await self.session.save(key, holder)
        updater = TaskUpdater(event_queue, task_id, str(context.context_id or ""))
        await updater.cancel()

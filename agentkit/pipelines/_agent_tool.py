"""An agent as a tool of another agent: delegation through the one ``Tool`` interface.

``AgentTool`` takes ``{"task": str}``, runs the inner agent on it and answers with the inner
reply. While the inner agent works, its answer text, tool calls and tool progress stream
out as progress chunks (``ToolResponse(is_last=False)``), so a UI shows the sub-agent live;
only the final chunk (the inner reply) goes into the outer agent's memory.

Cancellation: when the outer call is cancelled (the outer agent is interrupted, or the
tool's timeout fires), the inner reply is *interrupted* (not merely cancelled: it runs
shielded in a child task and gets ``agent.interrupt()``), so its tool calls are answered
as interrupted and the inner agent is left with valid memory, ready for its next task.

Nested approvals: when the inner agent's run pauses for approval (and it can resume: a
``ReActAgent``), the outer call pauses too. Its final response says so
(``metadata["error"] == "nested_approval"``, with the inner calls and the inner agent's
state), the outer agent keeps the call pending and lists the inner calls as
``outer_id/inner_id``. Decisions on them re-invoke this call with a ``NestedResume``; the
inner agent that paused (or, after the outer state was loaded elsewhere, an agent given
the saved inner state) resumes with them; denying the outer call itself ends the inner
run as interrupted (its calls never run) and answers the call as denied.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeGuard

import anyio

from agentkit.agent._acting import denied_response
from agentkit.agent._conversation import (
    NESTED_APPROVAL,
    NestedResume,
    nested_resume,
    resume_scope,
)
from agentkit.events import (
    ApprovalRequested,
    ReplyFinished,
    TextDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)
from agentkit.exceptions import StateError
from agentkit.messages import Msg
from agentkit.pipelines._hub import audible_copy
from agentkit.pipelines._protocols import (
    AgentLike,
    StreamingAgent,
    can_resume,
    deps_kwargs,
)
from agentkit.tools._base import Tool
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from agentkit.tools._context import ToolContext

__all__ = ["TASK_PARAMETERS", "AgentTool", "agent_as_tool", "tool_name"]

TASK_PARAMETERS: dict[str, object] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The complete task, with every detail the agent needs: it does "
            "not see this conversation.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""The parameters of an agent called as a tool: one ``task`` (local and remote agents)."""
INTERRUPT_GRACE = 10.0
"""Seconds an interrupted inner agent gets to finish its repairs before it is cancelled."""
# Reply metadata worth passing on to the outer agent's tool result.
_FORWARDED_METADATA = ("interrupted", "pending_tool_calls", "structured_output")


def tool_name(agent_name: str, fallback: str = "agent") -> str:
    """A valid tool name (``[A-Za-z0-9_-]{1,64}``) derived from an agent's name.

    Args:
        agent_name: The agent's name.
        fallback: The name when nothing valid is left of ``agent_name``.
    """
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", agent_name).strip("_")[:64]
    return name or fallback


class AgentTool(Tool):
    """A ``Tool`` that delegates ``{"task": str}`` to an agent and returns its reply.

    The inner agent keeps its memory between calls (it remembers earlier tasks). Calls are
    served one at a time: a second parallel call waits for the first to finish, because an
    agent replies to one thing at a time. While the inner agent holds a run paused for
    approval (a nested approval of an earlier call), a new call runs on a copy of it
    (``agent.copy()``), so that neither disturbs the other.

    Args:
        agent: The inner agent. With a ``stream()`` method its events are forwarded as
            progress; otherwise it is simply awaited.
        name: Tool name (default: the agent's name, made a valid tool name).
        description: What the tool does, for the outer model (default: a delegation
            sentence naming the agent).
        group: Tool group.
        requires_approval: A human must approve each delegation.
        timeout: Seconds before the delegation is cancelled (the inner agent is interrupted).
    """

    reports_progress = True  # inner events stream live through the ToolContext

    def __init__(
        self,
        agent: AgentLike,
        name: str | None = None,
        description: str | None = None,
        *,
        group: str = "basic",
        requires_approval: bool = False,
        timeout: float | None = None,
    ) -> None:
        super().__init__(
            name or tool_name(agent.name),
            description or f"Delegate a task to the agent {agent.name!r} and get its answer back.",
            TASK_PARAMETERS,
            group=group,
            requires_approval=requires_approval,
            timeout=timeout,
        )
        self.agent = agent
        self._lock = anyio.Lock()
        # Outer call id -> the agent instance holding that call's paused inner run.
        self._waiting: dict[str, AgentLike] = {}

    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Run the inner agent on ``arguments["task"]`` without a Toolkit.

        Progress chunks are collected and yielded after the inner reply (a Toolkit call,
        through :meth:`invoke_with_context`, streams them live instead).
        """
        return self._replay(str(arguments["task"]))

    async def _replay(self, task: str) -> AsyncIterator[ToolResponse]:
        chunks: list[ToolResponse] = []
        reply = await self.delegate(task, on_progress=chunks.append)
        for chunk in chunks:
            yield chunk
        yield self._final(reply)

    async def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Run the inner agent, streaming its events live through ``context``.

        The whole inner reply runs inside one step of this generator: the inner agent's
        event stream (a task group) is never left open across a ``yield``. A call resumed
        for decisions on the calls waiting inside it (``NestedResume``) resumes the inner
        run instead of starting one.
        """
        caller = getattr(context.data, "name", None)

        def forward(chunk: ToolResponse) -> None:
            context.emit_progress(chunk.content, metadata=chunk.metadata)

        resume = nested_resume(context.call_id)
        async with self._lock:
            with resume_scope(None):  # the inner agent's own calls are not resumed by it
                if resume is not None:
                    response = await self._resume(resume, forward, context.deps)
                else:
                    agent = self._idle_agent()
                    reply = await self._delegate_on(
                        agent,
                        str(arguments["task"]),
                        caller if isinstance(caller, str) else "user",
                        forward,
                        context.deps,
                    )
                    response = self._outcome(context.call_id, agent, reply)
        yield response

    async def delegate(
        self,
        task: str,
        *,
        caller: str = "user",
        on_progress: Callable[[ToolResponse], object] | None = None,
        deps: object = None,
    ) -> Msg:
        """Run the inner agent on ``task`` and return its reply.

        Args:
            task: The task text (a user message named ``caller``).
            caller: Name on the task message (the calling agent's name, when known).
            on_progress: Receives a progress chunk per forwarded inner event.
            deps: The outer run's dependencies, handed to the inner agent's tools when it
                takes ``deps=`` (a ``ReActAgent`` does).
        """
        async with self._lock:
            return await self._delegate_on(self.agent, task, caller, on_progress, deps)

    async def _delegate_on(
        self,
        agent: AgentLike,
        task: str,
        caller: str,
        on_progress: Callable[[ToolResponse], object] | None,
        deps: object,
    ) -> Msg:
        msg = Msg(caller, task, "user")
        extra = deps_kwargs(agent, deps)
        if not _can_stream(agent):
            return await self._interruptible(agent, lambda: agent(msg, **extra))
        streaming = agent
        return await self._interruptible(
            agent, lambda: self._consume(streaming, msg, on_progress, extra)
        )

    def _idle_agent(self) -> AgentLike:
        """The agent a new task runs on: a copy while the agent holds another call's pause."""
        self._waiting = {k: a for k, a in self._waiting.items() if _pending_ids(a)}
        agent = self.agent
        copy = getattr(agent, "copy", None)
        if callable(copy) and any(a is agent for a in self._waiting.values()):
            fresh: AgentLike = copy()
            return fresh
        return agent

    def _outcome(self, call_id: str, agent: AgentLike, reply: Msg) -> ToolResponse:
        """The call's final response: the reply, or a nested wait if the inner run paused."""
        metadata = reply.metadata or {}
        pending = metadata.get("pending_tool_calls")
        if not pending or metadata.get("interrupted") or not can_resume(agent):
            return self._final(reply)
        self._waiting[call_id] = agent
        names = ", ".join(str(c.get("name")) for c in pending)
        return ToolResponse(
            content=[{"type": "text", "text": f"[{agent.name} waits for approval of: {names}]"}],
            metadata={
                "error": NESTED_APPROVAL,
                "agent": agent.name,
                "calls": pending,
                "state": agent.state_dict(),
            },
            is_last=True,
        )

    async def _resume(
        self,
        resume: NestedResume,
        on_progress: Callable[[ToolResponse], object] | None,
        deps: object,
    ) -> ToolResponse:
        """Route decisions to the inner agent holding the call's paused run."""
        agent = self._waiting.pop(resume.call_id, None)
        expected = {c["id"] for c in resume.wait.calls}
        restore = agent is None or _pending_ids(agent) != expected
        if agent is None or restore:
            # Loaded elsewhere, or the agent moved on: resume from the saved inner state.
            agent = self._idle_agent()
        if not can_resume(agent):
            raise StateError(f"agent {agent.name!r} cannot resume a run paused for approval")
        if restore:
            agent.load_state_dict(resume.wait.state)
        if resume.cancel is not None:  # the outer call was denied: its inner calls never run
            await agent.interrupt_pending()
            return denied_response(resume.cancel.reason or False)
        resumable = agent
        extra = deps_kwargs(agent, deps)

        async def work() -> Msg:
            result = await self._forwarding(
                resumable, on_progress, resumable.run(approvals=resume.approvals, **extra)
            )
            reply: Msg = result.reply
            return reply

        return self._outcome(resume.call_id, agent, await self._interruptible(agent, work))

    async def _forwarding(
        self,
        agent: AgentLike,
        on_progress: Callable[[ToolResponse], object] | None,
        work: Awaitable[Any],
    ) -> Any:
        """Await ``work`` with the agent's events forwarded as progress (when it has them)."""
        add = getattr(agent, "add_event_listener", None)
        remove = getattr(agent, "remove_event_listener", None)
        if on_progress is None or not callable(add) or not callable(remove):
            return await work

        def listen(event: object) -> None:
            chunk = self._progress(event)
            if chunk is not None:
                on_progress(chunk)

        add(listen)
        try:
            return await work
        finally:
            remove(listen)

    async def _consume(
        self,
        agent: StreamingAgent,
        msg: Msg,
        on_progress: Callable[[ToolResponse], object] | None,
        extra: dict[str, object],
    ) -> Msg:
        reply: Msg | None = None
        async with agent.stream(msg, **extra) as events:
            async for event in events:
                if isinstance(event, ReplyFinished):
                    reply = event.reply
                elif on_progress is not None and (chunk := self._progress(event)):
                    on_progress(chunk)
        if reply is None:
            raise RuntimeError(f"agent {agent.name!r} ended its stream without a reply")
        return reply

    async def _interruptible(self, agent: AgentLike, work: Callable[[], Awaitable[Msg]]) -> Msg:
        """Run ``work`` so that cancelling the caller *interrupts* the inner agent.

        A plain cancellation would reach the inner reply as a failure ("the reply failed");
        instead the inner reply runs shielded in a child task, and when the caller is
        cancelled the inner agent gets ``interrupt()`` (its tool calls are answered as
        interrupted, its memory stays valid). If it does not stop within
        ``INTERRUPT_GRACE`` seconds, the shield is dropped and it is cancelled outright.
        """
        done = anyio.Event()
        shield = anyio.CancelScope(shield=True)
        outcome: list[Msg] = []
        errors: list[Exception] = []

        async def run() -> None:
            with shield:
                try:
                    outcome.append(await work())
                except Exception as exc:  # re-raised below, outside the task group
                    errors.append(exc)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._stop_inner(agent, shield, done)
                raise
        if errors:
            raise errors[0]
        return outcome[0]

    async def _stop_inner(
        self, agent: AgentLike, shield: anyio.CancelScope, done: anyio.Event
    ) -> None:
        interrupt = getattr(agent, "interrupt", None)
        # ``interrupt()`` returning False means no reply was running (not started yet, or
        # already over): nothing to wait for, so cancelling is immediate and safe.
        if callable(interrupt) and await interrupt() is not False:
            with anyio.move_on_after(INTERRUPT_GRACE):
                await done.wait()
        shield.cancel()  # a no-op once the inner reply has ended

    def _progress(self, event: object) -> ToolResponse | None:
        """Turn one inner event into a progress chunk (None: nothing worth showing)."""
        meta: dict[str, object] = {"agent": self.agent.name, "event": getattr(event, "type", None)}
        if isinstance(event, TextDelta):
            return ToolResponse.text(event.delta, metadata=meta, is_last=False)
        if isinstance(event, ToolCallStarted):
            call = event.tool_call
            meta["tool_call_id"] = call["id"]
            args = json.dumps(call["input"], ensure_ascii=False)
            return ToolResponse.text(f"\n[{call['name']}({args})]\n", metadata=meta, is_last=False)
        if isinstance(event, ToolProgress):
            meta["tool_call_id"] = event.tool_call_id
            return ToolResponse(content=list(event.chunk.content), metadata=meta, is_last=False)
        if isinstance(event, ToolResult):
            meta["tool_call_id"] = event.tool_call_id
            meta["is_error"] = bool(event.result.get("is_error", False))
            status = "failed" if meta["is_error"] else "done"
            return ToolResponse.text(
                f"[{event.result['name']} {status}]\n", metadata=meta, is_last=False
            )
        if isinstance(event, ApprovalRequested):
            names = ", ".join(str(c.get("name")) for c in event.calls)
            return ToolResponse.text(
                f"[waiting for approval: {names}]\n", metadata=meta, is_last=False
            )
        return None  # thinking is private; start/interrupt markers carry no content

    def _final(self, reply: Msg) -> ToolResponse:
        """The result that goes into the outer agent's memory: the inner reply."""
        audible = audible_copy(reply)
        content: list[ToolResultContent] = []
        if audible is not None:
            for block in audible.get_content_blocks():
                if block["type"] in ("text", "image", "audio"):
                    content.append(block)
        metadata: dict[str, object] = {"agent": self.agent.name, "reply_id": reply.id}
        for key in _FORWARDED_METADATA:
            if reply.metadata and key in reply.metadata:
                metadata[key] = reply.metadata[key]
        pending = metadata.get("pending_tool_calls")
        if isinstance(pending, list) and pending:
            names = ", ".join(str(c.get("name")) for c in pending)
            content.append(
                {"type": "text", "text": f"[{self.agent.name} waits for approval of: {names}]"}
            )
        if not content:
            content.append({"type": "text", "text": f"[{self.agent.name} gave no answer]"})
        return ToolResponse(content=content, metadata=metadata, is_last=True)


def _can_stream(agent: AgentLike) -> TypeGuard[StreamingAgent]:
    return callable(getattr(agent, "stream", None))


def _pending_ids(agent: AgentLike) -> set[str]:
    """The ids of the calls ``agent`` holds waiting for approval (none for a plain agent)."""
    calls = getattr(agent, "pending_tool_calls", None) or ()
    return {str(c["id"]) for c in calls}


def agent_as_tool(
    agent: AgentLike,
    name: str | None = None,
    description: str | None = None,
    **kwargs: Any,
) -> AgentTool:
    """Wrap ``agent`` as a ``Tool`` for another agent's toolkit.

    Args:
        agent: The agent to delegate to.
        name: Tool name (default: derived from the agent's name).
        description: Tool description for the outer model.
        **kwargs: ``group``, ``requires_approval``, ``timeout`` (see :class:`AgentTool`).

    Example:
        >>> toolkit.register_tool(agent_as_tool(researcher, description="Finds sources."))
    """
    return AgentTool(agent, name, description, **kwargs)

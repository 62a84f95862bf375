"""``A2AAgent``: a remote A2A agent used where an agentkit agent is used.

``await remote("question")`` sends the question as a message and returns the final answer
as a ``Msg`` (pipelines call agents this way); ``remote.as_tool()`` is a ``Tool`` for
another agent's toolkit that streams the remote task's progress (status messages and
answer chunks) as tool progress. Consecutive calls share one A2A context, so the remote
agent remembers earlier questions (``reset()`` starts a new one).

Cancellation: when the caller is cancelled (the outer agent interrupted, a timeout) while a
remote task runs, ``CancelTask`` is sent, shielded and bounded by ``cancel_timeout``, so
the remote task ends ``canceled`` instead of running on unobserved.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict

from agentkit.a2a._trace import add_trace_hook
from agentkit.exceptions import AgentkitError
from agentkit.messages import Msg
from agentkit.tools import Tool, ToolContext, ToolResponse

__all__ = ["A2AAgent", "RemoteAgentError"]

_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}
_PAUSED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
_PARAMETERS: dict[str, object] = {
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


class RemoteAgentError(AgentkitError):
    """The remote agent failed, rejected the task, or asked for input it cannot get here."""


@dataclass
class _Outcome:
    """What a remote task came to."""

    task_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    artifacts: dict[str, list[Part]] = field(default_factory=dict)
    status_text: str = ""
    status_data: list[Any] = field(default_factory=list)

    @property
    def text(self) -> str:
        # The chunks of one artifact are one text; separate artifacts, one per line.
        return "\n".join(
            "".join(p.text for p in parts if p.text) for parts in self.artifacts.values()
        ).strip("\n")

    @property
    def data(self) -> list[Any]:
        return [
            MessageToDict(p.data)
            for parts in self.artifacts.values()
            for p in parts
            if p.WhichOneof("content") == "data"
        ]


def _status_text(status: TaskStatus) -> tuple[str, list[Any]]:
    text = [p.text for p in status.message.parts if p.WhichOneof("content") == "text"]
    data = [
        MessageToDict(p.data) for p in status.message.parts if p.WhichOneof("content") == "data"
    ]
    return "\n".join(text), data


def _tool_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64] or "remote_agent"


class A2AAgent:
    """A remote A2A agent (protocol 1.0, JSON-RPC), usable as an agent or as a tool.

    Args:
        url: The agent's base URL (its card is at ``/.well-known/agent-card.json``).
        auth: A bearer token sent on every request, or None.
        name: The agent's name here (default: the card's, once :meth:`connect` ran;
            ``"remote_agent"`` before).
        description: What it does, for the tool's description (default: the card's).
        cancel_timeout: Seconds to wait for ``CancelTask`` when the caller is cancelled.
        timeout: Seconds to connect (the stream itself has no read timeout: a remote task
            may think for long).
        http_client: An ``httpx.AsyncClient`` to use (its headers and auth are kept).
    """

    def __init__(
        self,
        url: str,
        *,
        auth: str | None = None,
        name: str | None = None,
        description: str | None = None,
        cancel_timeout: float = 5.0,
        timeout: float = 10.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self.name = name or "remote_agent"
        self.description = description
        self.cancel_timeout = cancel_timeout
        self.context_id: str | None = None
        self.card: AgentCard | None = None
        self._named = name is not None
        self._auth = auth
        self._timeout = timeout
        self._http = http_client
        self._client: Client | None = None
        self._lock = anyio.Lock()
        self._scope: anyio.CancelScope | None = None

    # -- connection --------------------------------------------------------------------
    async def connect(self) -> AgentCard:
        """Fetch the agent card (once) and fill ``name`` / ``description`` from it."""
        await self._ensure_client()
        assert self.card is not None
        return self.card

    async def _ensure_client(self) -> Client:
        if self._client is None:
            http = self._http
            if http is None:
                http = httpx.AsyncClient(timeout=httpx.Timeout(self._timeout, read=None))
                self._http = http
            if self._auth:
                http.headers["Authorization"] = f"Bearer {self._auth}"
            add_trace_hook(http)  # traceparent on every request while instrumented
            card = await A2ACardResolver(http, self.url).get_agent_card()
            self._client = await create_client(
                card, client_config=ClientConfig(streaming=True, httpx_client=http)
            )
            self.card = card
            if not self._named and card.name:
                self.name = card.name
            if self.description is None and card.description:
                self.description = card.description
        return self._client

    async def aclose(self) -> None:
        """Close the connection (a later call opens a new one)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def reset(self) -> None:
        """Start a new remote conversation (a new context id) with the next message."""
        self.context_id = None

    # -- asking ------------------------------------------------------------------------
    async def ask(
        self, text: str, *, on_progress: Callable[[str, dict[str, object]], object] | None = None
    ) -> tuple[str, list[Any]]:
        """Send ``text`` and return the final answer: ``(text, data parts)``.

        Args:
            text: The message.
            on_progress: Receives each status message and answer chunk as it arrives
                (text, metadata).

        Raises:
            RemoteAgentError: when the remote task failed, was rejected or canceled, or
                waits for input (approvals of the remote agent are not forwarded yet).
        """
        async with self._lock:  # one remote task at a time per context
            client = await self._ensure_client()
            request = SendMessageRequest(
                message=Message(
                    message_id=uuid.uuid4().hex,
                    role=Role.ROLE_USER,
                    parts=[Part(text=text)],
                    context_id=self.context_id or "",
                )
            )
            outcome = await self._follow(client, request, on_progress)
        return self._result(outcome)

    async def _follow(
        self,
        client: Client,
        request: SendMessageRequest,
        on_progress: Callable[[str, dict[str, object]], object] | None,
    ) -> _Outcome:
        """Read the task's stream in a shielded child, so a cancel can still name the task.

        Cancelling the caller must not simply drop the stream: the task id may not have
        arrived yet, and the remote task would run on unobserved. Instead the reader keeps
        going (shielded) until the id is known, ``CancelTask`` is sent, and the stream's
        end is awaited, all within ``cancel_timeout``.
        """
        outcome = _Outcome()
        known, done = anyio.Event(), anyio.Event()
        shield = anyio.CancelScope(shield=True)
        errors: list[Exception] = []

        async def read() -> None:
            with shield:
                try:
                    async for response in client.send_message(request):
                        self._apply(response, outcome, on_progress)
                        if outcome.task_id:
                            known.set()
                except Exception as exc:  # re-raised in the caller, outside the task group
                    errors.append(exc)
            known.set()
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._stop(client, outcome, known, done)
                    shield.cancel()
                raise
        if errors:
            raise RemoteAgentError(f"remote agent {self.name!r}: {errors[0]}") from errors[0]
        return outcome

    async def _stop(
        self, client: Client, outcome: _Outcome, known: anyio.Event, done: anyio.Event
    ) -> None:
        """``CancelTask`` for the running remote task, bounded by ``cancel_timeout``."""
        with anyio.move_on_after(self.cancel_timeout):
            await known.wait()
            if outcome.task_id and outcome.state not in _TERMINAL | _PAUSED:
                with contextlib.suppress(Exception):  # best effort: the caller's cancel goes on
                    await client.cancel_task(CancelTaskRequest(id=outcome.task_id))
            await done.wait()  # the stream ends with the canceled status

    def _apply(
        self,
        response: StreamResponse,
        outcome: _Outcome,
        on_progress: Callable[[str, dict[str, object]], object] | None,
    ) -> None:
        kind = response.WhichOneof("payload")
        if kind == "task":
            self._take_task(response.task, outcome)
        elif kind == "message":  # a message-only answer: no task
            outcome.state = TaskState.TASK_STATE_COMPLETED
            outcome.artifacts["message"] = list(response.message.parts)
            self.context_id = response.message.context_id or self.context_id
        elif kind == "status_update":
            update = response.status_update
            outcome.task_id = update.task_id
            self.context_id = update.context_id or self.context_id
            outcome.state = update.status.state
            outcome.status_text, outcome.status_data = _status_text(update.status)
            if on_progress is not None and outcome.status_text:
                state = TaskState.Name(update.status.state)
                on_progress(outcome.status_text + "\n", {"a2a": "status", "state": state})
        elif kind == "artifact_update":
            event = response.artifact_update
            outcome.task_id = event.task_id
            artifact = event.artifact
            parts = outcome.artifacts.setdefault(artifact.artifact_id, [])
            if not event.append:
                parts.clear()
            parts.extend(artifact.parts)
            if on_progress is not None and not event.last_chunk:
                chunk = "".join(p.text for p in artifact.parts if p.text)
                if chunk:
                    on_progress(chunk, {"a2a": "artifact", "artifact": artifact.artifact_id})

    def _take_task(self, task: Task, outcome: _Outcome) -> None:
        outcome.task_id = task.id
        outcome.state = task.status.state
        self.context_id = task.context_id or self.context_id
        if task.artifacts:
            outcome.artifacts = {a.artifact_id: list(a.parts) for a in task.artifacts}
        outcome.status_text, outcome.status_data = _status_text(task.status)

    def _result(self, outcome: _Outcome) -> tuple[str, list[Any]]:
        state = outcome.state
        if state == TaskState.TASK_STATE_COMPLETED:
            return outcome.text, outcome.data
        label = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
        detail = outcome.status_text or "no details"
        if state in _PAUSED:
            raise RemoteAgentError(
                f"remote agent {self.name!r} needs input ({label}) in task "
                f"{outcome.task_id!r}: {detail}"
            )
        raise RemoteAgentError(
            f"remote agent {self.name!r} ended task {outcome.task_id!r} {label}: {detail}"
        )

    # -- the agent interface (pipelines) -----------------------------------------------
    async def __call__(self, msg: Msg | list[Msg] | str | None = None) -> Msg:
        """Send ``msg`` (its text) and reply with the answer as a ``Msg``.

        An interrupt (:meth:`interrupt`) cancels the remote task; the reply then has
        ``metadata["interrupted"] = True``.
        """
        if msg is None:
            text = ""
        elif isinstance(msg, str):
            text = msg
        elif isinstance(msg, Msg):
            text = msg.get_text()
        else:
            text = "\n".join(m.get_text() for m in msg)
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                answer, data = await self.ask(text)
            finally:
                self._scope = None
        if scope.cancelled_caught:
            return Msg(self.name, "", "assistant", metadata={"interrupted": True})
        metadata: dict[str, Any] = {"a2a_context_id": self.context_id}
        if data:
            metadata["structured_output"] = data[0] if len(data) == 1 else data
        return Msg(self.name, answer, "assistant", metadata=metadata)

    async def interrupt(self, msg: object = None) -> bool:
        """Cancel the remote task in progress (``CancelTask``); False when idle."""
        scope = self._scope
        if scope is None:
            return False
        scope.cancel()
        return True

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        timeout: float | None = None,
    ) -> Tool:
        """This remote agent as a ``Tool`` taking ``{"task": str}``.

        The remote task's progress streams as the call's progress; the result is the
        final answer (text, then each data part as JSON). An interrupt of the outer run
        cancels the remote task.
        """
        return _RemoteAgentTool(self, name, description, timeout=timeout)


class _RemoteAgentTool(Tool):
    """``A2AAgent.as_tool()``."""

    reports_progress = True  # the remote progress streams live through the ToolContext

    def __init__(
        self, agent: A2AAgent, name: str | None, description: str | None, *, timeout: float | None
    ) -> None:
        super().__init__(
            name or _tool_name(agent.name),
            description
            or agent.description
            or f"Delegate a task to the remote agent {agent.name!r} and get its answer back.",
            _PARAMETERS,
            timeout=timeout,
        )
        self.agent = agent

    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Ask the remote agent (no live progress without a context)."""
        return self._call(str(arguments["task"]), None)

    def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Ask the remote agent, streaming its progress through ``context``."""
        return self._call(str(arguments["task"]), context)

    async def _call(self, task: str, context: ToolContext | None) -> AsyncIterator[ToolResponse]:
        def progress(text: str, meta: dict[str, object]) -> None:
            if context is not None:
                context.emit_progress(text, metadata={"agent": self.agent.name, **meta})

        try:
            text, data = await self.agent.ask(task, on_progress=progress)
        except RemoteAgentError as exc:
            yield ToolResponse.error(str(exc))
            return
        chunks = [text] if text else []
        chunks += [json.dumps(d, ensure_ascii=False) for d in data]
        body = "\n".join(chunks) or f"[{self.agent.name} gave no answer]"
        meta: dict[str, object] = {
            "agent": self.agent.name,
            "a2a_context_id": self.agent.context_id,
        }
        if data:
            meta["structured_output"] = data[0] if len(data) == 1 else data
        yield ToolResponse.text(body, metadata=meta)

"""``A2AAgent``: a remote A2A agent used where an agentkit agent is used.

``await remote("question")`` sends the question as a message and returns the final answer
as a ``Msg`` (pipelines call agents this way; a ``MsgHub`` adds what it observed, see
``observe``); ``remote.as_tool()`` is a ``Tool`` for another agent's toolkit that streams
the remote task's progress (status messages and answer chunks) as tool progress;
``ReActAgent(handoffs=[remote])`` hands it the conversation (``take_over``). Consecutive
calls share one A2A context, so the remote agent remembers earlier questions (``reset()``
starts a new one); a handoff keeps its context id in the source's memory instead.

Cancellation: when the caller is cancelled (the outer agent interrupted, a timeout) while a
remote task runs, ``CancelTask`` is sent, shielded and bounded by ``cancel_timeout``, so
the remote task ends ``canceled`` instead of running on unobserved.

Input-required: a remote task waiting for input is a call of the outer run waiting for
approval (the nested-approvals path): the ``NestedWait`` holds the remote task and context
ids, so the decision (``run(approvals={"<call>/<remote id>": ...})``) is sent as that
task's next message, also after the outer agent's state was saved and loaded elsewhere.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import A2AError
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, Parse

from agentkit._ids import new_id
from agentkit.a2a._journal import current_journal
from agentkit.a2a._trace import add_trace_hook
from agentkit.agent._acting import denied_response
from agentkit.agent._conversation import (
    NESTED_APPROVAL,
    Decision,
    NestedResume,
    NestedWait,
    Verdict,
    as_decision,
    nested_resume,
)
from agentkit.agent._hooks import HookHost
from agentkit.events import AgentEvent, CallInfo, TextDelta, ToolProgress
from agentkit.exceptions import AgentkitError, StateError, UsageError
from agentkit.messages import Msg
from agentkit.pipelines._agent_tool import TASK_PARAMETERS, tool_name
from agentkit.tools import Tool, ToolContext, ToolResponse

__all__ = [
    "HANDOFF_HEADER",
    "OBSERVED_HEADER",
    "A2AAgent",
    "RemoteAgentError",
    "RemoteAuthRequiredError",
    "history_text",
]

_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}
_PAUSED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


class RemoteAgentError(AgentkitError):
    """The remote agent failed, rejected or canceled the task, or cannot be reached."""


class RemoteAuthRequiredError(RemoteAgentError):
    """The remote task stopped in ``TASK_STATE_AUTH_REQUIRED``: it needs credentials.

    A2A leaves how to authenticate to the agent (out of band); agentkit has no way to
    give them inside the task, so the call ends with this error.

    Attributes:
        task_id: The remote task waiting for authentication.
        context_id: Its context.
        state: ``"TASK_STATE_AUTH_REQUIRED"``.
    """

    def __init__(self, message: str, *, task_id: str, context_id: str) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.context_id = context_id
        self.state = "TASK_STATE_AUTH_REQUIRED"


@dataclass
class _Outcome:
    """What a remote task came to."""

    task_id: str = ""
    context_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    artifacts: dict[str, list[Part]] = field(default_factory=dict)
    status_text: str = ""
    status_data: list[object] = field(default_factory=list)
    streamed: dict[str, str] = field(default_factory=dict)  # artifact id -> text shown

    @property
    def text(self) -> str:
        # The chunks of one artifact are one text; separate artifacts, one per line.
        return "\n".join(
            "".join(p.text for p in parts if p.text) for parts in self.artifacts.values()
        ).strip("\n")

    @property
    def data(self) -> list[object]:
        return [
            MessageToDict(p.data)
            for parts in self.artifacts.values()
            for p in parts
            if p.WhichOneof("content") == "data"
        ]


def _status_text(status: TaskStatus) -> tuple[str, list[object]]:
    text = [p.text for p in status.message.parts if p.WhichOneof("content") == "text"]
    # A data part is any JSON value (a struct Value), whatever MessageToDict's stub says.
    data: list[object] = [
        MessageToDict(p.data) for p in status.message.parts if p.WhichOneof("content") == "data"
    ]
    return "\n".join(text), data


class A2AAgent(HookHost):
    """A remote A2A agent (protocol 1.0, JSON-RPC), usable wherever an agent is.

    As a tool (:meth:`as_tool`), a handoff target (``ReActAgent(handoffs=[A2AAgent(url)])``),
    in pipelines (``await remote(msg)``) and in a ``MsgHub`` (what it observes goes with its
    next message, see :meth:`observe`). A remote task that stops ``input-required`` (an
    approval, or a question) pauses the outer run: the call waits for approval as
    ``"<outer call id>/<remote id>"`` and the decision is sent as the next message of that
    remote task (docs/a2a.md, "Remote approvals").

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
        self._connecting = anyio.Lock()
        self._scope: anyio.CancelScope | None = None
        self._hooks = None
        self._heard: list[Msg] = []  # observed (MsgHub), sent with the next message
        # A direct call's task waiting for input: its wait and the reply that reported it.
        self._paused: tuple[NestedWait, Msg] | None = None

    # -- connection --------------------------------------------------------------------
    async def connect(self) -> AgentCard:
        """Fetch the agent card (once) and fill ``name`` / ``description`` from it.

        Raises:
            RemoteAgentError: when the card cannot be fetched or read.
        """
        await self._ensure_client()
        assert self.card is not None
        return self.card

    async def _ensure_client(self) -> Client:
        if self._client is not None:
            return self._client
        async with self._connecting:  # concurrent first calls (handoffs) share one client
            return await self._connect()

    async def _connect(self) -> Client:
        if self._client is None:
            http = self._http
            if http is None:
                http = httpx.AsyncClient(timeout=httpx.Timeout(self._timeout, read=None))
                self._http = http
            if self._auth:
                http.headers["Authorization"] = f"Bearer {self._auth}"
            add_trace_hook(http)  # traceparent on every request while instrumented
            try:
                card = await A2ACardResolver(http, self.url).get_agent_card()
                self._client = await create_client(
                    card, client_config=ClientConfig(streaming=True, httpx_client=http)
                )
            except (A2AError, httpx.HTTPError) as exc:
                raise RemoteAgentError(
                    f"remote agent {self.name!r} at {self.url}: cannot connect: {exc}"
                ) from exc
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
        """Start a new remote conversation (a new context id) with the next message.

        A task of the old context that waits for input is forgotten here (not canceled).
        """
        self.context_id = None
        self._heard.clear()
        self._paused = None

    # -- asking ------------------------------------------------------------------------
    async def _ask(
        self, text: str, on_progress: Callable[[str, dict[str, object]], object] | None
    ) -> _Outcome:
        async with self._lock:  # one remote task at a time per context
            parts = [Part(text=text)]
            heard, self._heard = self._heard, []
            if heard:
                parts.insert(0, Part(text=OBSERVED_HEADER + history_text(heard)))
            outcome = await self._send(parts, self.context_id, "", on_progress)
            self.context_id = outcome.context_id or self.context_id
        return outcome

    async def _send(
        self,
        parts: list[Part],
        context_id: str | None,
        task_id: str,
        on_progress: Callable[[str, dict[str, object]], object] | None,
    ) -> _Outcome:
        """Send one message (in ``task_id``, when it answers a paused task); follow the task.

        Inside a DBOS step (a durable run) the exchange is journaled (``_journal``): an
        execution of the step after a crash follows the task the first one started
        instead of sending the message again.
        """
        client = await self._ensure_client()
        journal = current_journal()
        message_id = new_id()
        on_task: Callable[[str], Awaitable[None]] | None = None
        if journal is not None:
            key = journal.key(task_id, parts)
            record = await journal.get(key)
            if record is not None:
                found = record.get("taskId") or await self._find(client, record)
                if found:
                    outcome = await self._follow(
                        client, lambda: _rejoin(client, found), on_progress
                    )
                    outcome.context_id = outcome.context_id or record.get("contextId", "")
                    return outcome
                message_id = record.get("messageId") or message_id
                context_id = record.get("contextId") or context_id
            # A new context is named here, so that a record without a task id can find it.
            context_id = context_id or new_id()
            sent = {"messageId": message_id, "contextId": context_id}
            await journal.put(key, sent)

            async def on_task(remote_task: str) -> None:
                await journal.put(key, {**sent, "taskId": remote_task})

        request = SendMessageRequest(
            message=Message(
                message_id=message_id,
                role=Role.ROLE_USER,
                parts=parts,
                context_id=context_id or "",
                task_id=task_id,
            )
        )
        outcome = await self._follow(
            client, lambda: client.send_message(request), on_progress, on_task
        )
        outcome.context_id = outcome.context_id or context_id or ""
        return outcome

    async def _find(self, client: Client, record: Mapping[str, str]) -> str:
        """The task an earlier execution's message started, by its message id ("": none).

        Raises:
            RemoteAgentError: when the server cannot list the context's tasks: whether it
                received the message is unknown, and it is not sent twice.
        """
        message_id, context_id = record.get("messageId", ""), record.get("contextId", "")
        try:
            listed = await client.list_tasks(
                ListTasksRequest(context_id=context_id, page_size=100, history_length=100)
            )
        except (A2AError, httpx.HTTPError) as exc:
            raise RemoteAgentError(
                f"remote agent {self.name!r}: a durable run sent message {message_id!r} "
                f"before a crash and the server cannot list the tasks of context "
                f"{context_id!r} to find it ({exc}): not sending it a second time"
            ) from exc
        for task in listed.tasks:
            if any(m.message_id == message_id for m in task.history):
                return str(task.id)
        return ""

    async def _follow(
        self,
        client: Client,
        responses: Callable[[], AsyncIterator[StreamResponse]],
        on_progress: Callable[[str, dict[str, object]], object] | None,
        on_task: Callable[[str], Awaitable[None]] | None = None,
    ) -> _Outcome:
        """Read the task's stream in a shielded child, so a cancel can still name the task.

        Cancelling the caller must not simply drop the stream: the task id may not have
        arrived yet, and the remote task would run on unobserved. Instead the reader keeps
        going (shielded) until the id is known, ``CancelTask`` is sent, and the stream's
        end is awaited, all within ``cancel_timeout``. ``on_task`` is awaited once with
        the task id, as soon as it is known.
        """
        outcome = _Outcome()
        known, done = anyio.Event(), anyio.Event()
        shield = anyio.CancelScope(shield=True)
        errors: list[Exception] = []

        async def read() -> None:
            with shield:
                try:
                    async for response in responses():
                        _apply(response, outcome, on_progress)
                        if outcome.task_id and not known.is_set():
                            if on_task is not None:
                                await on_task(outcome.task_id)
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

    async def _cancel_paused(self, task_id: str) -> None:
        """``CancelTask`` for a task parked in input-required (its decision was a denial)."""
        client = await self._ensure_client()
        with anyio.move_on_after(self.cancel_timeout), contextlib.suppress(Exception):
            await client.cancel_task(CancelTaskRequest(id=task_id))

    def _result(self, outcome: _Outcome) -> tuple[str, list[object]]:
        state = outcome.state
        if state == TaskState.TASK_STATE_COMPLETED:
            return outcome.text, outcome.data
        label = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
        detail = outcome.status_text or "no details"
        if state == TaskState.TASK_STATE_AUTH_REQUIRED:
            raise RemoteAuthRequiredError(
                f"remote agent {self.name!r} stopped task {outcome.task_id!r} in "
                f"TASK_STATE_AUTH_REQUIRED (it needs credentials agentkit cannot give "
                f"inside a task): {detail}",
                task_id=outcome.task_id,
                context_id=outcome.context_id,
            )
        raise RemoteAgentError(
            f"remote agent {self.name!r} ended task {outcome.task_id!r} {label}: {detail}"
        )

    # -- input-required: a pending approval of the outer run ---------------------------
    def _wait(self, outcome: _Outcome) -> NestedWait | None:
        """The outer call's wait when the remote task stopped ``input-required``.

        An agentkit server lists the calls in a ``pendingApprovals`` data part: each is a
        call of the outer run (``outer/<remote call id>``). Any other server asked a
        question: one call named after the agent, its id the task's, its text the input.
        """
        if outcome.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return None
        listed = [
            c
            for d in outcome.status_data
            if isinstance(d, dict)
            for c in d.get("pendingApprovals", [])
            if isinstance(c, dict) and isinstance(c.get("id"), str)
        ]
        calls: list[CallInfo]
        if listed:
            calls = [
                {
                    "id": c["id"],
                    "name": str(c.get("name", "")),
                    "input": dict(c["input"]) if isinstance(c.get("input"), dict) else {},
                }
                for c in listed
            ]
        else:
            question: dict[str, object] = {"question": outcome.status_text}
            asked = tool_name(self.name, "remote_agent")
            calls = [{"id": outcome.task_id, "name": asked, "input": question}]
        state = {
            "a2a": {
                "taskId": outcome.task_id,
                "contextId": outcome.context_id,
                "format": "approvals" if listed else "text",
            }
        }
        return NestedWait(tuple(calls), state)

    async def _decide(
        self, resume: NestedResume, on_progress: Callable[[str, dict[str, object]], object] | None
    ) -> _Outcome | None:
        """Send the decisions of ``resume`` as the next message of the paused remote task.

        Returns the task's new outcome, or None when the outer call itself was denied (the
        remote task is canceled then: its calls never run).

        Raises:
            StateError: for a saved wait that does not name a remote task.
        """
        saved = resume.wait.state.get("a2a")
        if not isinstance(saved, dict) or not isinstance(saved.get("taskId"), str):
            raise StateError(f"the wait of call {resume.call_id!r} names no remote A2A task")
        task_id, context_id = saved["taskId"], str(saved.get("contextId") or "")
        if resume.cancel is not None:
            await self._cancel_paused(task_id)
            return None
        decisions = {k: as_decision(k, v) for k, v in resume.approvals.items()}
        if saved.get("format") == "approvals":
            verdicts = {k: _verdict(d) for k, d in decisions.items()}
            parts = [_data_part({"approvals": verdicts})]
        else:  # a question of another framework's agent: answer it in words
            (decision,) = decisions.values()
            word = "approve" if decision.approved else "deny"
            reason = "" if decision.approved or not decision.reason else f": {decision.reason}"
            parts = [Part(text=word + reason)]
        return await self._send(parts, context_id, task_id, on_progress)

    # -- a handoff target ----------------------------------------------------------------
    async def take_over(
        self,
        history: list[Msg],
        *,
        state: Mapping[str, object] | None,
        resume: NestedResume | None,
        call_id: str,
        emit: Callable[[AgentEvent], None] | None,
    ) -> Msg | NestedWait | None:
        """Answer a conversation handed over to this remote agent (``handoffs=[...]``).

        The history (already through the handoff's ``input_filter``) goes as one text
        part, :func:`history_text`, in the remote context of this conversation's earlier
        handoffs (``state``); status messages stream as progress of the handoff call,
        answer chunks as text.

        Returns:
            The answer (``metadata["handoff_state"]`` is what to pass as ``state`` next
            time), a ``NestedWait`` when the remote task waits for input, or None when the
            handoff call was denied while it waited (the remote task is canceled).

        Raises:
            RemoteAgentError: when the remote task failed, was rejected or canceled.
        """

        def progress(text: str, meta: dict[str, object]) -> None:
            if emit is None:
                return
            if meta.get("a2a") == "artifact":
                emit(TextDelta(text))
            else:
                chunk = ToolResponse.text(
                    text, metadata={"agent": self.name, **meta}, is_last=False
                )
                emit(ToolProgress(call_id, chunk))

        if resume is not None:
            outcome = await self._decide(resume, progress)
            if outcome is None:
                return None
        else:
            context_id = state.get("contextId") if state else None
            text = HANDOFF_HEADER + history_text(history)
            outcome = await self._send(
                [Part(text=text)], context_id if isinstance(context_id, str) else None, "", progress
            )
        wait = self._wait(outcome)
        if wait is not None:
            return wait
        answer, data = self._result(outcome)
        metadata: dict[str, object] = {"handoff_state": {"contextId": outcome.context_id}}
        if data:
            metadata["structured_output"] = data[0] if len(data) == 1 else data
        return Msg(self.name, answer, "assistant", metadata=metadata)

    # -- the agent interface (pipelines, MsgHub) ----------------------------------------
    async def __call__(self, msg: Msg | Sequence[Msg] | str | None = None) -> Msg:
        """Send ``msg`` (its text) and reply with the answer as a ``Msg``.

        As for a ``ReActAgent`` called directly, a remote task that waits for input
        (``TASK_STATE_INPUT_REQUIRED``) does not raise: the reply has
        ``metadata["pending_tool_calls"] = [{"id", "name", "input"}]`` (the calls an
        agentkit server lists, or one call named after the agent, id the task's, input
        ``{"question": ...}`` for another framework's question), and :meth:`resume`
        sends the decisions into that task. While it waits, ``await remote()`` reports
        the same calls again (nothing is sent) and ``await remote(new_msg)`` cancels the
        waiting task (``CancelTask``: its calls never run) before sending ``new_msg``.

        ``pre_reply`` / ``post_reply`` hooks run around it (a ``MsgHub`` broadcasts the
        reply through one). An interrupt (:meth:`interrupt`) cancels the remote task; the
        reply then has ``metadata["interrupted"] = True``.

        Raises:
            RemoteAgentError: when the remote task failed, was rejected or canceled, or
                the server cannot be reached.
            RemoteAuthRequiredError: when the remote task stopped in
                ``TASK_STATE_AUTH_REQUIRED``.
        """
        kwargs: dict[str, object] = {"msg": msg}
        hooks = self._hooks
        if hooks is not None and hooks.has("pre_reply"):
            kwargs = await hooks.run_pre("pre_reply", self, kwargs)
        reply = await self._reply(kwargs.get("msg"))
        if hooks is not None and hooks.has("post_reply"):
            reply = await hooks.run_post("post_reply", self, kwargs, reply)
        return reply

    @property
    def pending_tool_calls(self) -> list[CallInfo]:
        """The calls the remote task waits on (``metadata["pending_tool_calls"]``), if any."""
        paused = self._paused
        return [c.copy() for c in paused[0].calls] if paused is not None else []

    async def resume(self, approvals: Mapping[str, Verdict]) -> Msg:
        """Send decisions for :attr:`pending_tool_calls` into the waiting remote task.

        Each decision is ``True``, ``False``, a denial's reason or a ``Decision`` (its
        ``input`` replaces the call's arguments, for an agentkit server), as for
        ``ReActAgent.resume``. The remote run continues where it paused; calls not
        decided stay pending (an agentkit server answers input-required again).

        Returns:
            The reply, as :meth:`__call__` returns it (possibly waiting again).

        Raises:
            StateError: when no remote task waits for input.
            UsageError: for an id that is not waiting, or a verdict of the wrong type.
            RemoteAgentError: as :meth:`__call__`.
        """
        paused = self._paused
        if paused is None:
            raise StateError(f"remote agent {self.name!r} has no task waiting for input")
        wait, _ = paused
        waiting = {c["id"] for c in wait.calls}
        for call_id, verdict in approvals.items():
            if call_id not in waiting:
                raise UsageError(f"tool call {call_id!r} is not waiting for approval")
            as_decision(call_id, verdict)  # a bad verdict fails before anything is sent
        if not approvals:
            raise UsageError("resume() needs a decision for at least one waiting call")
        return await self._converse(NestedResume("", wait, dict(approvals)))

    async def _reply(self, msg: object) -> Msg:
        if msg is None:
            text = ""
        elif isinstance(msg, str):
            text = msg
        elif isinstance(msg, Msg):
            text = msg.get_text()
        elif isinstance(msg, Sequence):
            text = "\n".join(m.get_text() for m in msg if isinstance(m, Msg))
        else:
            raise UsageError(f"A2AAgent takes a Msg, a list of Msg or a str, not {msg!r}")
        paused = self._paused
        if paused is not None:
            if msg is None:  # as ReActAgent: report the same calls again
                return paused[1]
            # A new message instead of a decision: the waiting task is canceled (its calls
            # never run), so the context is free for the new task.
            self._paused = None
            await self._cancel_paused(str(paused[0].state["a2a"]["taskId"]))
        return await self._converse(text)

    async def _converse(self, what: str | NestedResume) -> Msg:
        """Send a message (or decisions), interruptibly; the reply ``Msg``."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                decided = (
                    await self._ask(what, None)
                    if isinstance(what, str)
                    else await self._decide(what, None)
                )
            finally:
                self._scope = None
        if not isinstance(what, str):
            self._paused = None  # answered (or canceled by the interrupt): no longer waiting
        if scope.cancelled_caught:
            return Msg(self.name, "", "assistant", metadata={"interrupted": True})
        assert decided is not None  # a direct resume never cancels (only a denied outer call)
        outcome = decided
        metadata: dict[str, object] = {"a2a_context_id": outcome.context_id or self.context_id}
        wait = self._wait(outcome)
        if wait is not None:
            metadata["a2a_task_id"] = outcome.task_id
            metadata["pending_tool_calls"] = [dict(c) for c in wait.calls]
            reply = Msg(self.name, outcome.status_text, "assistant", metadata=metadata)
            self._paused = (wait, reply)
            return reply
        answer, data = self._result(outcome)
        if data:
            metadata["structured_output"] = data[0] if len(data) == 1 else data
        return Msg(self.name, answer, "assistant", metadata=metadata)

    async def observe(self, msg: Msg | list[Msg] | None) -> None:
        """Hear messages without replying: they go with the next message, as context.

        A2A has no message that asks for no answer, so what a ``MsgHub`` broadcasts is
        kept here and sent first (one text part, :func:`history_text`) in the next message.
        """
        if msg is None:
            return
        self._heard.extend(msg if isinstance(msg, list) else [msg])

    def register_hook(self, kind: str, name: str, fn: Callable[..., object]) -> None:
        """Register a ``pre_reply`` or ``post_reply`` hook (the only ones a remote agent has).

        Raises:
            UsageError: for another kind (a remote agent's reasoning and acting are remote).
        """
        if kind not in ("pre_reply", "post_reply"):
            raise UsageError(
                f"a remote agent has only pre_reply and post_reply hooks, not {kind!r}"
            )
        super().register_hook(kind, name, fn)

    async def interrupt(self, msg: object = None) -> bool:
        """Cancel the remote task in progress, or the one waiting for input (``CancelTask``).

        Returns:
            False when no task runs and none waits.
        """
        scope, paused = self._scope, self._paused
        if scope is not None:
            scope.cancel()
            return True
        if paused is not None:
            self._paused = None
            await self._cancel_paused(str(paused[0].state["a2a"]["taskId"]))
            return True
        return False

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
        cancels the remote task; a remote task waiting for input makes the call wait for
        approval (nested ids ``"<call id>/<remote id>"``).
        """
        return _RemoteAgentTool(self, name, description, timeout=timeout, answer=self._answer_call)

    async def _answer_call(
        self, task: str, context: ToolContext | None
    ) -> AsyncIterator[ToolResponse]:
        """Answer one call of :meth:`as_tool`'s tool (its ``task``; its ``context``, if any).

        The remote task's progress streams through ``context``; the last response is the
        answer, or one that waits for approval when the remote task waits for input.
        """

        def progress(text: str, meta: dict[str, object]) -> None:
            if context is not None:
                context.emit_progress(text, metadata={"agent": self.name, **meta})

        resume = nested_resume(context.call_id) if context is not None else None
        try:
            if resume is not None:
                outcome = await self._decide(resume, progress)
                if outcome is None:  # the call itself was denied: the remote task is canceled
                    yield denied_response(resume.cancel.reason or False if resume.cancel else False)
                    return
            else:
                outcome = await self._ask(task, progress)
            wait = self._wait(outcome)
            if wait is not None:
                yield self._waiting_response(wait, outcome)
                return
            text, data = self._result(outcome)
        except RemoteAgentError as exc:
            yield ToolResponse.error(str(exc))
            return
        chunks = [text] if text else []
        chunks += [json.dumps(d, ensure_ascii=False) for d in data]
        body = "\n".join(chunks) or f"[{self.name} gave no answer]"
        meta: dict[str, object] = {
            "agent": self.name,
            "a2a_context_id": outcome.context_id,
        }
        if data:
            meta["structured_output"] = data[0] if len(data) == 1 else data
        yield ToolResponse.text(body, metadata=meta)

    def _waiting_response(self, wait: NestedWait, outcome: _Outcome) -> ToolResponse:
        """The final response of a call whose remote task waits for input."""
        names = ", ".join(c["name"] for c in wait.calls)
        detail = f": {outcome.status_text}" if outcome.status_text else ""
        return ToolResponse(
            content=[{"type": "text", "text": f"[{self.name} waits for {names}{detail}]"}],
            metadata={
                "error": NESTED_APPROVAL,
                "agent": self.name,
                **wait.to_dict(),
            },
            is_last=True,
        )


HANDOFF_HEADER = (
    "The conversation below is handed over to you: continue it and answer the user.\n\n"
)
"""The first line of the message a remote handoff target receives (then the history)."""
OBSERVED_HEADER = "Messages of the conversation since your last turn:\n\n"
"""The first line of the part holding what a remote agent observed (``MsgHub``)."""


def history_text(messages: Sequence[Msg]) -> str:
    """The conversation as a remote agent receives it: one line per block.

    ``name (role): text`` for text, ``name called tool(args)`` for a call,
    ``tool returned: text`` for its result; an image, audio or file block is
    ``[image]``/``[audio]``/``[document]``; thinking is private and left out.
    """
    lines: list[str] = []
    for m in messages:
        for block in m.get_content_blocks():
            if block["type"] == "text":
                lines.append(f"{m.name} ({m.role}): {block['text']}")
            elif block["type"] == "tool_use":
                args = json.dumps(block["input"], ensure_ascii=False)
                lines.append(f"{m.name} called {block['name']}({args})")
            elif block["type"] == "tool_result":
                lines.append(f"{block['name']} returned: {_output_text(block['output'])}")
            elif block["type"] in ("image", "audio", "document"):
                lines.append(f"{m.name} ({m.role}): [{block['type']}]")
    return "\n".join(lines)


def _output_text(output: object) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return " ".join(
            b["text"] if b.get("type") == "text" else f"[{b.get('type')}]"
            for b in output
            if isinstance(b, dict)
        )
    return str(output)


def _verdict(decision: Decision) -> object:
    """A decision as the ``approvals`` data part of an agentkit server reads it."""
    if decision.input is not None:
        return {"approved": True, "input": decision.input}
    if decision.approved:
        return True
    return decision.reason or False


def _data_part(value: object) -> Part:
    return Part(data=Parse(json.dumps(value, ensure_ascii=False), struct_pb2.Value()))


def _apply(
    response: StreamResponse,
    outcome: _Outcome,
    on_progress: Callable[[str, dict[str, object]], object] | None,
) -> None:
    kind = response.WhichOneof("payload")
    if kind == "task":
        _take_task(response.task, outcome)
        _stream_artifacts(outcome, on_progress)
    elif kind == "message":  # a message-only answer: no task
        outcome.state = TaskState.TASK_STATE_COMPLETED
        outcome.artifacts["message"] = list(response.message.parts)
        outcome.context_id = response.message.context_id or outcome.context_id
        _stream_artifacts(outcome, on_progress)
    elif kind == "status_update":
        update = response.status_update
        outcome.task_id = update.task_id
        outcome.context_id = update.context_id or outcome.context_id
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
        _stream_artifacts(outcome, on_progress)


def _stream_artifacts(
    outcome: _Outcome, on_progress: Callable[[str, dict[str, object]], object] | None
) -> None:
    """Report the answer text not shown yet, whatever chunking the server chose.

    A server may stream chunks (``append``), end with a chunk of new text or with the
    whole text again (``lastChunk``, no ``append``: nothing new), or send the answer in
    one piece (a task with artifacts): only the text past what was shown is reported. A
    replacement that is not a continuation of what was shown adds nothing (shown text
    cannot be taken back; the final answer is the artifact itself).
    """
    if on_progress is None:
        return
    for artifact_id, parts in outcome.artifacts.items():
        text = "".join(p.text for p in parts if p.text)
        shown = outcome.streamed.get(artifact_id, "")
        if len(text) > len(shown) and text.startswith(shown):
            outcome.streamed[artifact_id] = text
            on_progress(text[len(shown) :], {"a2a": "artifact", "artifact": artifact_id})


_POLL = 0.5
"""Seconds between two ``GetTask`` when a rejoined task cannot be subscribed to."""


async def _rejoin(client: Client, task_id: str) -> AsyncIterator[StreamResponse]:
    """The events of a task sent earlier (a durable step executed again).

    Its state now (``GetTask``), then its stream (``SubscribeToTask``) until it ends or
    pauses. A server that cannot stream it (the task ended meanwhile, another worker runs it) is
    asked again with ``GetTask`` every ``_POLL`` seconds.
    """
    task = await client.get_task(GetTaskRequest(id=task_id))
    yield StreamResponse(task=task)
    while task.status.state not in _TERMINAL | _PAUSED:
        try:
            async for response in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                yield response
            return
        except A2AError:
            await anyio.sleep(_POLL)
            task = await client.get_task(GetTaskRequest(id=task_id))
            yield StreamResponse(task=task)


def _take_task(task: Task, outcome: _Outcome) -> None:
    outcome.task_id = task.id
    outcome.state = task.status.state
    outcome.context_id = task.context_id or outcome.context_id
    if task.artifacts:
        outcome.artifacts = {a.artifact_id: list(a.parts) for a in task.artifacts}
    outcome.status_text, outcome.status_data = _status_text(task.status)


class _RemoteAgentTool(Tool):
    """``A2AAgent.as_tool()``."""

    reports_progress = True  # the remote progress streams live through the ToolContext

    def __init__(
        self,
        agent: A2AAgent,
        name: str | None,
        description: str | None,
        *,
        timeout: float | None,
        answer: Callable[[str, ToolContext | None], AsyncIterator[ToolResponse]],
    ) -> None:
        super().__init__(
            name or tool_name(agent.name, "remote_agent"),
            description
            or agent.description
            or f"Delegate a task to the remote agent {agent.name!r} and get its answer back.",
            TASK_PARAMETERS,
            timeout=timeout,
        )
        self._answer = answer  # the agent answers: it holds the remote task and context

    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Ask the remote agent (no live progress without a context)."""
        return self._answer(str(arguments["task"]), None)

    def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Ask the remote agent, streaming its progress through ``context``.

        A call re-invoked with decisions for the remote task it waits on (a
        ``NestedResume``) sends them to that task instead of asking anew.
        """
        return self._answer(str(arguments.get("task", "")), context)

"""MCP tasks on both sides: SEP-1686 (2025-11-25) and the tasks extension (SEP-2663, 2026-07-28).

2025-11-25: a ``tools/call`` whose params carry ``task: {ttl}`` is answered at once with a
``CreateTaskResult`` (``{"task": {...}}``); the tool runs on, and the client polls
``tasks/get``, fetches the outcome with ``tasks/result``, may stop it with
``tasks/cancel`` and list its tasks with ``tasks/list``. The server may push
``notifications/tasks/status``; agentkit's sends one when a task ends.

2026-07-28 (``io.modelcontextprotocol/tasks``): a client that declares the extension in a
request's capabilities may get a flat ``{"resultType": "task", "taskId", ...}`` answer
(the server decides, per tool); ``tasks/get`` inlines the outcome (``result`` or
``error``), ``tasks/cancel`` and ``tasks/update`` answer an empty ack, and
``tasks/result``/``tasks/list`` are gone. A task's questions wait in ``input_required``
(``inputRequests`` on ``tasks/get``, answered with ``tasks/update``); a call may also ask
first, as plain input rounds, and become a task on the answered retry (``after_input``).

The installed ``mcp`` SDK (2.x) defines the 2025-11-25 task types but dispatches none of
the methods ("tasks/* deliberately absent" in ``mcp_types.methods``), and it validates
every ``tools/call`` answer as a ``CallToolResult``. So the client sends task requests on
the session's JSON-RPC dispatcher (the only SDK path that returns the raw result), and
the server answers a ``tools/call`` that becomes a task in a middleware, before the SDK's
result check.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agentkit._ids import new_id
from agentkit.mcp._convert import result_to_response
from agentkit.mcp._defenses import cap_result
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from mcp import types
    from mcp.client.extension import ClientExtension
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from agentkit.mcp._client import MCPClient
    from agentkit.mcp._connection import Connection

__all__ = [
    "TASKS_EXTENSION",
    "MCPTask",
    "TaskRunner",
    "TaskState",
    "TaskSupport",
    "TaskUpdates",
    "attach_task",
    "call_via_task",
    "requires_tasks",
    "start_task",
]

TaskSupport = Literal["optional", "required", "after_input"]
"""How a served tool runs as a task: ``"optional"`` (either way), ``"required"`` (only as a
task), ``"after_input"`` (listed as required; on 2026-07-28 a call's first round runs in
the request, so its questions go out as synchronous input rounds, and the retry that
brings the answers becomes the task: SEP-2663's MRTR-to-task composition)."""
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
_DEFAULT_POLL = 0.5  # seconds between tasks/get when the server suggests no interval
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"  # SEP-2663, the 2026-07-28 tasks surface
_CANCEL_WAIT = 5.0  # bound on the shielded tasks/cancel sent when the caller is interrupted
_MAX_ROUNDS = 8  # input rounds a tools/call may take before it creates its task


@dataclass(frozen=True)
class TaskState:
    """One snapshot of a task (a ``tasks/get`` answer).

    Attributes:
        task_id: The server's id for the task.
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``.
        status_message: The server's human-readable note, if any.
        poll_interval: Seconds the server suggests between polls, if it said.
        ttl: Seconds the server keeps the task from its creation, if it said.
    """

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    poll_interval: float | None = None
    ttl: float | None = None

    @property
    def done(self) -> bool:
        """Whether the task reached a terminal status."""
        return self.status in TERMINAL


def _state(wire: dict[str, Any]) -> TaskState:
    """A ``Task`` on either wire: 2025-11-25 ``pollInterval`` or 2026-07-28 ``pollIntervalMs``."""
    from agentkit.exceptions import MCPError

    task_id, status = wire.get("taskId"), wire.get("status")
    if not isinstance(task_id, str) or status not in (*TERMINAL, "working", "input_required"):
        raise MCPError(f"MCP server sent a malformed task: {str(wire)[:200]}")
    interval = wire.get("pollIntervalMs", wire.get("pollInterval"))
    ttl = wire.get("ttlMs", wire.get("ttl"))
    message = wire.get("statusMessage")
    return TaskState(
        task_id,
        status,
        message if isinstance(message, str) else None,
        interval / 1000 if isinstance(interval, int | float) and interval > 0 else None,
        ttl / 1000 if isinstance(ttl, int | float) and ttl > 0 else None,
    )


async def _request(
    client: MCPClient, conn: Connection, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Send one task request and return its raw result.

    The SDK checks a ``tools/call`` answer as a ``CallToolResult``, which a created task is
    not, and has no ``tasks/*`` request types for 2026-07-28: so the request goes on the
    session's dispatcher, which returns the raw result (see the module doc). On 2026-07-28
    the request declares the tasks extension, and ``tasks/*`` carry the task id as
    ``Mcp-Name`` (SEP-2663's routing header).

    Raises:
        MCPError: the connection is closed, or the server answered an error.
    """
    from mcp import MCPError as SDKError
    from mcp.shared.inbound import encode_header_value
    from mcp_types import CLIENT_CAPABILITIES_META_KEY

    from agentkit.exceptions import MCPError

    session = conn.client
    if session is None:
        raise MCPError(f"MCP server {client.name!r} closed the task's connection")
    sdk = session.session
    data: dict[str, Any] = {"method": method, "params": params}
    opts: Any = {"timeout": client.timeout} if client.timeout else {}  # CallOptions
    sdk._stamp(data, opts)
    meta = data["params"].get("_meta") or {}
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    if isinstance(capabilities, dict):  # a 2026-07-28 request envelope
        extensions = {**(capabilities.get("extensions") or {}), TASKS_EXTENSION: {}}
        meta[CLIENT_CAPABILITIES_META_KEY] = {**capabilities, "extensions": extensions}
        if method.startswith("tasks/"):
            opts.setdefault("headers", {})["mcp-name"] = encode_header_value(params["taskId"])
    try:
        raw: dict[str, Any] = await sdk._dispatcher.send_raw_request(method, data["params"], opts)
    except SDKError as exc:
        raise MCPError(f"MCP server {client.name!r}: {method} failed: {exc}") from exc
    return raw


def _speaks_modern(conn: Connection) -> bool:
    """Whether ``conn`` negotiated 2026-07-28 (the tasks extension, not SEP-1686)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    session = conn.client
    return session is not None and session.protocol_version in MODERN_PROTOCOL_VERSIONS


class TaskUpdates:
    """The ``notifications/tasks/status`` a server sends (2025-11-25), for waiting tasks.

    SEP-1686 lets a server push a task's new state; a requestor must not rely on it and
    polls ``tasks/get`` anyway. So a waiting :class:`MCPTask` wakes on a notification and
    otherwise polls at the server's interval. Only tracked task ids are kept (those being
    waited on), so a chatty server cannot grow this.

    The SDK surfaces a notification method outside its core tables only through a client
    extension's binding: :meth:`extension` is that extension, a claim-less one
    (``dev.agentkit/task-status``), so servers ignore its entry in the capabilities.
    """

    identifier = "dev.agentkit/task-status"

    def __init__(self) -> None:
        self._latest: dict[str, TaskState] = {}
        self._changed: dict[str, anyio.Event] = {}

    def extension(self) -> ClientExtension:
        """The SDK client extension that hands this the notifications (``Client(extensions=)``)."""
        from mcp.client.extension import ClientExtension, NotificationBinding
        from mcp_types import TaskStatusNotificationParams

        updates = self

        class _Binding(ClientExtension):
            identifier = TaskUpdates.identifier

            def notifications(self) -> list[NotificationBinding[TaskStatusNotificationParams]]:
                return [
                    NotificationBinding(
                        method="notifications/tasks/status",
                        params_type=TaskStatusNotificationParams,
                        handler=updates.receive,
                    )
                ]

        return _Binding()

    async def receive(self, params: types.TaskStatusNotificationParams) -> None:
        """Note one notification (for a tracked task only) and wake its waiter."""
        from agentkit.exceptions import MCPError

        if params.task_id not in self._changed:
            return
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            self._latest[params.task_id] = _state(wire)
        except MCPError:  # a malformed notification: the waiter polls as usual
            return
        self._changed.pop(params.task_id).set()
        self._changed[params.task_id] = anyio.Event()

    def track(self, task_id: str) -> anyio.Event:
        """The event set by the task's next notification (tracking it from now on)."""
        return self._changed.setdefault(task_id, anyio.Event())

    def take(self, task_id: str) -> TaskState | None:
        """The state the last notification carried, if one came since the last take."""
        return self._latest.pop(task_id, None)

    def forget(self, task_id: str) -> None:
        """Stop tracking the task (it ended, or nobody waits on it any more)."""
        self._changed.pop(task_id, None)
        self._latest.pop(task_id, None)


async def _answer(client: MCPClient, conn: Connection, requests: dict[str, Any]) -> dict[str, Any]:
    """The client's answers to a round's ``inputRequests`` (wire JSON), by key.

    Each question goes through the same callbacks as a plain call's input rounds (the
    client's elicitation, sampling and roots handlers), one after another.

    Raises:
        MCPError: a callback declined (or the client has none for that kind of question).
    """
    from mcp import types
    from mcp.client.session import ClientRequestContext

    from agentkit.exceptions import MCPError

    session = conn.client
    if session is None:
        raise MCPError(f"MCP server {client.name!r} closed the task's connection")
    asked = types.InputRequiredResult.model_validate(
        {"resultType": "input_required", "inputRequests": requests}, by_name=False
    )
    answers: dict[str, Any] = {}
    for key, request in (asked.input_requests or {}).items():
        meta = request.params.meta if request.params is not None else None
        context = ClientRequestContext(session=session.session, request_id=key, meta=meta)
        answer = await session.session.dispatch_input_request(context, request)
        if isinstance(answer, types.ErrorData):
            raise MCPError(f"MCP server {client.name!r} asked {key!r}: {answer.message}")
        answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answers


class MCPTask:
    """A tool call running as a task on an MCP server (from ``call_tool_as_task``).

    ``await task.result()`` waits for the outcome (an interrupt while waiting cancels the
    task on the server; the server's questions are answered through the client's
    callbacks; a status notification ends a poll early); ``status()`` polls once;
    ``cancel()`` asks the server to stop it.
    Works on both task surfaces: SEP-1686 (2025-11-25) and the
    ``io.modelcontextprotocol/tasks`` extension (SEP-2663, 2026-07-28).
    """

    def __init__(
        self,
        client: MCPClient,
        conn: Connection,
        tool: str,
        state: TaskState,
        *,
        outcome: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.tool = tool
        self.task_id = state.task_id
        self._conn = conn
        self._last = state
        self._outcome = outcome  # 2026-07-28: the ended task's inlined result or error
        self._asking: dict[str, Any] = {}  # 2026-07-28: the open questions of the last poll

    def __repr__(self) -> str:
        return f"MCPTask({self.tool!r}, id={self.task_id!r}, status={self._last.status!r})"

    async def status(self) -> TaskState:
        """The task's current state (one ``tasks/get``).

        Raises:
            MCPError: the server does not know the task (ended and dropped, or not this
                caller's).
        """
        raw = await _request(self.client, self._conn, "tasks/get", {"taskId": self.task_id})
        self._last = _state(raw)
        if "result" in raw or "error" in raw:
            self._outcome = raw
        asking = raw.get("inputRequests")
        self._asking = asking if isinstance(asking, dict) else {}
        return self._last

    async def cancel(self) -> TaskState:
        """Ask the server to cancel the task (``tasks/cancel``); returns its new state."""
        raw = await _request(self.client, self._conn, "tasks/cancel", {"taskId": self.task_id})
        if "taskId" in raw:  # 2025-11-25 answers the task; 2026-07-28 an empty ack
            self._last = _state(raw)
            return self._last
        return await self.status()

    async def wait(self) -> TaskState:
        """Poll until the task reaches a terminal status (at the server's interval).

        A task that asks the client (``input_required`` with ``inputRequests``, 2026-07-28)
        gets its answers from the client's callbacks through ``tasks/update``.
        """
        updates = self.client.task_updates
        state = self._last
        try:
            while not state.done:
                if state.status == "input_required" and self._asking:
                    answers = await _answer(self.client, self._conn, self._asking)
                    self._asking = {}
                    params = {"taskId": self.task_id, "inputResponses": answers}
                    await _request(self.client, self._conn, "tasks/update", params)
                else:
                    changed = updates.track(self.task_id)
                    with anyio.move_on_after(state.poll_interval or _DEFAULT_POLL):
                        await changed.wait()
                    pushed = updates.take(self.task_id)
                    # The server said: no poll needed, unless the task ended on 2026-07-28,
                    # where the outcome comes inlined in tasks/get.
                    if pushed is not None and not (pushed.done and _speaks_modern(self._conn)):
                        self._last = state = pushed
                        continue
                state = await self.status()
        finally:
            updates.forget(self.task_id)
        return state

    async def result(self) -> ToolResponse:
        """Wait for the task to end and return the tool's response.

        A cancelled or failed task gives an error response. If the caller is cancelled (an
        interrupt) while waiting, ``tasks/cancel`` goes to the server before the
        cancellation goes on.
        """
        from mcp import types

        try:
            state = await self.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
                await self.cancel()
            raise
        meta = {"mcp_server": self.client.name, "mcp_tool": self.tool, "mcp_task": self.task_id}
        if state.status == "cancelled":
            return ToolResponse.error(
                f"MCP task {self.task_id!r} of tool {self.tool!r} was cancelled", metadata=meta
            )
        if _speaks_modern(self._conn) or self._outcome is not None:
            outcome = self._outcome or {}
            error = outcome.get("error")
            if state.status == "failed" or not isinstance(outcome.get("result"), dict):
                text = error.get("message") if isinstance(error, dict) else state.status_message
                return ToolResponse.error(
                    f"MCP task {self.task_id!r} of tool {self.tool!r} failed: {text}",
                    metadata=meta,
                )
            payload = outcome["result"]
        else:
            payload = await _request(
                self.client, self._conn, "tasks/result", {"taskId": self.task_id}
            )
        result = types.CallToolResult.model_validate(payload, by_name=False)
        response = result_to_response(result, self.client.name, self.tool)
        return cap_result(response, self.client.max_result_chars)


async def start_task(
    client: MCPClient,
    name: str,
    arguments: dict[str, object],
    *,
    ttl_ms: int | None = None,
    meta: dict[str, object] | None = None,
) -> MCPTask:
    """Send a ``tools/call`` that asks for a task and return the created task.

    On 2025-11-25 the call carries a ``task`` param (with ``ttl_ms``); on 2026-07-28 it
    declares the tasks extension and the server decides (``ttl_ms`` is not sent: the
    server picks the TTL). A server that answered at once (its choice on 2026-07-28)
    gives a task that has already completed. A call that first asks the client (input
    rounds before the task exists, 2026-07-28) is answered through the client's callbacks.

    Raises:
        MCPError: the server did not create a task (no task support, unknown tool).
    """
    from agentkit.exceptions import MCPError

    conn = await client.live_connection()
    modern = _speaks_modern(conn)
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if not modern:
        params["task"] = {} if ttl_ms is None else {"ttl": ttl_ms}
    if meta:
        params["_meta"] = dict(meta)
    raw = await _request(client, conn, "tools/call", params)
    for _ in range(_MAX_ROUNDS):  # 2026-07-28: questions asked before the task exists
        if not modern or raw.get("resultType") != "input_required":
            break
        answers = await _answer(client, conn, raw.get("inputRequests") or {})
        params = {**params, "inputResponses": answers, "requestState": raw.get("requestState")}
        if params["requestState"] is None:  # this round's state only: none, none sent
            del params["requestState"]
        raw = await _request(client, conn, "tools/call", params)
    if modern and raw.get("resultType") == "task":
        return MCPTask(client, conn, name, _state(raw))
    if not modern and isinstance(raw.get("task"), dict):
        return MCPTask(client, conn, name, _state(raw["task"]))
    if modern and raw.get("resultType", "complete") == "complete" and "content" in raw:
        done = TaskState(new_id("immediate-"), "completed")
        return MCPTask(client, conn, name, done, outcome={"result": raw})
    raise MCPError(f"MCP server {client.name!r} ran {name!r} without creating a task")


async def attach_task(client: MCPClient, task_id: str, tool: str) -> MCPTask:
    """The task ``task_id`` created earlier, polled once (``MCPClient.get_task``)."""
    conn = await client.live_connection()
    task = MCPTask(client, conn, tool, TaskState(task_id, "working"))
    await task.status()
    return task


def requires_tasks(exc: Exception) -> bool:
    """Whether ``exc`` is a 2026-07-28 refusal of a plain call to a tool that needs tasks.

    The server answers ``-32021`` naming the tasks extension before running anything, so
    the call may be sent again as a task.
    """
    from mcp import MCPError as SDKError
    from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY

    if not isinstance(exc, SDKError) or exc.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
        return False
    data = exc.data if isinstance(exc.data, dict) else {}
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


async def call_via_task(
    client: MCPClient, name: str, arguments: dict[str, object], meta: dict[str, object] | None
) -> ToolResponse:
    """A normal tool call carried by a task (for tools whose ``taskSupport`` is required)."""
    from agentkit.exceptions import MCPError

    try:
        task = await start_task(client, name, arguments, meta=meta)
    except MCPError as exc:
        return ToolResponse.error(str(exc), metadata={"mcp_server": client.name, "mcp_tool": name})
    return await task.result()


# -- server side ------------------------------------------------------------------------
MAX_TASKS_PER_OWNER = 64  # tasks one session/principal may hold at once (running or kept)
DEFAULT_TTL_MS = 10 * 60_000  # kept this long when the request names no TTL
MAX_TTL_MS = 60 * 60_000  # a requested TTL is capped here: tasks are held in memory
_SESSION_KEY = "agentkit.mcp.tasks.session"  # in the SDK connection's per-connection state
_NOTIFY_WAIT = 5.0  # bound on sending one task status notification
_log = logging.getLogger("agentkit.mcp.tasks")

Owner = tuple[str | None, str | None]  # (authenticated principal, session), None: absent


@dataclass
class _ServedTask:
    task_id: str
    owner: Owner
    modern: bool  # created on 2026-07-28 (SEP-2663 wire) rather than 2025-11-25 (SEP-1686)
    ttl_ms: int
    created: str
    life: anyio.CancelScope  # the task's whole retention: its deadline is the TTL
    status: TaskStatus = "working"
    message: str | None = None
    updated: str = ""
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # a protocol-level failure (2026-07-28 ``failed``)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)  # the tool's run
    # 2026-07-28 input rounds: the questions still open (wire JSON), the answers so far,
    # the round's state, and the event that the last open question was answered
    asking: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    round_state: str | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)

    def wire(self, *, detailed: bool = False) -> dict[str, Any]:
        if self.modern:
            out: dict[str, Any] = {
                "taskId": self.task_id,
                "status": self.status,
                "createdAt": self.created,
                "lastUpdatedAt": self.updated or self.created,
                "ttlMs": self.ttl_ms,
                "pollIntervalMs": TaskRunner.poll_interval_ms,
            }
            if detailed and self.status == "completed" and self.result is not None:
                out["result"] = self.result
            if detailed and self.status == "failed" and self.error is not None:
                out["error"] = self.error
            if detailed and self.status == "input_required":
                out["inputRequests"] = dict(self.asking)
        else:
            out = {
                "taskId": self.task_id,
                "status": self.status,
                "createdAt": self.created,
                "lastUpdatedAt": self.updated or self.created,
                "ttl": self.ttl_ms,
                "pollInterval": TaskRunner.poll_interval_ms,
            }
        if self.message is not None:
            out["statusMessage"] = self.message
        return out


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _modern(ctx: ServerRequestContext) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _principal(ctx: ServerRequestContext) -> str | None:
    """Who is calling: the SDK's authenticated (client, issuer, subject), else the bearer.

    Behind agentkit's own ``BearerTokenMiddleware`` (one shared token) there is no
    per-user identity, so the token's digest stands for the principal.
    """
    from mcp.server.request_state import authenticated_principal

    principal = authenticated_principal(ctx)
    if principal is not None:
        return principal
    headers = getattr(ctx.request, "headers", None)
    authorization = headers.get("authorization") if headers is not None else None
    if authorization:
        return "bearer:" + hashlib.sha256(str(authorization).encode()).hexdigest()
    return None


def _declares_tasks(ctx: ServerRequestContext) -> bool:
    """Whether this request's client declared the tasks extension (2026-07-28)."""
    caps = ctx.session.client_capabilities
    return caps is not None and TASKS_EXTENSION in (caps.extensions or {})


def _missing_extension() -> Exception:
    from mcp import MCPError
    from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY

    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"this request needs the {TASKS_EXTENSION} extension",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


async def _announce(task: _ServedTask, ctx: ServerRequestContext) -> None:
    """Send ``notifications/tasks/status`` for the task's new status (2025-11-25).

    To the session that created the task (the only one that may see it), on its standalone
    channel: the ``tools/call`` that created it was answered long ago. The notification is
    optional (a client must poll anyway), so a session that cannot take it is not waited
    on. 2026-07-28 delivers task status on ``subscriptions/listen``, which the SDK's event
    bus does not carry yet: clients there poll.
    """
    # The lowlevel request context reaches its SDK ``Connection`` only through the session
    # proxy (as in ``TaskRunner._session``); ``Connection.outbound`` is its public channel.
    connection = getattr(ctx.session, "_connection", None)
    outbound = getattr(connection, "outbound", None)
    if outbound is None:
        return
    with anyio.move_on_after(_NOTIFY_WAIT):
        try:
            await outbound.notify("notifications/tasks/status", task.wire())
        except Exception as exc:  # a closed or notification-less session: it polls
            _log.debug("notifications/tasks/status for %s not sent: %r", task.task_id, exc)


def _unknown(task_id: object) -> Exception:
    from mcp import MCPError

    # One answer for a missing task and another caller's task alike (no existence oracle).
    return MCPError(code=-32602, message=f"Unknown task: {task_id}")


class TaskRunner:
    """Runs a served app's task-augmented tool calls and answers ``tasks/*``.

    Both task surfaces: SEP-1686 on the handshake era (2025-11-25: the client asks with a
    ``task`` param, ``tasks/get``/``result``/``cancel``/``list``) and the
    ``io.modelcontextprotocol/tasks`` extension (SEP-2663) on 2026-07-28 (the server
    creates tasks for clients that declare the extension, ``tasks/get`` inlines the
    outcome, ``tasks/cancel`` and ``tasks/update`` answer an empty ack).

    A task belongs to the authenticated principal and the session that created it (the
    session only on the handshake era: 2026-07-28 has none). Any other caller is answered
    exactly as for an unknown id. Each owner holds at most ``MAX_TASKS_PER_OWNER`` tasks;
    each is kept for its TTL (the request's, capped at ``MAX_TTL_MS``) and dropped, and
    cancelled if still running, when that ends or its session closes.

    Tasks live in a task group held by the server's lifespan, so they outlive the
    ``tools/call`` request that created them and end with the server.
    """

    poll_interval_ms = 100

    def __init__(
        self,
        run: Callable[
            [ServerRequestContext, Any],
            Awaitable[types.CallToolResult | types.InputRequiredResult],
        ],
    ) -> None:
        self._run = run
        self._tasks: dict[str, _ServedTask] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._is_task_tool: Callable[[str], str | None] = lambda _name: None

    @asynccontextmanager
    async def lifespan(self, _server: object) -> AsyncIterator[dict[str, Any]]:
        """The Server lifespan: holds the task group the tasks run in."""
        if self._tg is not None:  # another connection of this server (stdio, in-process)
            yield {}
            return
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield {}
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def install(self, server: Any, task_support: Callable[[str], str | None]) -> None:
        """Register ``tasks/*`` on ``server`` and the middleware for task-augmented calls."""
        from mcp import types

        self._is_task_tool = task_support
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.cancel)
        server.add_request_handler("tasks/update", types.GetTaskRequestParams, self.update)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.list)
        server.middleware.append(self.middleware)

    # -- ownership ----------------------------------------------------------------------
    def _owner(self, ctx: ServerRequestContext) -> Owner:
        return (_principal(ctx), None if _modern(ctx) else self._session(ctx))

    def _session(self, ctx: ServerRequestContext) -> str:
        """The handshake-era connection's key, minted once; its close drops its tasks.

        The lowlevel request context reaches its SDK ``Connection`` only through the
        session proxy (the SDK's high-level ``Context.connection`` exposes the same
        object); the connection's ``state`` and ``exit_stack`` are its public per-connection
        storage and teardown.
        """
        connection = getattr(ctx.session, "_connection", None)
        if connection is None:  # no per-connection state: one connection per process
            return "connection"
        key = connection.state.get(_SESSION_KEY)
        if key is None:
            key = connection.state[_SESSION_KEY] = new_id()
            connection.exit_stack.push_async_callback(self._end_session, key)
        return str(key)

    async def _end_session(self, key: str) -> None:
        for task in [t for t in self._tasks.values() if t.owner[1] == key]:
            self._drop(task)

    def _drop(self, task: _ServedTask) -> None:
        """Forget ``task`` now and stop it (its runner then ends)."""
        self._tasks.pop(task.task_id, None)
        task.life.cancel()

    def _find(self, ctx: ServerRequestContext, task_id: str) -> _ServedTask:
        task = self._tasks.get(task_id)
        if task is None or task.owner != self._owner(ctx):
            raise _unknown(task_id)
        return task

    def _admit(self, owner: Owner) -> None:
        """Make room for one more task of ``owner``: drop its oldest ended one, or refuse."""
        from mcp import MCPError

        mine = [t for t in self._tasks.values() if t.owner == owner]
        if len(mine) < MAX_TASKS_PER_OWNER:
            return
        ended = [t for t in mine if t.status in TERMINAL]
        if not ended:
            raise MCPError(
                code=-32600,
                message=f"too many tasks running ({MAX_TASKS_PER_OWNER}): wait for one to "
                "end or cancel one",
            )
        self._drop(ended[0])  # dicts keep insertion order: the oldest first

    # -- creation -----------------------------------------------------------------------
    async def middleware(self, ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        """Answer a ``tools/call`` that becomes a task with the created task."""
        from mcp import MCPError, types

        params = ctx.params or {}
        if ctx.method != "tools/call":
            return await call_next(ctx)
        name = params.get("name")
        support = self._is_task_tool(name) if isinstance(name, str) else None
        if _modern(ctx):
            # SEP-2663: the server decides; a v1 ``task`` hint is tolerated and ignored.
            if support is None:
                return await call_next(ctx)
            if not _declares_tasks(ctx):
                if support != "optional":
                    raise _missing_extension()
                return await call_next(ctx)  # optional: runs as a plain call
            if support == "after_input" and not params.get("inputResponses"):
                # The first round asks its questions synchronously (an InputRequiredResult
                # with no task); one that asks nothing answers at once (SEP-2663 allows it).
                first = types.CallToolRequestParams.model_validate(params, by_name=False)
                return await self._run(ctx, first)
            requested = None
        else:
            if "task" not in params:
                return await call_next(ctx)
            if support is None:
                raise MCPError(code=-32602, message=f"Tool {name!r} does not support tasks")
            hint = params.get("task")
            requested = hint.get("ttl") if isinstance(hint, dict) else None
        typed = types.CallToolRequestParams.model_validate(params, by_name=False)
        if self._tg is None:
            raise MCPError(code=-32603, message="the server is shutting down")
        owner = self._owner(ctx)
        self._admit(owner)
        ttl = DEFAULT_TTL_MS
        if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
            ttl = min(requested, MAX_TTL_MS)
        life = anyio.CancelScope(deadline=anyio.current_time() + ttl / 1000)
        task = _ServedTask(new_id(), owner, _modern(ctx), ttl, _now(), life)
        self._tasks[task.task_id] = task  # before the answer: tasks/get resolves at once
        self._tg.start_soon(self._live, task, ctx, typed)
        if task.modern:
            return {"resultType": "task", **task.wire()}
        return {"task": task.wire()}

    async def _live(
        self, task: _ServedTask, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> None:
        """Run the task, then keep it until its TTL ends (or its session closes)."""
        try:
            with task.life:
                await self._execute(task, ctx, params)
                if not task.modern:
                    await _announce(task, ctx)
                await anyio.sleep_forever()
        finally:
            if self._tasks.get(task.task_id) is task:
                del self._tasks[task.task_id]

    async def _execute(
        self, task: _ServedTask, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> None:
        from mcp import MCPError

        try:
            with task.scope:
                result = await self._rounds(task, ctx, params)
                task.result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                # 2026-07-28: a tool error is a completed task whose result says isError
                # ("failed" is kept for protocol errors); 2025-11-25 calls it failed.
                task.status = "failed" if result.is_error and not task.modern else "completed"
        except MCPError as exc:  # a protocol-level failure of the call
            task.status, task.message = "failed", exc.error.message
            task.error = exc.error.model_dump(mode="json", exclude_none=True)
            text = exc.error.message
            task.result = {"content": [{"type": "text", "text": text}], "isError": True}
        except Exception as exc:  # the tool's own failure: the task failed, the server lives
            task.status, task.message = "failed", f"{type(exc).__name__}: {exc}"
            task.error = {"code": -32603, "message": task.message}
            task.result = {"content": [{"type": "text", "text": task.message}], "isError": True}
        finally:
            if task.scope.cancelled_caught or task.status == "working":
                task.status, task.result, task.error = "cancelled", None, None
            task.updated = _now()
            task.done.set()

    async def _rounds(
        self, task: _ServedTask, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Run the call; while it asks the client, park in ``input_required`` for answers."""
        from mcp import types

        while True:
            result = await self._run(ctx, params)
            if isinstance(result, types.CallToolResult):
                return result
            if not task.modern:  # 2025-11-25 tasks have no input rounds: it asks mid-call
                text = "the tool asked for input a 2025-11-25 task cannot carry"
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=text)], is_error=True
                )
            task.asking = {
                key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
                for key, request in (result.input_requests or {}).items()
            }
            task.answers, task.round_state = {}, result.request_state
            task.answered = anyio.Event()
            task.status, task.updated = "input_required", _now()
            await task.answered.wait()
            params = params.model_copy(
                update={
                    "input_responses": task.answers,
                    "request_state": task.round_state,
                }
            )
            task.status, task.updated = "working", _now()

    # -- tasks/* --------------------------------------------------------------------------
    def _check_modern(self, ctx: ServerRequestContext, task_id: object) -> None:
        """2026-07-28 gates: the extension declared, ``Mcp-Name`` equal to the task id."""
        from mcp import MCPError
        from mcp.shared.inbound import decode_header_value
        from mcp_types import HEADER_MISMATCH

        if not _declares_tasks(ctx):
            raise _missing_extension()
        headers = getattr(ctx.request, "headers", None)
        if headers is not None and decode_header_value(headers.get("mcp-name")) != task_id:
            raise MCPError(
                code=HEADER_MISMATCH,
                message="Mcp-Name header does not match the request body's 'taskId' parameter",
            )

    async def get(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/get`` (on 2026-07-28 with the outcome inlined once the task ended)."""
        if _modern(ctx):
            self._check_modern(ctx, params.task_id)
            return {"resultType": "complete", **self._find(ctx, params.task_id).wire(detailed=True)}
        return self._find(ctx, params.task_id).wire()

    async def result(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/result`` (2025-11-25): blocks until the task ends, then its result."""
        from mcp import MCPError

        if _modern(ctx):
            raise MCPError(code=-32601, message="Method not found: tasks/result")
        task = self._find(ctx, params.task_id)
        await task.done.wait()
        if task.result is None:
            raise MCPError(code=-32602, message=f"Task {task.task_id} was cancelled")
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.task_id}}
        return {**task.result, "_meta": related}

    async def cancel(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/cancel``: stops a running task.

        2025-11-25 answers the task (an ended one cannot be cancelled); 2026-07-28 answers
        an empty ack, the same for an ended task.
        """
        from mcp import MCPError

        modern = _modern(ctx)
        if modern:
            self._check_modern(ctx, params.task_id)
        task = self._find(ctx, params.task_id)
        if task.status in TERMINAL:
            if modern:
                return {"resultType": "complete"}
            raise MCPError(code=-32602, message=f"Task {task.task_id} already {task.status}")
        task.scope.cancel()
        await task.done.wait()
        return {"resultType": "complete"} if modern else task.wire()

    async def update(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/update`` (2026-07-28): answers to a task's open questions.

        Answers may come a few at a time; an answered key leaves ``inputRequests``, and the
        task resumes once none is open. Answers to keys not asked are ignored. A bad answer
        refuses the whole update (-32602) and changes nothing.
        """
        from mcp import MCPError, types
        from pydantic import ValidationError

        if not _modern(ctx):
            raise MCPError(code=-32601, message="Method not found: tasks/update")
        self._check_modern(ctx, params.task_id)
        task = self._find(ctx, params.task_id)
        given = (ctx.params or {}).get("inputResponses")
        if not isinstance(given, dict):
            raise MCPError(code=-32602, message="inputResponses must be a map of answers")
        if task.status == "input_required":
            # answers to something not asked (now) are ignored
            mine = {key: answer for key, answer in given.items() if key in task.asking}
            try:
                typed = types.InputResponseRequestParams.model_validate(
                    {"inputResponses": mine}, by_name=False
                )
            except ValidationError:
                raise MCPError(code=-32602, message="inputResponses holds a bad answer") from None
            for key, answer in (typed.input_responses or {}).items():
                del task.asking[key]
                task.answers[key] = answer
            task.updated = _now()
            if not task.asking:
                task.answered.set()
        return {"resultType": "complete"}

    async def list(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/list`` (2025-11-25; one page: the caller's own tasks)."""
        from mcp import MCPError

        if _modern(ctx):
            raise MCPError(code=-32601, message="Method not found: tasks/list")
        owner = self._owner(ctx)
        return {"tasks": [t.wire() for t in self._tasks.values() if t.owner == owner]}

"""MCP tasks (SEP-1686, protocol 2025-11-25) on both sides.

A task-augmented ``tools/call`` (params carry ``task: {ttl}``) is answered at once with a
``CreateTaskResult``; the tool runs on, and the client polls ``tasks/get``, fetches the
outcome with ``tasks/result`` and may stop it with ``tasks/cancel``.

The installed ``mcp`` SDK (2.x) defines the task types but dispatches none of the methods
("tasks/* deliberately absent" in ``mcp_types.methods``), and it validates every
``tools/call`` answer as a ``CallToolResult``. So the client sends the one task-augmented
``tools/call`` on the session's JSON-RPC dispatcher (the only SDK path that does not force
that validation), the ``tasks/*`` requests as ordinary custom requests, and the server
answers a task-augmented ``tools/call`` in a middleware, before the SDK's result check.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agentkit.mcp._convert import result_to_response
from agentkit.mcp._defenses import cap_result
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from agentkit.mcp._client import MCPClient
    from agentkit.mcp._connection import Connection

__all__ = ["MCPTask", "TaskRunner", "TaskState", "TaskSupport", "start_task"]

TaskSupport = Literal["optional", "required"]
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
_DEFAULT_POLL = 0.5  # seconds between tasks/get when the server suggests no interval
_CANCEL_WAIT = 5.0  # bound on the shielded tasks/cancel sent when the caller is interrupted


@dataclass(frozen=True)
class TaskState:
    """One snapshot of a task (a ``tasks/get`` answer).

    Attributes:
        task_id: The server's id for the task.
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``.
        status_message: The server's human-readable note, if any.
        poll_interval: Seconds the server suggests between polls, if it said.
    """

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    poll_interval: float | None = None

    @property
    def done(self) -> bool:
        """Whether the task reached a terminal status."""
        return self.status in TERMINAL


def _state(task: types.Task) -> TaskState:
    interval = task.poll_interval / 1000 if task.poll_interval is not None else None
    return TaskState(task.task_id, task.status, task.status_message, interval)


class MCPTask:
    """A tool call running as a task on an MCP server (from ``call_tool_as_task``).

    ``await task.result()`` waits for the outcome (an interrupt while waiting cancels the
    task on the server); ``status()`` polls once; ``cancel()`` asks the server to stop it.
    """

    def __init__(self, client: MCPClient, conn: Connection, tool: str, state: TaskState) -> None:
        self.client = client
        self.tool = tool
        self.task_id = state.task_id
        self._conn = conn
        self._last = state

    def __repr__(self) -> str:
        return f"MCPTask({self.tool!r}, id={self.task_id!r}, status={self._last.status!r})"

    async def _send(self, request: Any, result_type: Any) -> Any:
        session = self._conn.client
        if session is None:
            from agentkit.exceptions import MCPError

            raise MCPError(f"MCP server {self.client.name!r} closed the task's connection")
        return await session.session.send_request(
            request, result_type, request_read_timeout_seconds=self.client.timeout
        )

    async def status(self) -> TaskState:
        """The task's current state (one ``tasks/get``)."""
        from mcp import types

        params = types.GetTaskRequestParams(task_id=self.task_id)
        self._last = _state(
            await self._send(types.GetTaskRequest(params=params), types.GetTaskResult)
        )
        return self._last

    async def cancel(self) -> TaskState:
        """Ask the server to cancel the task (``tasks/cancel``); returns its new state."""
        from mcp import types

        params = types.CancelTaskRequestParams(task_id=self.task_id)
        self._last = _state(
            await self._send(types.CancelTaskRequest(params=params), types.CancelTaskResult)
        )
        return self._last

    async def wait(self) -> TaskState:
        """Poll until the task reaches a terminal status (at the server's interval)."""
        state = self._last
        while not state.done:
            await anyio.sleep(state.poll_interval or _DEFAULT_POLL)
            state = await self.status()
        return state

    async def result(self) -> ToolResponse:
        """Wait for the task to end and return the tool's response.

        A cancelled task gives an error response. If the caller is cancelled (an interrupt)
        while waiting, ``tasks/cancel`` goes to the server before the cancellation goes on.
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
        params = types.GetTaskPayloadRequestParams(task_id=self.task_id)
        result = await self._send(types.GetTaskPayloadRequest(params=params), types.CallToolResult)
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
    """Send a task-augmented ``tools/call`` and return the created task.

    Raises:
        MCPError: the server did not create a task (no task support, unknown tool).
    """
    from mcp import MCPError as SDKError
    from mcp import types

    from agentkit.exceptions import MCPError

    conn = await client.live_connection()
    session = conn.client
    assert session is not None
    params: dict[str, Any] = {"name": name, "arguments": arguments, "task": {}}
    if ttl_ms is not None:
        params["task"]["ttl"] = ttl_ms
    if meta:
        params["_meta"] = dict(meta)
    # The SDK checks a tools/call answer as a CallToolResult, which a CreateTaskResult is
    # not: send it on the dispatcher, which returns the raw result (see the module doc).
    sdk = session.session
    data: dict[str, Any] = {"method": "tools/call", "params": params}
    opts: Any = {"timeout": client.timeout} if client.timeout else {}  # CallOptions
    sdk._stamp(data, opts)
    try:
        raw = await sdk._dispatcher.send_raw_request("tools/call", data["params"], opts)
    except SDKError as exc:
        raise MCPError(f"MCP server {client.name!r} refused task for {name!r}: {exc}") from exc
    if "task" not in raw:
        raise MCPError(f"MCP server {client.name!r} ran {name!r} without creating a task")
    created = types.CreateTaskResult.model_validate(raw, by_name=False)
    return MCPTask(client, conn, name, _state(created.task))


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
@dataclass
class _ServedTask:
    task_id: str
    ttl: int | None
    created: str
    status: TaskStatus = "working"
    message: str | None = None
    updated: str = ""
    result: dict[str, Any] | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated or self.created,
            "ttl": self.ttl,
            "pollInterval": TaskRunner.poll_interval_ms,
        }
        if self.message is not None:
            out["statusMessage"] = self.message
        return out


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class TaskRunner:
    """Runs a served app's task-augmented tool calls and answers ``tasks/*``.

    Tasks live in a task group held by the server's lifespan, so they outlive the
    ``tools/call`` request that created them and end with the server.
    """

    poll_interval_ms = 100

    def __init__(
        self, run: Callable[[ServerRequestContext, Any], Awaitable[types.CallToolResult]]
    ) -> None:
        self._run = run
        self._tasks: dict[str, _ServedTask] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def lifespan(self, _server: object) -> AsyncIterator[dict[str, Any]]:
        """The Server lifespan: holds the task group the tasks run in."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield {}
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def install(self, server: Any, is_task_tool: Callable[[str], bool]) -> None:
        """Register ``tasks/*`` on ``server`` and the middleware for task-augmented calls."""
        from mcp import types

        self._is_task_tool = is_task_tool
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.cancel)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.list)
        server.middleware.append(self.middleware)

    async def middleware(self, ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        """Answer a task-augmented ``tools/call`` of a task tool with a created task."""
        from mcp import MCPError, types

        params = ctx.params or {}
        if ctx.method != "tools/call" or "task" not in params:
            return await call_next(ctx)
        name = params.get("name")
        if not isinstance(name, str) or not self._is_task_tool(name):
            raise MCPError(code=-32602, message=f"Tool {name!r} does not support tasks")
        typed = types.CallToolRequestParams.model_validate(params, by_name=False)
        if self._tg is None:
            raise MCPError(code=-32603, message="the server is shutting down")
        ttl = typed.task.ttl if typed.task is not None else None
        task = _ServedTask(uuid.uuid4().hex, ttl, _now())
        self._tasks[task.task_id] = task
        self._tg.start_soon(self._execute, task, ctx, typed)
        return {"task": task.wire()}

    async def _execute(
        self, task: _ServedTask, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> None:
        try:
            with task.scope:
                result = await self._run(ctx, params)
                task.result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                task.status = "failed" if result.is_error else "completed"
        except Exception as exc:  # the tool's own failure: the task failed, the server lives
            task.status, task.message = "failed", f"{type(exc).__name__}: {exc}"
            task.result = {"content": [{"type": "text", "text": task.message}], "isError": True}
        finally:
            if task.scope.cancelled_caught or task.status == "working":
                task.status = "cancelled"
            task.updated = _now()
            task.done.set()

    def _find(self, task_id: str) -> _ServedTask:
        from mcp import MCPError

        task = self._tasks.get(task_id)
        if task is None:
            raise MCPError(code=-32602, message=f"Unknown task: {task_id}")
        return task

    async def get(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/get``."""
        return self._find(params.task_id).wire()

    async def result(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/result``: blocks until the task ends, then its ``CallToolResult``."""
        from mcp import MCPError

        task = self._find(params.task_id)
        await task.done.wait()
        if task.result is None:
            raise MCPError(code=-32602, message=f"Task {task.task_id} was cancelled")
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.task_id}}
        return {**task.result, "_meta": related}

    async def cancel(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/cancel``: stops a running task (an ended one cannot be cancelled)."""
        from mcp import MCPError

        task = self._find(params.task_id)
        if task.status in TERMINAL:
            raise MCPError(code=-32602, message=f"Task {task.task_id} already {task.status}")
        task.scope.cancel()
        await task.done.wait()
        return task.wire()

    async def list(self, ctx: ServerRequestContext, params: Any) -> dict[str, Any]:
        """``tasks/list`` (one page: every task of this server)."""
        return {"tasks": [t.wire() for t in self._tasks.values()]}

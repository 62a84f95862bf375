"""MCP Apps in the web chat: a trusted server's ``ui://`` UI in a sandboxed frame.

A tool of an MCP server registered with ``trust="trusted"`` that declares
``_meta.ui.resourceUri`` gets its UI rendered under its result. The page (static/apps.js)
speaks the host side of the ext-apps postMessage protocol; these endpoints give it the
frame's document and run the frame's ``tools/call`` requests:

* ``GET /apps``: the names of the tools with an app (behind the token).
* ``POST /threads/{id}/apps`` ``{"toolCallId", "toolName"}``: read the tool's ``ui://``
  resource from its server; answers ``{"session", "frame"}``. The session is a random
  capability naming owner, thread and server; it lives for :data:`SESSION_SECONDS`.
* ``GET /apps/frame/{session}``: the app's HTML with its own strict CSP (``sandbox
  allow-scripts``, no network, inline script and style only). A frame cannot send the bearer
  token, so the unguessable session id is what admits it.
* ``POST /apps/{session}/calls`` ``{"name", "arguments"}``: the frame's ``tools/call``, for a
  tool of the same server, under the approval rules of the model's calls (the tool's
  ``requires_approval_in`` the thread's toolkit, then the agent's ``approval_policy``). It
  answers ``{"status": "done", "toolCallId", "result"}`` or ``{"status":
  "approval_required", "toolCallId"}``; the page then shows Approve/Deny and sends
  ``POST /apps/{session}/calls/{toolCallId}`` ``{"approved": bool}``. A call that ran is
  recorded in the thread (a ``tool_use`` and its ``tool_result``, ``metadata["mcp_app"]``).
  Calls are rate-limited per session (:data:`BURST` at once, :data:`PER_SECOND` a second
  after that): over it, ``429 app_rate_limited``.
"""

from __future__ import annotations

import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit.exceptions import MCPError, SessionConflictError
from agentkit.messages import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from agentkit.serve._convert import ClientInputError, check_client_id
from agentkit.serve._http import read_json
from agentkit.serve._ownership import live_lease
from agentkit.serve._threads import ThreadRecord, ThreadStore

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.mcp._tool import MCPTool
    from agentkit.tools._response import ToolResponse

__all__ = ["APP_ROUTES", "BURST", "PER_SECOND", "SESSION_SECONDS", "AppSessions"]

SESSION_SECONDS = 3600.0  # how long a rendered app may call tools
MAX_SESSIONS = 512  # the oldest sessions are forgotten beyond this (their frames go inert)
BURST = 10  # tool calls an app may make at once ...
PER_SECOND = 2.0  # ... and then this many a second
# The frame's own policy: its inline script and style run, nothing is fetched or framed,
# and the response itself demands the sandbox (also when opened outside the page).
FRAME_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; media-src data: blob:; connect-src 'none'; "
    "frame-src 'none'; worker-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self'; sandbox allow-scripts"
)


@dataclass
class AppSession:
    """One rendered app: whose, in which thread, from which server; its call budget."""

    owner: str
    thread_id: str
    server: str
    html: str
    expires: float
    refilled: float
    tokens: float = BURST
    pending: dict[str, ToolUseBlock] = field(default_factory=dict)
    # One call of an app at a time: each is recorded in the thread by a versioned save.
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def take(self, now: float) -> None:
        """Spend one call of the budget, or refuse it (429) when the app called too often."""
        self.tokens = min(BURST, self.tokens + (now - self.refilled) * PER_SECOND)
        self.refilled = now
        if self.tokens < 1:
            wait = math.ceil((1 - self.tokens) / PER_SECOND)
            raise ClientInputError(
                429,
                "app_rate_limited",
                f"the app of MCP server {self.server!r} made too many tool calls (at most "
                f"{BURST} at once, then {PER_SECOND:g} a second); retry in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        self.tokens -= 1


class AppSessions:
    """The worker's rendered apps, by session id.

    In memory: a frame is served by the worker that rendered it (see docs/serving.md).

    Args:
        clock: Seconds, monotonic: session expiry and the calls' rate limit run on it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.sessions: OrderedDict[str, AppSession] = OrderedDict()

    def add(self, session: AppSession) -> str:
        """Keep ``session``; its new random id."""
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = session
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return sid

    def get(self, sid: str) -> AppSession:
        """The live session ``sid`` (404 when unknown or expired)."""
        session = self.sessions.get(sid)
        if session is None or session.expires < self.clock():
            self.sessions.pop(sid, None)
            raise ClientInputError(404, "unknown_app", "there is no such app (or it expired)")
        return session


def _serve(request: Request) -> Any:
    return request.app.state.serve


def _sessions(request: Request) -> AppSessions:
    sessions: AppSessions = request.app.state.mcp_apps
    return sessions


def _owner(request: Request) -> str:
    state = _serve(request)
    state.guard.check_host(request)
    owner, user = state.guard.owner(request)
    request.state.owner = owner
    request.state.user = user
    return str(owner)


def _trusted_app(tool: object) -> tuple[MCPTool, str] | None:
    """``(tool, ui:// uri)`` for a trusted server's tool with an app, else None."""
    from agentkit.mcp._ui import ui_resource_uri

    uri = ui_resource_uri(tool)  # type: ignore[arg-type]
    if uri is None:
        return None
    mcp_tool: MCPTool = tool  # type: ignore[assignment]
    if mcp_tool.client.trust != "trusted":
        return None  # an untrusted server's UI is never rendered
    return mcp_tool, uri


async def list_apps(request: Request) -> Response:
    """``GET /apps``: the tools whose results the page renders an app for."""
    _owner(request)
    agent = await _serve(request).new_agent()
    names = sorted(n for n, t in agent.toolkit.tools.items() if _trusted_app(t) is not None)
    return JSONResponse({"tools": names})


async def open_app(request: Request) -> Response:
    """``POST /threads/{id}/apps``: render the app of a tool call's tool (a new session)."""
    from agentkit.mcp._ui import read_ui_resource

    owner = _owner(request)
    state = _serve(request)
    thread_id = check_client_id(request.path_params["thread_id"], "the thread id")
    data = await read_json(request, state.max_body)
    name = data.get("toolName") if isinstance(data, dict) else None
    if not isinstance(name, str):
        raise ClientInputError(400, "bad_request", 'the body must be {"toolName": "<tool>"}')
    if await state.store.load(owner, thread_id) is None:
        raise ClientInputError(404, "unknown_thread", f"there is no thread {thread_id!r}")
    agent = await state.new_agent()
    found = _trusted_app(agent.toolkit.get_tool(name))
    if found is None:
        raise ClientInputError(
            404, "no_app", f"tool {name!r} has no app of a trusted MCP server to render"
        )
    tool, uri = found
    try:
        resource = await read_ui_resource(tool, uri)
    except MCPError as exc:
        raise ClientInputError(502, "app_unavailable", str(exc)) from exc
    sessions = _sessions(request)
    now = sessions.clock()
    server = tool.client.name
    session = AppSession(owner, thread_id, server, resource.html, now + SESSION_SECONDS, now)
    sid = sessions.add(session)
    return JSONResponse({"session": sid, "frame": f"apps/frame/{sid}", "server": tool.client.name})


async def frame(request: Request) -> Response:
    """``GET /apps/frame/{session}``: the app's document, sandboxed by its own CSP."""
    _serve(request).guard.check_host(request)
    session = _sessions(request).get(request.path_params["session"])
    headers = {
        "Content-Security-Policy": FRAME_CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "Cross-Origin-Resource-Policy": "same-origin",
    }
    return Response(session.html, media_type="text/html; charset=utf-8", headers=headers)


def _owned(request: Request) -> AppSession:
    owner = _owner(request)
    session = _sessions(request).get(request.path_params["session"])
    if session.owner != owner:
        raise ClientInputError(404, "unknown_app", "there is no such app (or it expired)")
    return session


async def call_tool(request: Request) -> Response:
    """``POST /apps/{session}/calls``: the frame's ``tools/call``, as the model's would go."""
    session = _owned(request)
    session.take(_sessions(request).clock())  # before any work: a flood costs only this
    state = _serve(request)
    data = await read_json(request, state.max_body)
    name = data.get("name") if isinstance(data, dict) else None
    arguments = data.get("arguments", {}) if isinstance(data, dict) else None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ClientInputError(
            400, "bad_request", 'the body must be {"name": "<tool>", "arguments": {...}}'
        )
    async with session.lock:
        record, agent = await _idle_thread(state, session)
        tool = _server_tool(agent, session, name)
        call_id = "app_" + secrets.token_hex(12)
        block = ToolUseBlock(type="tool_use", id=call_id, name=tool.name, input=arguments)
        if await _needs_approval(agent, tool, block):
            if len(session.pending) >= 4:
                raise ClientInputError(
                    429, "app_rate_limited", "the app has 4 calls waiting for approval already"
                )
            session.pending[block["id"]] = block
            return JSONResponse({"status": "approval_required", "toolCallId": block["id"]})
        return JSONResponse(await _run(state, session, record, agent, block, approved=False))


async def decide(request: Request) -> Response:
    """``POST /apps/{session}/calls/{call}``: ``{"approved": bool}`` for a waiting call."""
    session = _owned(request)
    state = _serve(request)
    data = await read_json(request, state.max_body)
    approved = data.get("approved") if isinstance(data, dict) else None
    if not isinstance(approved, bool):
        raise ClientInputError(400, "bad_request", 'the body must be {"approved": true|false}')
    call_id = request.path_params["call"]
    async with session.lock:
        block = session.pending.get(call_id)
        if block is None:
            raise ClientInputError(404, "unknown_call", "no call of this app waits for approval")
        record, agent = await _idle_thread(state, session)  # a 409 keeps the call waiting
        del session.pending[call_id]
        _server_tool(agent, session, block["name"])  # still there, still the app's server's
        if not approved:
            return JSONResponse(await _record(state, record, agent, session, block, None))
        return JSONResponse(await _run(state, session, record, agent, block, approved=True))


async def _idle_thread(state: Any, session: AppSession) -> tuple[ThreadRecord, ReActAgent]:
    """The session's thread and its agent; 409 while a run or a decision holds the thread."""
    key = ThreadStore.key(session.owner, session.thread_id)
    record = await state.store.load(session.owner, session.thread_id)
    if record is None:
        raise ClientInputError(404, "unknown_thread", f"there is no thread {session.thread_id!r}")
    if key in state.active or live_lease(record) is not None:
        raise ClientInputError(
            409, "run_in_progress", "the agent is replying in this thread; call again after it"
        )
    agent: ReActAgent = await state.agent_for(record)
    if agent.pending_tool_calls:
        raise ClientInputError(
            409, "approval_pending", "the thread waits for a decision on the agent's calls first"
        )
    return record, agent


def _server_tool(agent: ReActAgent, session: AppSession, name: str) -> MCPTool:
    """The tool ``name`` (server-side or toolkit name) of the app's own server."""
    from agentkit.mcp._ui import app_tool

    for tool in agent.toolkit.tools.values():
        found = app_tool(tool, session.server)
        if found is not None and name in (found.mcp_name, found.name):
            return found
    raise ClientInputError(
        404, "unknown_tool", f"MCP server {session.server!r} has no tool {name!r} for its app"
    )


async def _needs_approval(agent: ReActAgent, tool: MCPTool, block: ToolUseBlock) -> bool:
    """The model's rule: the tool's own (in this thread's toolkit), then the policy."""
    if not tool.requires_approval_in(agent.toolkit):
        return False
    policy = agent.approval_policy
    if policy is None:
        return True
    approved = policy(block)
    if not isinstance(approved, bool):
        approved = await approved
    return not approved


async def _run(
    state: Any,
    session: AppSession,
    record: ThreadRecord,
    agent: ReActAgent,
    block: ToolUseBlock,
    *,
    approved: bool,
) -> dict[str, object]:
    async with aclosing(
        agent.toolkit.call_tool_function(block, context=agent, approved=approved)
    ) as chunks:
        final: ToolResponse | None = None
        async for chunk in chunks:
            if chunk.is_last:
                final = chunk
    return await _record(state, record, agent, session, block, final)


async def _record(
    state: Any,
    record: ThreadRecord,
    agent: ReActAgent,
    session: AppSession,
    block: ToolUseBlock,
    final: ToolResponse | None,
) -> dict[str, object]:
    """Put the call and its result into the thread; the ``CallToolResult`` for the frame."""
    if final is None:
        text, is_error, status = "the user denied this call from the app", True, "denied"
        structured: object = None
    else:
        text = "".join(b["text"] for b in final.content if b["type"] == "text")
        is_error, status = final.is_error, "error" if final.is_error else "done"
        structured = (final.metadata or {}).get("structured_content")
    meta = {"mcp_app": {"server": session.server}}
    result = ToolResultBlock(type="tool_result", id=block["id"], name=block["name"], output=text)
    if is_error:
        result["is_error"] = True
    await agent.memory.add(
        [
            Msg(agent.name, [block], "assistant", metadata=meta),
            Msg(agent.name, [result], "user", metadata=meta),
        ]
    )
    try:
        await state.store.save(record, agent)  # with the version check: no run slipped in
    except SessionConflictError:
        raise ClientInputError(
            409, "run_in_progress", "the thread changed meanwhile; call again"
        ) from None
    call_result: dict[str, object] = {
        "content": [TextBlock(type="text", text=text)],
        "isError": is_error,
    }
    if isinstance(structured, dict):
        call_result["structuredContent"] = structured
    return {"status": status, "toolCallId": block["id"], "result": call_result}


APP_ROUTES = [
    Route("/apps", list_apps, methods=["GET"]),
    Route("/threads/{thread_id}/apps", open_app, methods=["POST"]),
    Route("/apps/frame/{session}", frame, methods=["GET"]),
    Route("/apps/{session}/calls", call_tool, methods=["POST"]),
    Route("/apps/{session}/calls/{call}", decide, methods=["POST"]),
]

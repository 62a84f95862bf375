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

**Sessions live in the thread store**, beside the threads, so every worker on the store
serves every frame (no sticky routing)::

    serve-apps/<sha256(session id)>       {"serve_app": 1, "owner", "thread_id", "server",
                                           "frame", "expires", "tokens", "refilled",
                                           "pending"}
    serve-apps/frame/<sha256(document)>/<n>  {"serve_app": 1, "html", "expires"}

A session is keyed by its id's hash: the store (a backup, a shared database) holds no usable
capability. Its document (up to 5 MiB) is stored once per distinct document and period
``n`` (the sessions opened in the ``n``-th :data:`SESSION_SECONDS` since the epoch share it;
``frame`` names it), however many sessions render it: it expires when the last session of
its period can have (plus :data:`_FRAME_GRACE`), and since only sessions of its period
write it, nobody writes it again once a sweep may delete it (a store's delete has no
version check). ``expires`` (epoch seconds, also each entry's title, so a sweep reads
metadata only) is checked on every read: an expired session answers ``404 unknown_app``
like an unknown one and is deleted. Each worker sweeps the expired entries at most every
:data:`SWEEP_SECONDS`, when an app is opened.

The call budget is a token bucket in the session entry, spent with the store's versioned
save (compare-and-set): one budget across all workers, exact. A refusal writes nothing, and
a worker refuses a flood from the budget it last saw stored (see :class:`AppSessions`),
without reading the store. Refill runs on each worker's wall clock; clocks that disagree
by *s* seconds grant at most ``s * PER_SECOND`` extra calls. The calls waiting for approval
(``pending``) are in the entry too: a call asked through one worker is decided through any,
and taking it out of ``pending`` is a compare-and-set too, so it runs once however many
workers are sent the decision. Recording a call in the thread is a versioned save of the
thread; when another writer (the same app's call on another worker) saved first, the call is
appended to that newer thread, unless a run claimed it meanwhile (then ``409``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._ids import new_id
from agentkit.exceptions import MCPError, SessionConflictError, SessionError
from agentkit.messages import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from agentkit.serve._convert import ClientInputError, check_client_id
from agentkit.serve._http import read_json
from agentkit.serve._ownership import live_lease
from agentkit.serve._threads import ThreadRecord, ThreadStore

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.mcp._tool import MCPTool
    from agentkit.serve._app import ServeState
    from agentkit.session import Session
    from agentkit.tools import Tool
    from agentkit.tools._response import ToolResponse

__all__ = [
    "APP_ROUTES",
    "BURST",
    "PER_SECOND",
    "SESSION_SECONDS",
    "SWEEP_SECONDS",
    "AppSession",
    "AppSessions",
]

SESSION_SECONDS = 3600.0  # how long a rendered app may call tools
SWEEP_SECONDS = 300.0  # a worker deletes expired app sessions at most this often
BURST = 10  # tool calls an app may make at once ...
PER_SECOND = 2.0  # ... and then this many a second
MAX_PENDING = 4  # an app's calls waiting for approval at once
APP_VERSION = 1  # the stored layout (``serve_app``); another one reads as unknown
_PREFIX = "serve-apps/"  # not under "serve/": no owner's thread list ever sees these
# What token_urlsafe(32) makes: anything else is refused before the store is read.
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")
_CAS_TRIES = 32  # compare-and-set rounds on one entry before a call gives up (429)
_RECORD_TRIES = 32  # saves of the thread while other writers keep winning (each is progress)
_FRAME_GRACE = 60.0  # a document outlives its sessions by this (workers' clocks may differ)
_KNOWN_BUDGETS = 1024  # apps whose last seen budget a worker keeps (to refuse floods)
# The frame's own policy: its inline script and style run, nothing is fetched or framed,
# and the response itself demands the sandbox (also when opened outside the page).
FRAME_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; media-src data: blob:; connect-src 'none'; "
    "frame-src 'none'; worker-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self'; sandbox allow-scripts"
)


def _unknown_app() -> ClientInputError:
    return ClientInputError(404, "unknown_app", "there is no such app (or it expired)")


@dataclass
class AppSession:
    """One rendered app: whose, in which thread, from which server; its call budget.

    Attributes:
        owner: The user who rendered it (only their token may call through it).
        thread_id: The thread its calls are recorded in.
        server: The MCP server whose tools it may call.
        frame: Its document's name (see :meth:`AppSessions.frame_key`).
        expires: Epoch seconds after which it is unknown.
        refilled: When the budget was last refilled (epoch seconds).
        tokens: Calls left in the budget.
        pending: Calls waiting for approval, by call id.
    """

    owner: str
    thread_id: str
    server: str
    frame: str
    expires: float
    refilled: float
    tokens: float = BURST
    pending: dict[str, ToolUseBlock] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The stored form."""
        return {
            "serve_app": APP_VERSION,
            "owner": self.owner,
            "thread_id": self.thread_id,
            "server": self.server,
            "frame": self.frame,
            "expires": self.expires,
            "refilled": self.refilled,
            "tokens": self.tokens,
            "pending": dict(self.pending),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> AppSession | None:
        """The session stored as ``data``; None for anything else (read as unknown)."""
        try:
            if data.get("serve_app") != APP_VERSION:
                return None
            pending = data["pending"]
            if not isinstance(pending, dict):
                return None
            return cls(
                owner=str(data["owner"]),
                thread_id=str(data["thread_id"]),
                server=str(data["server"]),
                frame=str(data["frame"]),
                expires=_number(data["expires"]),
                refilled=_number(data["refilled"]),
                tokens=_number(data["tokens"]),
                pending=pending,
            )
        except (KeyError, TypeError, ValueError):
            return None

    def take(self, now: float) -> None:
        """Spend one call of the budget, or refuse it (429) when the app called too often."""
        # A worker whose clock is behind the last spender's refills nothing (never less).
        elapsed = max(0.0, now - self.refilled)
        self.tokens = min(BURST, self.tokens + elapsed * PER_SECOND)
        self.refilled = max(self.refilled, now)
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


class _Lock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.users = 0


class AppSessions:
    """The rendered apps, kept in the thread store (see the module docs).

    The store is shared by the workers; this object holds only what is this worker's own:
    the clock, the time of its last sweep, locks that keep its own requests for one app
    from racing each other's compare-and-set (other workers' are settled by the store), and
    the budget it last saw stored for each app. Spending never adds to a budget, so one
    that had no call left at the time seen has none now either: a flood is refused from
    that without reading the store; a call is only ever granted by the store.

    Args:
        clock: Epoch seconds: session expiry and the calls' rate limit run on it (every
            worker's must agree, as the threads' leases need too).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._swept = -math.inf
        self._locks: dict[str, _Lock] = {}
        self._budgets: OrderedDict[str, AppSession] = OrderedDict()

    @staticmethod
    def key(sid: str) -> str:
        """The store key of session ``sid``."""
        return _PREFIX + hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def frame_key(name: str) -> str:
        """The store key of the document named ``name`` (``<sha256>/<period>``)."""
        return f"{_PREFIX}frame/{name}"

    @asynccontextmanager
    async def locked(self, name: str) -> AsyncIterator[None]:
        """Hold this worker's lock called ``name`` (made on first use, dropped when free)."""
        entry = self._locks.get(name)
        if entry is None:
            entry = self._locks[name] = _Lock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[name]

    async def open(self, store: Session, owner: str, thread_id: str, server: str, html: str) -> str:
        """Store a new session of ``owner``'s app with its document ``html``; its random id."""
        await self.sweep(store)
        now = self.clock()
        digest = hashlib.sha256(html.encode("utf-8", "surrogatepass")).hexdigest()
        period = math.floor(now / SESSION_SECONDS)
        name = f"{digest}/{period}"
        session = AppSession(owner, thread_id, server, name, now + SESSION_SECONDS, now)
        # One copy for the period's sessions of this document, alive as long as the last
        # of them can be (written by each of them: the same text).
        until = (period + 2) * SESSION_SECONDS + _FRAME_GRACE
        frame = {"serve_app": APP_VERSION, "html": html, "expires": until}
        await store.save_state(self.frame_key(name), frame, title=repr(until))
        sid = secrets.token_urlsafe(32)  # a capability: whoever holds it is the session
        await store.save_state(
            self.key(sid), session.to_dict(), expected_version=0, title=repr(session.expires)
        )
        return sid

    async def _forget(self, store: Session, key: str) -> None:
        # Best effort: an entry left behind is expired, and the next sweep takes it. (The
        # document may serve other sessions: the sweep deletes it once it expires.)
        with contextlib.suppress(SessionError):
            await store.delete(key)

    async def load(self, store: Session, sid: str) -> tuple[AppSession, int]:
        """The live session ``sid`` and its stored version (404 when unknown or expired)."""
        if _SESSION_ID.fullmatch(sid) is None:
            raise _unknown_app()
        key = self.key(sid)
        found = await store.load_versioned(key)
        session = None if found is None else AppSession.from_dict(found[0])
        if found is None or session is None:
            raise _unknown_app()
        if session.expires <= self.clock():
            await self._forget(store, key)
            raise _unknown_app()
        return session, found[1]

    async def html(self, store: Session, sid: str) -> str:
        """The frame's document of the live session ``sid`` (404 when unknown or expired)."""
        session, _ = await self.load(store, sid)
        data = await store.load_state(self.frame_key(session.frame))
        html = None if data is None else data.get("html")
        if data is None or data.get("serve_app") != APP_VERSION or not isinstance(html, str):
            raise _unknown_app()
        return html

    async def update(
        self, store: Session, sid: str, change: Callable[[AppSession], None]
    ) -> AppSession:
        """Apply ``change`` to the stored session ``sid`` by compare-and-set; the result.

        ``change`` may raise (a ``ClientInputError``): nothing is written then. When another
        worker wrote the session meanwhile, it is read again and ``change`` applied again.
        """
        for _ in range(_CAS_TRIES):
            session, version = await self.load(store, sid)
            change(session)
            try:
                await store.save_state(self.key(sid), session.to_dict(), expected_version=version)
            except SessionConflictError:
                continue  # this app's request on another worker wrote first
            return session
        # Only this app's own requests write its session: it is sending too many at once.
        raise ClientInputError(
            429,
            "app_rate_limited",
            "the app sent too many requests at once; retry in 1 s",
            headers={"Retry-After": "1"},
        )

    async def spend(self, store: Session, sid: str, owner: str) -> AppSession:
        """Spend one call of ``owner``'s app ``sid`` (404 for another owner, 429 over budget)."""
        known = self._budgets.get(sid)
        if known is not None and known.owner == owner and known.expires > self.clock():
            dataclasses.replace(known).take(self.clock())  # raises when none is left
        mine = _mine(owner)

        def take(session: AppSession) -> None:
            mine(session)
            self._seen(sid, dataclasses.replace(session))  # as stored (before this spend)
            session.take(self.clock())

        # This worker's spends of one app go one at a time (no compare-and-set among them).
        async with self.locked(f"{sid}\0budget"):
            session = await self.update(store, sid, take)
        self._seen(sid, dataclasses.replace(session))
        return session

    def _seen(self, sid: str, session: AppSession) -> None:
        self._budgets[sid] = session
        self._budgets.move_to_end(sid)
        while len(self._budgets) > _KNOWN_BUDGETS:
            self._budgets.popitem(last=False)

    async def sweep(self, store: Session) -> None:
        """Delete expired sessions and frames (at most every :data:`SWEEP_SECONDS`).

        Reads the store's metadata only: each entry's title is its expiry.
        """
        now = self.clock()
        if now - self._swept < SWEEP_SECONDS:
            return
        self._swept = now
        cursor: str | None = None
        while True:
            try:
                page = await store.list_sessions(prefix=_PREFIX, limit=500, cursor=cursor)
            except SessionError:
                return  # the next sweep (or the open that follows) meets the store's error
            for info in page.sessions:
                try:
                    expired = float(info.title or "nan") <= now
                except ValueError:
                    expired = False  # not written by this module: leave it
                if expired:
                    with contextlib.suppress(SessionError):
                        await store.delete(info.session_id)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


def _serve(request: Request) -> ServeState:
    state: ServeState = request.app.state.serve
    return state


def _sessions(request: Request) -> AppSessions:
    sessions: AppSessions = request.app.state.mcp_apps
    return sessions


def _owner(request: Request) -> str:
    owner: str = _serve(request).guard.admit(request)
    return owner


def _number(value: object) -> float:
    """A stored number (a JSON int or float); anything else is a ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def _trusted_app(tool: Tool | None) -> tuple[MCPTool, str] | None:
    """``(tool, ui:// uri)`` for a trusted server's tool with an app, else None."""
    from agentkit.mcp import MCPTool
    from agentkit.mcp._ui import ui_resource_uri

    if not isinstance(tool, MCPTool):
        return None
    uri = ui_resource_uri(tool)
    if uri is None:
        return None
    mcp_tool = tool
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
    server = tool.client.name
    sid = await _sessions(request).open(
        state.store.session, owner, thread_id, server, resource.html
    )
    return JSONResponse({"session": sid, "frame": f"apps/frame/{sid}", "server": server})


async def frame(request: Request) -> Response:
    """``GET /apps/frame/{session}``: the app's document, sandboxed by its own CSP."""
    state = _serve(request)
    state.guard.check_host(request)
    html = await _sessions(request).html(state.store.session, request.path_params["session"])
    headers = {
        "Content-Security-Policy": FRAME_CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "Cross-Origin-Resource-Policy": "same-origin",
    }
    return Response(html, media_type="text/html; charset=utf-8", headers=headers)


def _mine(owner: str) -> Callable[[AppSession], None]:
    """A check that the session is ``owner``'s: another user's token finds no such app."""

    def check(session: AppSession) -> None:
        if session.owner != owner:
            raise _unknown_app()

    return check


async def call_tool(request: Request) -> Response:
    """``POST /apps/{session}/calls``: the frame's ``tools/call``, as the model's would go."""
    owner = _owner(request)
    state = _serve(request)
    sessions, store = _sessions(request), state.store.session
    sid = request.path_params["session"]
    mine = _mine(owner)
    # Before any work: a flood costs only this (a refusal writes nothing).
    session = await sessions.spend(store, sid, owner)
    data = await read_json(request, state.max_body)
    name = data.get("name") if isinstance(data, dict) else None
    arguments = data.get("arguments", {}) if isinstance(data, dict) else None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ClientInputError(
            400, "bad_request", 'the body must be {"name": "<tool>", "arguments": {...}}'
        )
    # One call of an app at a time in this worker: each is recorded by a versioned save.
    async with sessions.locked(sid):
        record, agent = await _idle_thread(state, session)
        tool = _server_tool(agent, session, name)
        call_id = new_id("app_", 12)
        block = ToolUseBlock(type="tool_use", id=call_id, name=tool.name, input=arguments)
        if await _needs_approval(agent, tool, block):

            def ask(session: AppSession) -> None:
                mine(session)
                if len(session.pending) >= MAX_PENDING:
                    raise ClientInputError(
                        429,
                        "app_rate_limited",
                        f"the app has {MAX_PENDING} calls waiting for approval already",
                    )
                session.pending[call_id] = block

            await sessions.update(store, sid, ask)
            return JSONResponse({"status": "approval_required", "toolCallId": call_id})
        return JSONResponse(await _run(state, session, record, agent, block, approved=False))


async def decide(request: Request) -> Response:
    """``POST /apps/{session}/calls/{call}``: ``{"approved": bool}`` for a waiting call."""
    owner = _owner(request)
    state = _serve(request)
    sessions, store = _sessions(request), state.store.session
    sid = request.path_params["session"]
    mine = _mine(owner)
    session, _ = await sessions.load(store, sid)
    mine(session)
    data = await read_json(request, state.max_body)
    approved = data.get("approved") if isinstance(data, dict) else None
    if not isinstance(approved, bool):
        raise ClientInputError(400, "bad_request", 'the body must be {"approved": true|false}')
    call_id = request.path_params["call"]

    def unknown_call() -> ClientInputError:
        return ClientInputError(404, "unknown_call", "no call of this app waits for approval")

    found: list[ToolUseBlock] = []

    def take_out(session: AppSession) -> None:
        mine(session)
        block = session.pending.pop(call_id, None)
        if block is None:
            raise unknown_call()  # decided meanwhile, through this worker or another
        found[:] = [block]

    async with sessions.locked(sid):
        session, _ = await sessions.load(store, sid)
        if call_id not in session.pending:
            raise unknown_call()
        record, agent = await _idle_thread(state, session)  # a 409 keeps the call waiting
        # Taken out by compare-and-set: of two decisions sent to two workers, one runs it.
        session = await sessions.update(store, sid, take_out)
        block = found[0]
        _server_tool(agent, session, block["name"])  # still there, still the app's server's
        if not approved:
            return JSONResponse(await _record(state, record, agent, session, block, None))
        return JSONResponse(await _run(state, session, record, agent, block, approved=True))


async def _idle_thread(state: ServeState, session: AppSession) -> tuple[ThreadRecord, ReActAgent]:
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
    state: ServeState,
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
    state: ServeState,
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
    for _ in range(_RECORD_TRIES):
        await agent.memory.add(
            [
                Msg(agent.name, [block], "assistant", metadata=meta),
                Msg(agent.name, [result], "user", metadata=meta),
            ]
        )
        try:
            await state.store.save(record, agent)  # with the version check: no run slipped in
            break
        except SessionConflictError:
            # Another writer saved first: this app's call on another worker (append to its
            # thread), or a run that claimed the thread (409: it is not ours to write now).
            record, agent = await _idle_thread(state, session)
    else:
        raise ClientInputError(409, "run_in_progress", "the thread kept changing; call again")
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

"""``create_app``: an agent as an ASGI app speaking AG-UI, with a web chat at ``/``.

Endpoints (all JSON errors, all behind the bearer token when one is configured):

* ``POST /agui``: a ``RunAgentInput``; answers an SSE stream of AG-UI events.
* ``GET /threads``, ``POST /threads`` (a new server-chosen 128-bit id), ``GET|DELETE
  /threads/{id}``, ``GET /threads/{id}/events`` (re-attach to the live run),
  ``POST /threads/{id}/interrupt`` (returns once stopped), ``POST /threads/{id}/approvals``.
* ``GET /healthz``; ``GET /`` and ``/static/*``: the web chat (no data, no token needed).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from importlib import resources
from typing import Any, TypeAlias

import anyio
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentkit.agent import ReActAgent
from agentkit.serve._convert import ClientInputError, check_client_id, to_agui_messages
from agentkit.serve._frontend import FrontendTool, instructions_with_context
from agentkit.serve._http import DEFAULT_MAX_BODY, Guard, error_response, read_json
from agentkit.serve._input import RunInput, parse_approvals, parse_run_input
from agentkit.serve._runner import RunRequest, execute_run, interrupt_for
from agentkit.serve._threads import RunChannel, ThreadRecord, ThreadStore
from agentkit.session import Session, SQLiteSession

__all__ = ["AgentFactory", "DepsBuilder", "ServeState", "create_app"]

AgentFactory: TypeAlias = "ReActAgent | Callable[[], ReActAgent | Awaitable[ReActAgent]]"
DepsBuilder: TypeAlias = Callable[[Request], Any]
logger = logging.getLogger("agentkit.serve")
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_STATIC = {"chat.js": "text/javascript", "chat.css": "text/css", "index.html": "text/html"}


def _copy_agent(template: ReActAgent) -> ReActAgent:
    """A fresh agent configured like ``template`` (model and toolkit shared, memory not)."""
    return ReActAgent(
        template.name,
        template.sys_prompt,
        template.model,
        template.toolkit,
        max_iters=template.max_iters,
        parallel_tool_calls=template.parallel_tool_calls,
        print_hint=False,
        max_concurrency=template.max_concurrency,
        approval_policy=template.approval_policy,
    )


class ServeState:
    """What the app shares between requests: the store, live runs, the run task group."""

    def __init__(
        self,
        factory: Any,
        session: Session,
        guard: Guard,
        deps: DepsBuilder | None,
        max_body: int,
    ) -> None:
        self.factory = factory
        self.store = ThreadStore(session)
        self.guard = guard
        self.deps = deps
        self.max_body = max_body
        self.active: dict[str, RunChannel] = {}
        self.task_group: TaskGroup | None = None

    async def new_agent(self) -> ReActAgent:
        """A fresh agent from the factory (or a copy of the template agent)."""
        if isinstance(self.factory, ReActAgent):
            return _copy_agent(self.factory)
        agent = self.factory()
        if inspect.isawaitable(agent):
            agent = await agent
        if not isinstance(agent, ReActAgent):
            raise TypeError(f"the agent factory returned {type(agent).__name__}, not ReActAgent")
        agent.print_hint = False  # a server has no console to print replies to
        return agent

    async def agent_for(self, record: ThreadRecord) -> ReActAgent:
        """A fresh agent holding the thread's stored state."""
        agent = await self.new_agent()
        if record.agent_state is not None:
            agent.load_state_dict(record.agent_state)
        return agent

    async def build_deps(self, request: Request) -> Any:
        """The run's deps from ``deps(request)`` (sync or async), or None."""
        if self.deps is None:
            return None
        value = self.deps(request)
        return await value if inspect.isawaitable(value) else value


def _state(request: Request) -> ServeState:
    state: ServeState = request.app.state.serve
    return state


def _owner(request: Request) -> str:
    state = _state(request)
    state.guard.check_host(request)
    owner, user = state.guard.owner(request)
    request.state.owner = owner
    request.state.user = user
    return owner


def _thread_id(request: Request) -> str:
    return check_client_id(request.path_params["thread_id"], "the thread id")


async def _load(state: ServeState, owner: str, thread_id: str) -> ThreadRecord:
    record = await state.store.load(owner, thread_id)
    if record is None:
        raise ClientInputError(404, "unknown_thread", f"there is no thread {thread_id!r}")
    return record


# -- runs ----------------------------------------------------------------------------------
async def _settled(state: ServeState, owner: str, thread_id: str) -> RunChannel | None:
    """The thread's live run, after waiting out one that only has its save left."""
    key = ThreadStore.key(owner, thread_id)
    channel = state.active.get(key)
    while channel is not None and channel.ended:
        await channel.wait()
        channel = state.active.get(key)
    return channel


async def _reserve(state: ServeState, owner: str, thread_id: str, run_id: str) -> RunChannel:
    """Claim the thread for one run (no await between the last check and the claim)."""
    key = ThreadStore.key(owner, thread_id)
    if await _settled(state, owner, thread_id) is not None:
        raise ClientInputError(
            409,
            "run_in_progress",
            f"thread {thread_id!r} is already running a reply; wait for it, or stop it with "
            f"POST /threads/{thread_id}/interrupt",
        )
    channel = state.active[key] = RunChannel(owner, thread_id, run_id)
    return channel


async def _start_run(request: Request, owner: str, run: RunInput) -> Response:
    state = _state(request)
    if state.task_group is None:
        raise ClientInputError(503, "not_started", "the app's lifespan has not started")
    channel = await _reserve(state, owner, run.thread_id, run.run_id)
    key = ThreadStore.key(owner, run.thread_id)
    try:
        stored = await state.store.load(owner, run.thread_id)
        record = stored or ThreadRecord(owner, run.thread_id)
        agent = await state.agent_for(record)
        run.prepare(agent, record)  # the client's tools, context and state (AG-UI)
        agent.sys_prompt = instructions_with_context(agent.sys_prompt, run.context)
        if run.state is not None:
            record.state = run.state
        msgs, approvals = await run.resolve(agent, record)
        deps = await state.build_deps(request)
        titled = not record.title and bool(msgs)
        if titled:
            record.set_title(msgs)
        if stored is None or titled:  # listed (with its title) while its first run is going
            await state.store.save(record, agent)
    except BaseException:
        state.active.pop(key, None)
        channel.close()  # wakes an interrupt request that waits on this (never started) run
        raise
    channel.agent = agent
    req = RunRequest(channel, record, agent, msgs, approvals, deps)

    def release() -> None:
        state.active.pop(key, None)

    state.task_group.start_soon(execute_run, req, state.store, release)
    return StreamingResponse(channel.read(), media_type="text/event-stream", headers=_SSE_HEADERS)


async def agui(request: Request) -> Response:
    """``POST /agui``: run the agent on a ``RunAgentInput``, stream AG-UI events."""
    owner = _owner(request)
    body = await read_json(request, _state(request).max_body)
    return await _start_run(request, owner, parse_run_input(body))


async def approvals(request: Request) -> Response:
    """``POST /threads/{id}/approvals``: ``{call_id: true | false | "reason"}``; streams."""
    owner = _owner(request)
    thread_id = _thread_id(request)
    body = await read_json(request, _state(request).max_body)
    await _load(_state(request), owner, thread_id)  # approvals need an existing thread
    run = RunInput(thread_id, secrets.token_hex(16), [], parse_approvals(body))
    return await _start_run(request, owner, run)


async def interrupt(request: Request) -> Response:
    """``POST /threads/{id}/interrupt``: stop the running reply; returns once it stopped."""
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    channel = await _settled(state, owner, thread_id)
    if channel is None:
        await _load(state, owner, thread_id)
        return JSONResponse({"threadId": thread_id, "interrupted": False})
    received = time.perf_counter()
    channel.stop_requested = True
    if channel.agent is not None:
        await channel.agent.interrupt()
    await channel.wait()
    body = {"threadId": thread_id, "interrupted": True, "runId": channel.run_id}
    return JSONResponse(body, headers=_stop_timing(received, channel))


def _stop_timing(received: float, channel: RunChannel) -> dict[str, str]:
    """``Server-Timing`` of a Stop: until the stream's last event was written, and the save.

    For monitoring Stop's responsiveness from outside (browsers show it in their network
    tools); ``stream-end`` is absent when no reader was attached to the stream.
    """
    now = time.perf_counter()
    timings = [f"saved;dur={(now - received) * 1e3:.1f}"]
    if channel.written_at is not None:
        timings.insert(0, f"stream-end;dur={(channel.written_at - received) * 1e3:.1f}")
    return {"Server-Timing": ", ".join(timings)}


async def events(request: Request) -> Response:
    """``GET /threads/{id}/events``: replay and follow the live run (204 when idle).

    A run whose last event is out but whose thread is still saving counts as ended: the
    answer waits for the save and is 204, as it is a moment later, so the thread read next
    holds the whole run (never a replay of a finished run).
    """
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    await _load(state, owner, thread_id)  # 404 for a thread this owner does not have
    channel = await _settled(state, owner, thread_id)
    if channel is None:
        return Response(status_code=204)
    return StreamingResponse(channel.read(), media_type="text/event-stream", headers=_SSE_HEADERS)


# -- threads -------------------------------------------------------------------------------
async def list_threads(request: Request) -> Response:
    """``GET /threads``: this owner's threads, most recent first."""
    owner = _owner(request)
    records = await _state(request).store.list(owner)
    return JSONResponse({"threads": [r.summary() for r in records]})


async def create_thread(request: Request) -> Response:
    """``POST /threads``: a new empty thread with a random 128-bit id."""
    owner = _owner(request)
    record = ThreadRecord(owner, secrets.token_hex(16))
    await _state(request).store.save(record)
    return JSONResponse(record.summary(), status_code=201)


async def get_thread(request: Request) -> Response:
    """``GET /threads/{id}``: messages (AG-UI form), pending approvals, whether running."""
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    channel = await _settled(state, owner, thread_id)
    record = await _load(state, owner, thread_id)
    agent = await state.agent_for(record)
    body = record.summary()
    body["messages"] = [
        m.model_dump(by_alias=True, mode="json")
        for m in to_agui_messages(await agent.memory.get_memory())
    ]
    body["pending"] = [
        interrupt_for(c).model_dump(by_alias=True, mode="json")
        for c in agent.pending_tool_calls
        if not isinstance(agent.toolkit.get_tool(c["name"]), FrontendTool)
    ]
    body["state"] = record.state
    body["running"] = channel is not None
    body["runId"] = channel.run_id if channel is not None else None
    return JSONResponse(body)


async def delete_thread(request: Request) -> Response:
    """``DELETE /threads/{id}``: stop its run if any, then delete it."""
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    await _load(state, owner, thread_id)
    channel = await _settled(state, owner, thread_id)
    if channel is not None:
        channel.stop_requested = True
        if channel.agent is not None:
            await channel.agent.interrupt()
        await channel.wait()
    await state.store.delete(owner, thread_id)
    return JSONResponse({"threadId": thread_id, "deleted": True})


async def healthz(request: Request) -> Response:
    """``GET /healthz``: the server is up (and how many runs are live)."""
    _owner(request)
    return JSONResponse({"status": "ok", "activeRuns": len(_state(request).active)})


# -- the page ------------------------------------------------------------------------------
def _asset(name: str) -> Response:
    data = resources.files("agentkit.serve").joinpath("static", name).read_bytes()
    headers = {
        "Content-Security-Policy": _CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    return Response(data, media_type=_STATIC[name], headers=headers)


async def index(request: Request) -> Response:
    """``GET /``: the web chat page."""
    _state(request).guard.check_host(request)
    return _asset("index.html")


async def static(request: Request) -> Response:
    """``GET /static/{name}``: the page's script and style sheet."""
    _state(request).guard.check_host(request)
    name = request.path_params["name"]
    if name not in _STATIC:
        raise ClientInputError(404, "not_found", f"no static file {name!r}")
    return _asset(name)


# -- errors and assembly -------------------------------------------------------------------
async def _client_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ClientInputError)
    return error_response(exc.status, exc.code, str(exc))


async def _server_error(request: Request, exc: Exception) -> Response:
    logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    message = f"the server failed: {type(exc).__name__}: {exc}"
    return error_response(500, "server_error", message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail))


_ROUTES = [
    Route("/", index, methods=["GET"]),
    Route("/static/{name}", static, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/agui", agui, methods=["POST"]),
    Route("/threads", list_threads, methods=["GET"]),
    Route("/threads", create_thread, methods=["POST"]),
    Route("/threads/{thread_id}", get_thread, methods=["GET"]),
    Route("/threads/{thread_id}", delete_thread, methods=["DELETE"]),
    Route("/threads/{thread_id}/events", events, methods=["GET"]),
    Route("/threads/{thread_id}/interrupt", interrupt, methods=["POST"]),
    Route("/threads/{thread_id}/approvals", approvals, methods=["POST"]),
]


def _lifespan(state: ServeState, session: Session) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            state.task_group = tg
            try:
                yield
            finally:
                state.task_group = None
                tg.cancel_scope.cancel()  # stops live runs; each saves its thread shielded
        await session.close()

    return lifespan


def _cors(origins: Collection[str]) -> list[Middleware]:
    if not origins:
        return []  # CORS off: browsers keep other origins out
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["authorization", "content-type"],
        )
    ]


def create_app(
    factory: AgentFactory,
    *,
    sessions: Session | None = None,
    auth_token: str | Mapping[str, str] | None = None,
    deps: DepsBuilder | None = None,
    allowed_hosts: Collection[str] | None = None,
    cors_origins: Collection[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY,
) -> Starlette:
    """Serve an agent over HTTP: AG-UI at ``POST /agui``, a web chat at ``GET /``.

    Args:
        factory: A callable returning a fresh ``ReActAgent`` (sync or async), or an agent
            to copy per conversation (model, toolkit and settings shared; hooks are not
            copied: use a factory for those).
        sessions: Where threads are stored (default: ``SQLiteSession`` in
            ``~/.agentkit/serve.db``).
        auth_token: A bearer token required on every API request, or ``{token: user}``
            (each user owns their own threads). None: no token (keep the server on loopback).
        deps: ``deps(request)`` (sync or async) builds the run's dependencies from the
            request (``request.state.user`` is the authenticated user); tools read them
            with :func:`agentkit.serve.current_deps`.
        allowed_hosts: ``Host`` names accepted (DNS-rebinding protection); None: loopback
            names without a token, any with one.
        cors_origins: Browser origins allowed to call the API cross-origin (CORS is off
            when empty).
        max_body_bytes: Largest accepted request body.

    Returns:
        A Starlette app; run it with uvicorn. Its lifespan must run (uvicorn does; when
        mounting it in another app, enter ``app.router.lifespan_context(app)`` yourself).
    """
    from pathlib import Path

    session = sessions or SQLiteSession(Path("~/.agentkit/serve.db").expanduser())
    state = ServeState(
        factory, session, Guard(auth_token, allowed_hosts, cors_origins), deps, max_body_bytes
    )

    app = Starlette(
        routes=_ROUTES,
        middleware=_cors(cors_origins),
        lifespan=_lifespan(state, session),
        exception_handlers={
            ClientInputError: _client_error,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    app.state.serve = state
    return app

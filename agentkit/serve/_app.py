"""``create_app``: an agent as an ASGI app speaking AG-UI, with a web chat at ``/``.

Endpoints (all JSON errors, all behind the bearer token when one is configured):

* ``POST /agui``: a ``RunAgentInput``; answers an SSE stream of AG-UI events.
* ``GET /threads``, ``POST /threads`` (a new server-chosen 128-bit id), ``GET|DELETE
  /threads/{id}``, ``GET /threads/{id}/events`` (re-attach to the live run),
  ``POST /threads/{id}/interrupt`` (returns once stopped), ``POST /threads/{id}/steer``
  (a user message into the running reply), ``POST /threads/{id}/approvals``.
* ``GET /healthz``; ``GET /`` and ``/static/*``: the web chat (no data, no token needed).
* ``/apps...`` and ``POST /threads/{id}/apps``: MCP Apps (see :mod:`agentkit.serve._apps`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from functools import partial
from importlib import resources
from typing import Any, TypeAlias

import anyio
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ExceptionHandler

from agentkit._ids import new_id
from agentkit.agent import ReActAgent
from agentkit.exceptions import SessionConflictError, SessionError, StateError, UsageError
from agentkit.observability import continue_trace
from agentkit.serve._apps import APP_ROUTES, AppSessions
from agentkit.serve._convert import ClientInputError, check_client_id, to_agui_messages
from agentkit.serve._durable import DurableTurns
from agentkit.serve._frontend import FrontendTool, instructions_with_context
from agentkit.serve._http import (
    DEFAULT_MAX_BODY,
    EventStreamResponse,
    Guard,
    error_response,
    read_json,
)
from agentkit.serve._input import RunInput, parse_approvals, parse_run_input
from agentkit.serve._limits import DEFAULT_MAX_RUNS_PER_CLIENT, RunsPerClient
from agentkit.serve._ownership import (
    DEFAULT_LEASE_SECONDS,
    Claim,
    LeaseRenewals,
    ThreadBusy,
    follow_remote,
    live_lease,
    new_worker_id,
    stop_remote,
)
from agentkit.serve._runner import RunRequest, execute_run, interrupt_for
from agentkit.serve._threads import (
    FinishedRuns,
    RunChannel,
    ThreadRecord,
    ThreadStore,
    events_after,
)
from agentkit.session import Session, SQLiteSession
from agentkit.session._control import send_steer

__all__ = ["AgentFactory", "DepsBuilder", "ServeState", "create_app"]

AgentFactory: TypeAlias = "ReActAgent | Callable[[], ReActAgent | Awaitable[ReActAgent]]"
DepsBuilder: TypeAlias = Callable[[Request], object]
logger = logging.getLogger("agentkit.serve")
_HOLDER_ANSWER = 5.0  # seconds a relayed /events waits for the holder's first answer
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_STATIC = {
    "chat.js": "text/javascript",
    "markdown.js": "text/javascript",
    "apps.js": "text/javascript",
    "chat.css": "text/css",
    "index.html": "text/html",
}


class ServeState:
    """What the app shares between requests: the store, live runs, the run task group."""

    def __init__(
        self,
        factory: AgentFactory,
        session: Session,
        guard: Guard,
        deps: DepsBuilder | None,
        max_body: int,
        runs_per_client: RunsPerClient,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.factory = factory
        self.runs_per_client = runs_per_client
        self.worker = new_worker_id()  # named in the leases of this worker's runs
        self.lease_seconds = lease_seconds
        self.renewals = LeaseRenewals(lease_seconds)  # one task renews every held run's lease
        self.stop_timeout = max(10.0, lease_seconds)  # a Stop sent to another worker
        self.store = ThreadStore(session)
        self.guard = guard
        self.deps = deps
        self.max_body = max_body
        self.active: dict[str, RunChannel] = {}
        self.finished = FinishedRuns()
        self.task_group: TaskGroup | None = None
        self.durable: DurableTurns | None = None  # create_app(durable=True)

    async def new_agent(self) -> ReActAgent:
        """A fresh agent from the factory (or a copy of the template agent)."""
        agent: object
        if isinstance(self.factory, ReActAgent):
            agent = self.factory.copy()  # all of its configuration: limits, compactor, hooks
        else:
            agent = self.factory()
            if inspect.isawaitable(agent):
                agent = await agent
        # A factory typed to return an agent may still return something else: checked.
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

    async def build_deps(self, request: Request) -> object:
        """The run's deps from ``deps(request)`` (sync or async), or None."""
        if self.deps is None:
            return None
        value = self.deps(request)
        return await value if inspect.isawaitable(value) else value


def _state(request: Request) -> ServeState:
    state: ServeState = request.app.state.serve
    return state


def _owner(request: Request) -> str:
    return _state(request).guard.admit(request)


def _thread_id(request: Request) -> str:
    thread_id = check_client_id(request.path_params["thread_id"], "the thread id")
    request.state.thread_id = thread_id  # named by the log line of a failure
    return thread_id


async def _load(state: ServeState, owner: str, thread_id: str) -> ThreadRecord:
    record = await state.store.load(owner, thread_id)
    if record is None:
        raise ClientInputError(404, "unknown_thread", f"there is no thread {thread_id!r}")
    return record


# -- runs ----------------------------------------------------------------------------------
async def _still_held(state: ServeState, owner: str, thread_id: str, run_id: str) -> bool:
    """Whether run ``run_id`` still holds the thread's lease (remote stops and steers ask)."""
    current = await state.store.load(owner, thread_id)
    held = None if current is None else live_lease(current)
    return held is not None and held.get("run") == run_id


async def _settled(state: ServeState, owner: str, thread_id: str) -> RunChannel | None:
    """The thread's live run, after waiting out one that only has its save left."""
    key = ThreadStore.key(owner, thread_id)
    channel = state.active.get(key)
    while channel is not None and channel.ended:
        await channel.wait()
        channel = state.active.get(key)
    if channel is not None and channel.unavailable:  # its commit is being retried
        raise ClientInputError(
            503,
            "store_unavailable",
            f"thread {thread_id!r} is being saved; the thread store is unavailable, retry soon",
        )
    return channel


def _busy(thread_id: str) -> ClientInputError:
    return ClientInputError(
        409,
        "run_in_progress",
        f"thread {thread_id!r} is already running a reply; wait for it, or stop it with "
        f"POST /threads/{thread_id}/interrupt",
    )


async def _reserve(state: ServeState, owner: str, thread_id: str, run_id: str) -> RunChannel:
    """Claim the thread for one run (no await between the last check and the claim)."""
    key = ThreadStore.key(owner, thread_id)
    if await _settled(state, owner, thread_id) is not None:
        raise _busy(thread_id)
    channel = state.active[key] = RunChannel(owner, thread_id, run_id)
    return channel


async def _start_run(request: Request, owner: str, run: RunInput) -> Response:
    state = _state(request)
    if state.task_group is None:
        raise ClientInputError(503, "not_started", "the app's lifespan has not started")
    request.state.thread_id = run.thread_id  # named by the log line of a failure
    slot = state.runs_per_client.acquire(request, owner)  # 429 over the client's cap
    try:
        channel = await _reserve(state, owner, run.thread_id, run.run_id)
    except BaseException:
        slot.release()
        raise
    key = ThreadStore.key(owner, run.thread_id)
    try:
        stored = await state.store.load(owner, run.thread_id)
        record = stored or ThreadRecord(owner, run.thread_id)
        if live_lease(record) is not None:  # a run on another worker holds it
            raise _busy(run.thread_id)
        if await _recovering(state, record):  # its worker died; DBOS is finishing the turn
            raise _busy(run.thread_id)
        agent = await state.agent_for(record)
        run.prepare(agent, record)  # the client's tools, context and state (AG-UI)
        agent.sys_prompt = instructions_with_context(agent.sys_prompt, run.context)
        if run.state is not None:
            record.state = run.state
        msgs, approvals = await run.resolve(agent, record)
        deps = await state.build_deps(request)
        if not record.title and msgs:  # listed with its title while its first run is going
            record.set_title(msgs)
        # The claim: one compare-and-set write of the thread, across every worker.
        claim = Claim(state.store, record, channel, state.worker, state.renewals)
        try:
            await claim.acquire()
        except ThreadBusy:
            raise _busy(run.thread_id) from None
    except BaseException:
        slot.release()
        state.active.pop(key, None)
        channel.close()  # wakes an interrupt request that waits on this (never started) run
        raise
    channel.agent = agent
    durable = state.durable.start if state.durable is not None else None
    req = RunRequest(channel, record, agent, msgs, approvals, deps, durable)

    def release() -> None:
        slot.release()
        state.active.pop(key, None)
        state.finished.keep(key, channel)  # a reconnect may still want its last events

    # The run's task copies the current context: its spans continue the client's trace
    # (a traceparent header: the browser's, or a gateway's).
    with continue_trace(request.headers):
        state.task_group.start_soon(execute_run, req, claim, release)
    return EventStreamResponse(channel.read())


async def _recovering(state: ServeState, record: ThreadRecord) -> bool:
    """Whether the thread's last lease (expired) names a durable turn still unfinished."""
    if state.durable is None or record.lease is None:
        return False
    return await state.durable.recovering(ThreadStore.key(record.owner, record.thread_id))


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
    run = RunInput(thread_id, new_id(), [], parse_approvals(body))
    return await _start_run(request, owner, run)


async def interrupt(request: Request) -> Response:
    """``POST /threads/{id}/interrupt``: stop the running reply, on whichever worker it runs.

    Answers ``{"status": "stopped" | "no_run" | "unreachable", "worker": id | None}`` once
    the run has stopped and its turn is committed.
    """
    owner = _owner(request)
    thread_id = _thread_id(request)
    received = time.perf_counter()
    status, worker, run_id, channel = await _stop(_state(request), owner, thread_id)
    body = {"threadId": thread_id, "status": status, "worker": worker, "runId": run_id}
    headers = _stop_timing(received, channel) if channel is not None else None
    return JSONResponse(body, headers=headers)


async def _stop(
    state: ServeState, owner: str, thread_id: str
) -> tuple[str, str | None, str | None, RunChannel | None]:
    """Stop the thread's run: ``(status, worker, run id, the local channel if here)``."""
    channel = await _settled(state, owner, thread_id)
    if channel is not None:  # it runs here: no network hop
        channel.stop_requested = True
        if channel.agent is not None:
            await channel.agent.interrupt()
        await channel.wait()
        if channel.readers:  # Stop answers once the stream's end went out too
            with anyio.move_on_after(2):
                await channel.written.wait()
        return "stopped", state.worker, channel.run_id, channel
    record = await _load(state, owner, thread_id)
    lease = live_lease(record)
    if lease is None:
        return "no_run", None, None, None
    run_id = str(lease.get("run"))

    key = ThreadStore.key(owner, thread_id)
    held = partial(_still_held, state, owner, thread_id, run_id)
    outcome = await stop_remote(
        state.store.session, key, run_id, still_held=held, wait=state.stop_timeout
    )
    if outcome == "gone":
        return "no_run", None, None, None
    return outcome, str(lease.get("worker")), run_id, None


async def steer(request: Request) -> Response:
    """``POST /threads/{id}/steer``: ``{"message": str}`` into the running reply, anywhere.

    Answers ``{"status": "next_request" | "follow_up" | "no_run" | "unreachable", "worker":
    id | None}`` once the run has placed the message (see ``ReActAgent.steer``). A thread
    paused for approval keeps it for the resumed run (``next_request``).
    """
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    data = await read_json(request, state.max_body)
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str) or not message.strip():
        raise ClientInputError(400, "bad_request", 'the body must be {"message": "<text>"}')
    status, worker, run_id = await _steer(state, owner, thread_id, message)
    body = {"threadId": thread_id, "status": status, "worker": worker, "runId": run_id}
    return JSONResponse(body)


async def _steer(
    state: ServeState, owner: str, thread_id: str, message: str
) -> tuple[str, str | None, str | None]:
    """Steer the thread's run: ``(status, worker, run id)``."""
    channel = await _settled(state, owner, thread_id)
    while channel is not None and channel.committing and not channel.unavailable:
        # Its state is being saved: a steer placed on the agent now would not be in it.
        await channel.wait()
        channel = await _settled(state, owner, thread_id)
    if channel is not None and channel.agent is not None:  # it runs here: no network hop
        try:
            return await channel.agent.steer(message), state.worker, channel.run_id
        except StateError:  # its reply ended meanwhile (the turn is being committed)
            return "no_run", None, None
    record = await _load(state, owner, thread_id)
    lease = live_lease(record)
    if lease is None:
        return await _steer_paused(state, record, message), None, None
    run_id = str(lease.get("run"))

    key = ThreadStore.key(owner, thread_id)
    status, worker = await send_steer(
        state.store.session,
        key,
        message,
        run=run_id,
        wait=state.stop_timeout,
        still_held=partial(_still_held, state, owner, thread_id, run_id),
    )
    if status == "no_run":  # the run ended meanwhile: paused for approval, it keeps the steer
        record = await _load(state, owner, thread_id)
        if live_lease(record) is None:
            return await _steer_paused(state, record, message), None, None
    return status, worker, run_id if status != "no_run" else None


async def _steer_paused(state: ServeState, record: ThreadRecord, message: str) -> str:
    """A thread with calls waiting for approval keeps the steer for its resumed run."""
    agent = await state.agent_for(record)
    if not agent.pending_tool_calls:
        return "no_run"
    status = await agent.steer(message)  # paused: kept as a deferred message
    try:
        await state.store.save(record, agent)  # with the version check: no run slipped in
    except SessionConflictError:
        raise _busy(record.thread_id) from None
    return status


def _stop_timing(received: float, channel: RunChannel) -> dict[str, str]:
    """``Server-Timing`` of a local Stop: until the turn was committed, and the stream's end.

    For monitoring Stop's responsiveness from outside (browsers show it in their network
    tools); ``stream-end`` is absent when no reader was attached to the stream.
    """
    timings = []
    if channel.committed_at is not None:
        timings.append(f"committed;dur={(channel.committed_at - received) * 1e3:.1f}")
    if channel.written_at is not None:
        timings.append(f"stream-end;dur={(channel.written_at - received) * 1e3:.1f}")
    return {"Server-Timing": ", ".join(timings)} if timings else {}


async def events(request: Request) -> Response:
    """``GET /threads/{id}/events``: replay and follow the live run (204 when idle).

    Every event has an SSE id ``<run id>:<seq>``: a reconnect with ``Last-Event-ID`` gets
    every later event of that run once, in order (also just after the run ended: the
    worker keeps its threads' last runs for a minute); without one, or with another run's,
    the live run is replayed from its start.

    Any worker answers: one that does not hold the run asks the holder over the control
    channel and relays its events (ending with the run's last one). When the holder does
    not answer (it died, or the run ended meanwhile), the answer is 204 and the thread read
    next shows what was committed.

    A run whose last event is out but whose thread is still saving counts as ended: the
    answer waits for the save and is 204, as it is a moment later, so the thread read next
    holds the whole run (never a replay of a finished run).
    """
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    record = await _load(state, owner, thread_id)  # 404 for a thread this owner lacks
    last = request.headers.get("last-event-id")
    key = ThreadStore.key(owner, thread_id)
    channel = await _settled(state, owner, thread_id)
    if channel is None or (last and channel.resume_index(last) == 0):
        # A reconnect into a run that has ended since: the rest of it, if still kept.
        ended = state.finished.get(key)
        if last and ended is not None and ended.resume_index(last) > 0:
            channel = ended
    if channel is not None:
        stream = channel.read(channel.resume_index(last))
        return EventStreamResponse(stream)
    lease = live_lease(record)
    if lease is None or lease.get("worker") == state.worker or state.task_group is None:
        return Response(status_code=204)
    run_id = str(lease.get("run"))

    relayed = await follow_remote(
        state.store.session,
        key,
        run_id,
        events_after(last, run_id),
        still_held=partial(_still_held, state, owner, thread_id, run_id),
        task_group=state.task_group,
        wait=_HOLDER_ANSWER,
    )
    if relayed is None:
        return Response(status_code=204)
    return EventStreamResponse(relayed)


# -- threads -------------------------------------------------------------------------------
async def list_threads(request: Request) -> Response:
    """``GET /threads?limit=N&cursor=C``: a page of this owner's threads, most recent first.

    Metadata only (``threadId``, ``title``, ``updatedAt``); ``nextCursor`` (None on the last
    page) fetches the next page.
    """
    owner = _owner(request)
    try:
        limit = int(request.query_params.get("limit", "100"))
        threads, cursor = await _state(request).store.list(
            owner, limit=limit, cursor=request.query_params.get("cursor")
        )
    except ValueError as exc:
        return error_response(400, "bad_request", f"bad limit or cursor: {exc}")
    return JSONResponse({"threads": threads, "nextCursor": cursor})


async def create_thread(request: Request) -> Response:
    """``POST /threads``: a new empty thread with a random 128-bit id."""
    owner = _owner(request)
    record = ThreadRecord(owner, new_id())
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
    lease = live_lease(record)  # a run on any worker
    if lease is None and await _recovering(state, record):
        lease = record.lease  # its worker died: DBOS recovers the turn elsewhere
    run_id = channel.run_id if channel is not None else lease and str(lease.get("run"))
    body["running"] = run_id is not None
    body["runId"] = run_id
    return JSONResponse(body)


async def delete_thread(request: Request) -> Response:
    """``DELETE /threads/{id}``: stop its run if any, then delete it."""
    owner = _owner(request)
    thread_id = _thread_id(request)
    state = _state(request)
    await _load(state, owner, thread_id)
    status, *_ = await _stop(state, owner, thread_id)
    if status == "unreachable":
        raise ClientInputError(
            409, "run_in_progress", f"thread {thread_id!r} is running on a worker not answering"
        )
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
    return error_response(exc.status, exc.code, str(exc), exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    reference = new_id(nbytes=6)
    logger.error(
        "%s %s failed (reference %s): %s: %s",
        request.method,
        request.url.path,
        reference,
        type(exc).__name__,
        exc,
        exc_info=exc,
    )
    # The client sees no exception text (it may hold paths, queries, secrets): the log has it.
    message = f"the server failed; the server log has the details (reference {reference})"
    return error_response(500, "server_error", message)


async def _store_error(request: Request, exc: Exception) -> Response:
    logger.error(
        "%s %s: the thread store failed (thread %s): %s",
        request.method,
        request.url.path,
        getattr(request.state, "thread_id", None),
        exc,
        exc_info=exc,
    )
    message = "the thread store is unavailable; nothing was changed, retry soon"
    return error_response(503, "store_unavailable", message)


async def _state_error(request: Request, exc: Exception) -> Response:
    # A stored thread this agentkit cannot read (a newer agentkit's layout, a corrupt
    # record): the message names the thread and the layout, nothing secret.
    logger.error("%s %s: %s", request.method, request.url.path, exc)
    return error_response(500, "thread_unreadable", str(exc))


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
    Route("/threads/{thread_id}/steer", steer, methods=["POST"]),
    Route("/threads/{thread_id}/approvals", approvals, methods=["POST"]),
]


def _lifespan(
    state: ServeState, session: Session
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            state.task_group = tg
            tg.start_soon(state.renewals.run)
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


def _template(factory: AgentFactory) -> ReActAgent[Any, Any]:
    """The agent a durable app's recovered turns are restored on."""
    if isinstance(factory, ReActAgent):
        return factory
    agent = factory() if callable(factory) else factory
    if inspect.isawaitable(agent):
        close = getattr(agent, "close", None)
        if close is not None:
            close()  # never awaited: no "coroutine was never awaited" warning
        raise UsageError(
            "create_app(durable=True) needs an agent or a synchronous factory: the workflow "
            "of recovered turns is registered before DBOS.launch(), on a template agent"
        )
    if not isinstance(agent, ReActAgent):
        raise TypeError(f"the agent factory returned {type(agent).__name__}, not ReActAgent")
    return agent


_ERROR_HANDLERS: dict[type[BaseException], ExceptionHandler] = {
    ClientInputError: _client_error,
    SessionError: _store_error,
    StateError: _state_error,
    HTTPException: _http_error,
    Exception: _server_error,
}
"""How the app answers each kind of error (an unexpected one: 500, logged, no detail)."""


def create_app(
    factory: AgentFactory,
    *,
    sessions: Session | None = None,
    auth_token: str | Mapping[str, str] | None = None,
    deps: DepsBuilder | None = None,
    allowed_hosts: Collection[str] | None = None,
    cors_origins: Collection[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    max_runs_per_client: int | None = DEFAULT_MAX_RUNS_PER_CLIENT,
    durable: bool = False,
) -> Starlette:
    """Serve an agent over HTTP: AG-UI at ``POST /agui``, a web chat at ``GET /``.

    Args:
        factory: A callable returning a fresh ``ReActAgent`` (sync or async), or an agent
            to copy per conversation with ``agent.copy()`` (model, toolkit, hooks, usage
            limits, compactor and every other setting shared; the conversation not).
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
        lease_seconds: How long a run's claim on its thread lasts without renewal (it is
            renewed every third of it): a worker killed mid-run frees its thread after
            this long. At most 30.
        max_runs_per_client: Most runs one client may have going at once (a run over it
            is answered ``429 too_many_runs`` with ``Retry-After``); the client is the
            token's owner when there are tokens, else the peer address. None: no cap.
        durable: Run every turn as a DBOS workflow (``pip install 'agentkit[dbos]'``): a
            worker killed mid-turn has the turn finished by the worker DBOS recovers it on
            (completed model requests and tool calls are not repeated), and that worker
            commits it to the thread. The application configures DBOS (``DBOS(config=...)``)
            before calling ``create_app`` and launches it (``DBOS.launch()``) after. The
            factory must then be an agent or a synchronous factory (a recovered turn runs on
            a copy of that template). See docs/serving.md.

    Returns:
        A Starlette app; run it with uvicorn. Its lifespan must run (uvicorn does; when
        mounting it in another app, enter ``app.router.lifespan_context(app)`` yourself).
    """
    from pathlib import Path

    if not 0 < lease_seconds <= 30:
        raise ValueError(f"lease_seconds must be in (0, 30], got {lease_seconds!r}")
    session = sessions or SQLiteSession(Path("~/.agentkit/serve.db").expanduser())
    guard = Guard(auth_token, allowed_hosts, cors_origins)
    runs = RunsPerClient(max_runs_per_client, by_owner=bool(guard.tokens))
    state = ServeState(factory, session, guard, deps, max_body_bytes, runs, lease_seconds)
    if durable:
        state.durable = DurableTurns(_template(factory), state.store)
    app = Starlette(
        routes=_ROUTES + APP_ROUTES,  # MCP Apps: a trusted server's ui:// UI (_apps.py)
        middleware=_cors(cors_origins),
        lifespan=_lifespan(state, session),
        exception_handlers=_ERROR_HANDLERS,
    )
    app.state.serve = state
    app.state.mcp_apps = AppSessions()
    return app

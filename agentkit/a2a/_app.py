"""``to_a2a``: an agentkit agent as an A2A 1.0 server (an ASGI app on the SDK's components).

Routes: ``GET /.well-known/agent-card.json`` (public) and ``POST /`` (JSON-RPC:
``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``ListTasks``, ``CancelTask``,
``SubscribeToTask``). Push-notification methods answer the spec's
``PushNotificationNotSupportedError``; a request without the ``A2A-Version: 1.0`` header (a
0.3 client) gets the spec's ``VersionNotSupportedError``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._version import __version__
from agentkit.a2a._executor import AgentFactory, AgentkitExecutor
from agentkit.a2a._guard import DEFAULT_MAX_BODY, Guard
from agentkit.a2a._store import FreshTaskIds, SessionTaskStore, context_key
from agentkit.agent import ReActAgent
from agentkit.session import Session, SQLiteSession, interrupt_session

__all__ = ["to_a2a"]

_MAX_ID = 150  # a context id becomes part of a session id (at most 200 characters)
_PART_KINDS = {"text", "data", "url"}
_MODES = ["text/plain", "application/json"]
_CHAT_SKILL = AgentSkill(id="chat", name="chat", description="Answers messages.", tags=["chat"])


def _check_id(value: str, what: str) -> None:
    if len(value) > _MAX_ID:
        raise InvalidParamsError(message=f"{what} must be at most {_MAX_ID} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidParamsError(message=f"{what} must not contain control characters")


def _check_message(message: Message) -> None:
    """Refuse a message the agent cannot take, before anything is stored."""
    _check_id(message.context_id, "the context id")
    _check_id(message.task_id, "the task id")
    if not message.parts:
        raise InvalidParamsError(message="the message has no parts")
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind not in _PART_KINDS:
            raise ContentTypeNotSupportedError(
                message=f"a {kind or 'empty'} part is not supported: send text, data or a url"
            )


class _Handler(DefaultRequestHandlerV2):
    """The SDK's request handler, with agentkit's input checks and a cross-worker cancel."""

    def __init__(self, executor: AgentkitExecutor, store: SessionTaskStore, card: AgentCard):
        super().__init__(
            agent_executor=executor,
            task_store=store,
            agent_card=card,
            request_context_builder=SimpleRequestContextBuilder(
                task_id_generator=FreshTaskIds(store)
            ),
        )
        self.tasks = store
        self.session = executor.session
        self.executor = executor

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        _check_message(params.message)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        _check_message(params.message)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        # A task running on another worker: reach its run through the store's control
        # channel (agentkit's interrupt), then let the SDK record the cancel.
        if params.id not in self.executor.live:
            task = await self.tasks.get(params.id, context)
            running = (TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_SUBMITTED)
            if task is not None and task.status.state in running:
                await interrupt_session(self.session, context_key(task.context_id))
        canceled: Task | None = await super().on_cancel_task(params, context)
        return canceled


def _skills(
    agent: ReActAgent[Any, Any], given: Sequence[AgentSkill | dict[str, Any]] | None
) -> list[AgentSkill]:
    if given is not None:
        return [s if isinstance(s, AgentSkill) else AgentSkill(**s) for s in given]
    skills = [
        AgentSkill(id=tool.name, name=tool.name, description=tool.description, tags=["tool"])
        for tool in agent.toolkit.tools.values()
    ]
    if not skills:  # an agent without tools still answers: one skill, the agent itself
        skills = [
            AgentSkill(
                id=agent.name, name=agent.name, description=agent.sys_prompt[:500], tags=["chat"]
            )
        ]
    return skills


def to_a2a(
    agent_or_factory: AgentFactory,
    *,
    sessions: Session | None = None,
    auth_token: str | None = None,
    name: str | None = None,
    description: str | None = None,
    skills: Sequence[AgentSkill | dict[str, Any]] | None = None,
    url: str | None = None,
    version: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
) -> Starlette:
    """Serve an agent over A2A 1.0 (JSON-RPC binding) as an ASGI app.

    Args:
        agent_or_factory: A ``ReActAgent`` (copied per task with ``agent.copy()``) or a
            callable returning a fresh one (sync or async).
        sessions: Where each context's agent state and every task are stored (default:
            ``SQLiteSession`` in ``~/.agentkit/a2a.db``). Workers sharing a store serve
            the same contexts and tasks.
        auth_token: A bearer token required on every request but the agent card (which
            then declares the ``bearer`` security scheme). None: no token (keep the server
            on loopback).
        name: The card's name (default: the agent's).
        description: The card's description (default: the agent's system prompt, cut).
        skills: The card's skills (``AgentSkill`` or its fields as a dict); default: one
            per tool of the agent's toolkit.
        url: The JSON-RPC endpoint's public URL in the card (default: the URL the card
            was fetched from, so a mounted app or a proxy should set it).
        version: The card's version (default: agentkit's).
        max_body_bytes: Largest accepted request body.

    Returns:
        A Starlette app. Its lifespan must run (uvicorn does); it binds nothing itself.
    """
    session = sessions or SQLiteSession(Path("~/.agentkit/a2a.db").expanduser())
    store = SessionTaskStore(session)
    executor = AgentkitExecutor(agent_or_factory, session, store)
    # A template agent fills the card now; a factory's agent fills it on the first fetch.
    template = agent_or_factory if isinstance(agent_or_factory, ReActAgent) else None
    card = _card(template, name=name, description=description, skills=skills, version=version)
    if url is not None:
        card.supported_interfaces[0].url = url
    if auth_token:
        _require_bearer(card)
    handler = _Handler(executor, store, card)
    cards = _CardEndpoint(executor, card, name, description, skills, url, ready=bool(template))
    rpc = create_jsonrpc_routes(handler, "/")[0]
    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, cards.serve, methods=["GET"]),
        Route("/", rpc.endpoint, methods=["POST"], name="a2a_rpc"),
    ]
    app = Starlette(routes=routes, lifespan=_lifespan(handler, session, owned=sessions is None))
    app.add_middleware(
        Guard,
        token=auth_token,
        max_body=max_body_bytes,
        public_paths=frozenset({AGENT_CARD_WELL_KNOWN_PATH}),
    )
    app.state.a2a_handler = handler
    return app


def _card(
    template: ReActAgent[Any, Any] | None,
    *,
    name: str | None,
    description: str | None,
    skills: Sequence[AgentSkill | dict[str, Any]] | None,
    version: str | None,
) -> AgentCard:
    """The agent card: from the template agent, or placeholders a factory's agent fills."""
    return AgentCard(
        name=name or (template.name if template else "agent"),
        description=description or (template.sys_prompt[:500] if template else "An agent."),
        skills=_skills(template, skills) if template else [_CHAT_SKILL],
        version=version or __version__,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1/",  # to_a2a(url=...), else the URL the card is fetched from
                protocol_binding="JSONRPC",
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
    )


def _require_bearer(card: AgentCard) -> None:
    """Declare on ``card`` that every request but its fetch needs a bearer token."""
    card.security_schemes["bearer"].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer", description="Authorization: Bearer <token>"
            )
        )
    )
    card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))


class _CardEndpoint:
    """``GET /.well-known/agent-card.json``: the card, filled from the agent on first need."""

    def __init__(
        self,
        executor: AgentkitExecutor,
        card: AgentCard,
        name: str | None,
        description: str | None,
        skills: Sequence[AgentSkill | dict[str, Any]] | None,
        url: str | None,
        *,
        ready: bool,
    ) -> None:
        self.executor = executor
        self.card = card
        self.name = name
        self.description = description
        self.skills = skills
        self.url = url
        self.ready = ready
        self.filled = anyio.Lock()

    async def fill(self) -> None:
        """Name, description and skills from the agent (built once, on first need)."""
        async with self.filled:
            if self.ready:
                return
            agent = await self.executor.new_agent()
            self.card.name = self.name or agent.name
            self.card.description = self.description or agent.sys_prompt[:500]
            del self.card.skills[:]
            self.card.skills.extend(_skills(agent, self.skills))
            self.ready = True

    async def serve(self, request: Request) -> Response:
        """The card, with the endpoint's URL where the client reached us (unless given)."""
        await self.fill()
        served = AgentCard()
        served.CopyFrom(self.card)
        if self.url is None:
            served.supported_interfaces[0].url = str(request.url_for("a2a_rpc"))
        return JSONResponse(agent_card_to_dict(served))


def _lifespan(
    handler: _Handler, session: Session, *, owned: bool
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """Close the handler (and the session ``to_a2a`` opened itself) on shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await handler.aclose()
                if owned:
                    await session.close()

    return lifespan

"""``MCPClient``: one MCP server's tools, resources and prompts, over stdio or HTTP.

The client keeps one live :class:`~agentkit.mcp._connection.Connection` (a runner task that
owns the SDK session). Every request looks the live connection up at call time, so a server
that crashed is restarted transparently on the next request (bounded retries with backoff),
and callables handed out earlier never hold a stale session. The ``mcp`` SDK is imported
only when a connection is made.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio

from agentkit.exceptions import MCPConnectionError, MCPError, MCPProtocolError
from agentkit.mcp._bridge import Registrations
from agentkit.mcp._callbacks import (
    ElicitationCallback,
    SamplingApproval,
    SamplingModels,
    make_elicitation_callback,
    make_logging_callback,
    make_roots_callback,
    make_sampling_callback,
)
from agentkit.mcp._calls import call_once, call_stream
from agentkit.mcp._client_events import ClientEvents, ResourceCallback
from agentkit.mcp._config import ServerConfig
from agentkit.mcp._connection import Connection
from agentkit.mcp._convert import content_to_blocks
from agentkit.mcp._defenses import ToolChange
from agentkit.mcp._tasks import MCPTask, TaskUpdates, attach_task, call_via_task, start_task
from agentkit.mcp._tool import MCPToolFunction
from agentkit.messages import Msg
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client
    from mcp_types import LoggingLevel

__all__ = ["MCPClient", "MCPToolFunction"]

# Error messages name the request as it appears on the wire (and in the server's logs).
_WIRE_METHODS = {
    "list_tools": "tools/list",
    "list_resources": "resources/list",
    "list_resource_templates": "resources/templates/list",
    "list_prompts": "prompts/list",
}


class MCPClient:
    """A client for one MCP server.

    Args:
        name: Unique name of this server in your application (used in logs, metadata and
            ``remove_mcp_clients``).
        server: ``StdioServer(...)`` or ``HttpServer(...)``.
        sampling_model: Answers the server's ``sampling/createMessage`` requests (tools
            offered by the server included), or ``{name: model}`` picked per request by the
            server's ``modelPreferences`` hints (see :func:`~agentkit.mcp._callbacks.pick_model`).
        sampling_approval: ``(messages) -> bool`` gate run before each sampling request.
        elicitation_callback: ``(message, schema) -> dict | None`` for ``elicitation/create``.
        roots: Paths or ``file://`` URIs offered to the server as roots.
        timeout: Seconds any single request may take (tool calls included) before it is
            abandoned (the server is sent ``notifications/cancelled``); None: no limit.
        connect_timeout: Seconds allowed for starting/reaching the server and the handshake.
        log_level: Ask the server for log messages at this level and above (they go to the
            ``agentkit.mcp.<name>`` logger); None leaves the server's default.
        max_reconnects: Attempts to re-establish a lost connection before a request fails.
        protocol: ``"auto"`` (2026-07-28 if the server speaks it, else the handshake era) or
            ``"legacy"`` (force the ``initialize`` handshake).
        max_result_bytes: Longest message read from a stdio server (default 16 MiB); a
            longer tool result is cut while it is read and ends with a note saying so.
        max_result_chars: Longest tool-result text handed on (to the model); longer text is
            cut with a note. None: no limit.
        trust: ``"untrusted"`` (default): once a run took in open-world content, this
            server's tools not marked read-only need a human's approval; ``"trusted"``
            relaxes that (see :mod:`agentkit.mcp._defenses`).
        pin_tools: Pin tool definitions: a tool the server changes after registration is
            disabled (and ``on_tool_change`` called) until :meth:`accept_tool_changes`.
        max_description_chars: Longest tool description shown to the model.
        on_tool_change: ``(ToolChange) -> None`` (sync or async), called on a pinned
            tool's change.
        retry_interrupted: When the connection drops (or an HTTP server forgets the
            session) while a call runs, reconnect and send the call once more if the server
            marks the tool ``readOnlyHint`` or ``idempotentHint``; the retry is recorded
            in the result's ``metadata["mcp_retried"]``. Other interrupted calls raise
            :class:`~agentkit.exceptions.MCPCallInterrupted`. False: never send one again.

    Attributes:
        events: What the server says changed, on its own
            (:class:`~agentkit.mcp.ClientEvents`):
            ``client.events.on_tools_changed(callback)``,
            ``client.events.on_list_changed("prompts", callback)``.
    """

    def __init__(
        self,
        name: str,
        server: ServerConfig,
        *,
        sampling_model: SamplingModels | None = None,
        sampling_approval: SamplingApproval | None = None,
        elicitation_callback: ElicitationCallback | None = None,
        roots: Sequence[str | os.PathLike[str]] | None = None,
        timeout: float | None = 300.0,
        connect_timeout: float = 30.0,
        log_level: str | None = None,
        max_reconnects: int = 3,
        protocol: Literal["auto", "legacy"] = "auto",
        max_result_bytes: int | None = None,
        max_result_chars: int | None = 200_000,
        trust: Literal["untrusted", "trusted"] = "untrusted",
        pin_tools: bool = True,
        max_description_chars: int | None = 4000,
        on_tool_change: Callable[[ToolChange], object] | None = None,
        retry_interrupted: bool = True,
    ) -> None:
        self.name = name
        self.server = server
        self.sampling_model = sampling_model
        self.sampling_approval = sampling_approval
        self.elicitation_callback = elicitation_callback
        self.roots = list(roots) if roots is not None else None
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.log_level = log_level
        self.max_reconnects = max_reconnects
        self.protocol = protocol
        self.max_result_bytes = max_result_bytes
        self.max_result_chars = max_result_chars
        self.trust = trust
        self.pin_tools = pin_tools
        self.max_description_chars = max_description_chars
        self.on_tool_change = on_tool_change
        self.retry_interrupted = retry_interrupted
        # Definition hash per server tool name, set when first registered: save it with
        # your session and restore it to keep pins across restarts.
        self.pins: dict[str, str] = {}
        self.logger = logging.getLogger(f"agentkit.mcp.{name}")
        self._conn: Connection | None = None
        self._lock = anyio.Lock()
        self._wanted = False  # connect() called and close() not yet
        self._entered = 0  # depth of nested ``async with client`` blocks
        self._tools: list[mcp_types.Tool] | None = None
        self._tools_expiry = math.inf
        # The annotations of the last listing, whatever its cache hint said (retry safety).
        self._annotations: dict[str, mcp_types.ToolAnnotations | None] = {}
        self._ttl_ms: int | None = None
        self.reconnects = 0
        # Task status notifications (2025-11-25) for the tasks being waited on.
        self.task_updates = TaskUpdates()
        # The registrations of its tools in toolkits (held by them; bridge API).
        self.registrations = Registrations()
        self.events = ClientEvents(self, self._forget_tools)

    def __repr__(self) -> str:
        return f"MCPClient(name={self.name!r}, server={self.server!r})"

    # -- lifecycle ---------------------------------------------------------------------
    async def connect(self) -> None:
        """Start (stdio) or reach (HTTP) the server and complete the handshake.

        Idempotent. Raises:
            MCPConnectionError: the server cannot be started or reached.
        """
        async with self._lock:
            self._wanted = True
            if self._conn is None or not self._conn.healthy:
                await self._open()

    async def close(self) -> None:
        """Close the session and stop a stdio server (bounded; safe from any task).

        Closes at once, even inside nested ``async with`` blocks; idempotent.
        """
        self._wanted = False
        self._entered = 0
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.stop()

    async def __aenter__(self) -> MCPClient:
        await self.connect()
        self._entered += 1
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # Nested blocks (a helper that also says ``async with client``) share the
        # connection: only the outermost exit closes it.
        self._entered = max(0, self._entered - 1)
        if not self._entered:
            await self.close()

    @property
    def is_connected(self) -> bool:
        """Whether a healthy session is up right now."""
        return self._conn is not None and self._conn.healthy

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (and :meth:`connect` not since).

        A call that ``close()`` cut short ends with an error result: it is neither sent
        again nor reported as ``MCPCallInterrupted`` (the application stopped it).
        """
        return not self._wanted

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version (``"2025-11-25"``, ``"2026-07-28"``...)."""
        client = self._conn.client if self._conn else None
        return client.protocol_version if client is not None else None

    @property
    def server_info(self) -> mcp_types.Implementation | None:
        """The server's ``Implementation`` info (name, version), once connected."""
        client = self._conn.client if self._conn else None
        return client.server_info if client is not None else None

    @property
    def server_capabilities(self) -> mcp_types.ServerCapabilities | None:
        """The capabilities the server announced, once connected."""
        client = self._conn.client if self._conn else None
        return client.server_capabilities if client is not None else None

    @property
    def instructions(self) -> str | None:
        """The server's instructions, if it sent any."""
        client = self._conn.client if self._conn else None
        return client.instructions if client is not None else None

    def _build_client(self, transport: Any, conn: Connection) -> Client:
        from mcp import Client
        from mcp_types import Implementation, SamplingCapability, SamplingToolsCapability

        from agentkit._version import __version__

        kwargs: dict[str, Any] = {
            "mode": self.protocol,
            # No session-wide read timeout: it would also bound the handshake, which
            # connect_timeout governs. Each request gets ``timeout`` instead (see _guard).
            "message_handler": functools.partial(self.events.handle_message, conn),
            "logging_callback": make_logging_callback(self.logger),
            "client_info": Implementation(name="agentkit", version=__version__),
            "cache": None,  # we cache the tool list ourselves and refresh on change events
            "extensions": [self.task_updates.extension()],
        }
        if self.log_level is not None:
            kwargs["log_level"] = self.log_level
        if self.sampling_model is not None:
            kwargs["sampling_callback"] = make_sampling_callback(
                self.sampling_model, self.sampling_approval, self.name
            )
            # Declares ``sampling.tools``: servers may offer tools to our model.
            kwargs["sampling_capabilities"] = SamplingCapability(tools=SamplingToolsCapability())
        if self.elicitation_callback is not None:
            kwargs["elicitation_callback"] = make_elicitation_callback(self.elicitation_callback)
        if self.roots is not None:
            kwargs["list_roots_callback"] = make_roots_callback(lambda: self.roots or [])
        return Client(transport, **kwargs)

    async def _open(self) -> None:
        conn = Connection(self.name, self.server, self._build_client, self._ready, self.logger)
        conn.max_message_bytes = self.max_result_bytes
        deadline = self.connect_timeout
        oauth = getattr(self.server, "oauth", None)
        if oauth is not None and deadline is not None:
            deadline += oauth.login_timeout  # a first login waits for a human in a browser
        await conn.start(deadline)
        if not self._wanted:  # close() ran while we were (re)connecting
            await conn.stop()
            raise MCPConnectionError(f"MCP client {self.name!r} was closed")
        old, self._conn = self._conn, conn
        if old is not None:
            await old.stop(grace=1.0)

    async def _ready(self, conn: Connection) -> None:
        """Runner-side setup once the session is up: log level, change listeners."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        assert conn.client is not None
        modern = conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS
        self.events.start(conn, listen=modern)
        if not modern and self.log_level is not None:
            await self._set_legacy_log_level(conn.client)
        if self._tools is not None:  # a reconnect: the server may have changed its tools
            self.events.tools_changed()

    def _forget_tools(self) -> None:
        """Drop the cached tool list (the server changed it): the next listing asks."""
        self._tools = None

    async def _set_legacy_log_level(self, client: Client) -> None:
        import warnings

        from mcp.shared.exceptions import MCPDeprecationWarning

        with warnings.catch_warnings():  # deprecated only in 2026-07-28, which this is not
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            # The server refuses a level it does not know; the SDK types only the valid ones.
            level = cast("LoggingLevel", self.log_level)
            request = client.session.set_logging_level(level)
        try:
            await request
        except Exception as exc:  # a server without logging support: keep going
            self.logger.debug("logging/setLevel failed: %s", exc)

    async def live_connection(self) -> Connection:
        """The healthy connection, reconnecting a lost one (bounded retries, backoff).

        Internal API of ``agentkit.mcp`` (its call paths); not part of the public surface.
        """
        conn = self._conn
        if conn is not None and conn.healthy:
            return conn
        async with self._lock:
            if not self._wanted:
                raise MCPConnectionError(
                    f"MCP client {self.name!r} is not connected; call connect() first"
                )
            conn = self._conn
            if conn is not None and conn.healthy:
                return conn
            delay, error = 0.1, None
            for attempt in range(max(1, self.max_reconnects)):
                if attempt:
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                try:
                    await self._open()
                except MCPConnectionError as exc:
                    error = exc
                    continue
                self.reconnects += 1
                self.logger.info("reconnected to MCP server %r", self.name)
                assert self._conn is not None
                return self._conn
            raise MCPConnectionError(
                f"MCP server {self.name!r} is down and {self.max_reconnects} reconnects failed"
            ) from error

    async def _session(self) -> Client:
        conn = await self.live_connection()
        assert conn.client is not None
        return conn.client

    async def set_roots(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        """Replace the roots offered to the server and tell it (``roots/list_changed``).

        Only a client created with ``roots=`` announces the roots capability. In 2026-07-28
        there are no client notifications: the server sees the new roots when it asks.
        """
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if self.roots is None:
            raise MCPError("this client was created without roots=; it offers no roots")
        self.roots = list(roots)
        conn = self._conn
        if conn is None or not conn.healthy or conn.client is None:
            return
        if conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        from agentkit.mcp._context import handshake_era_api

        with self._guard("notifications/roots/list_changed"), handshake_era_api():
            await conn.client.session.send_roots_list_changed()

    async def accept_tool_changes(self, names: Sequence[str] | None = None) -> None:
        """Accept the server's current definitions of ``names`` (default: all changed ones).

        Their pins are replaced and every toolkit the client is registered in refreshed: the
        model sees the new definitions from then on.
        """
        for tool in await self.list_tools(refresh=True):
            if names is None or tool.name in names:
                self.pins.pop(tool.name, None)
        self.registrations.remove_changed(names)
        await self.events.refresh_toolkits()

    # -- tools -------------------------------------------------------------------------
    async def list_tools(self, *, refresh: bool = False) -> list[mcp_types.Tool]:
        """All tools of the server (every ``tools/list`` page), cached until a change event.

        Args:
            refresh: Ignore the cache.
        """
        if self._tools is not None and not refresh and anyio.current_time() < self._tools_expiry:
            return list(self._tools)
        self._ttl_ms = None
        tools: list[mcp_types.Tool] = await self._all_pages("list_tools", "tools")
        # 2026-07-28 cache hints: ttlMs 0 means "do not cache"; otherwise keep it that long
        # (or, without a hint, until the server announces a change).
        ttl = self._ttl_ms
        self._annotations = {t.name: t.annotations for t in tools}
        self._tools = tools if ttl != 0 else None
        self._tools_expiry = anyio.current_time() + ttl / 1000 if ttl else math.inf
        return list(tools)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, object] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the MCP request timeout (wire level)
        meta: dict[str, object] | None = None,
    ) -> ToolResponse:
        """Call a tool and return its final response (errors become ``is_error`` responses).

        Args:
            name: The server-side tool name.
            arguments: The tool's arguments.
            timeout: Seconds for this call (default: the client's ``timeout``).
            meta: Sent as the request's ``_meta`` as is (trace context, app keys).

        A call the server refused with HTTP 404 for our session, or whose HTTP connection
        never opened, never ran: it is sent again on a new session. A call running when the
        connection dropped is sent again (once) only if the tool is read-only or idempotent
        (see ``retry_interrupted``).

        Raises:
            MCPCallInterrupted: the connection dropped during the call and it was not sent
                again (the server may have run it).
            MCPConnectionError: the server cannot be reached.
        """
        if self._requires_task(name):
            return await call_via_task(self, name, arguments or {}, meta)
        response = await call_once(self, name, arguments or {}, timeout, meta)
        if (response.metadata or {}).get("mcp_requires_tasks"):  # 2026-07-28: never ran
            return await call_via_task(self, name, arguments or {}, meta)
        return response

    def retry_hint(self, name: str) -> str | None:
        """Why a second run of tool ``name`` would have no second effect, else None.

        ``"readOnlyHint"`` or ``"idempotentHint"``, as the server's last listing marks the
        tool (and ``retry_interrupted`` allows). Internal API of ``agentkit.mcp`` (its call
        paths). Any server's hints count, trusted or not: a repeat goes only to the server
        that made the claim, which could repeat an effect by itself anyway.
        """
        annotations = self._annotations.get(name)
        if not self.retry_interrupted or annotations is None:
            return None
        if annotations.read_only_hint is True:
            return "readOnlyHint"
        if annotations.idempotent_hint is True:
            return "idempotentHint"
        return None

    def _requires_task(self, name: str) -> bool:
        """Whether the listed tool ``name`` declares ``execution.taskSupport: "required"``.

        (2025-11-25 listings carry it; on 2026-07-28 the server refuses a plain call with
        ``-32021`` instead, and the call is sent again as a task.)
        """
        for tool in self._tools or ():
            if tool.name == name:
                return tool.execution is not None and tool.execution.task_support == "required"
        return False

    async def call_tool_as_task(
        self,
        name: str,
        arguments: dict[str, object] | None = None,
        *,
        ttl: float | None = None,
        meta: dict[str, object] | None = None,
    ) -> MCPTask:
        """Call a tool as an MCP task (SEP-1686): returns once the server created the task.

        ``await task.result()`` waits for the outcome; ``task.status()`` polls;
        ``task.cancel()`` stops it (so does an interrupt while awaiting ``result()``).

        Args:
            name: The server-side tool name (its ``taskSupport`` must be optional or required).
            arguments: The tool's arguments.
            ttl: Seconds the server should keep the task after creating it (2025-11-25;
                on 2026-07-28 the server picks the TTL).
            meta: Sent as the request's ``_meta`` as is.

        Raises:
            MCPError: the server did not create a task.
        """
        ttl_ms = round(ttl * 1000) if ttl is not None else None
        return await start_task(self, name, arguments or {}, ttl_ms=ttl_ms, meta=meta)

    async def get_task(self, task_id: str, *, tool: str = "") -> MCPTask:
        """The task ``task_id`` this client (its principal) created earlier, polled once.

        On 2026-07-28 a task outlives the connection that created it, so a reconnected
        client picks it up here; on 2025-11-25 a task lives only as long as its session.

        Args:
            task_id: The server's id for the task.
            tool: The tool's name, for the response's metadata.

        Raises:
            MCPError: the server knows no such task (or it is another caller's: servers
                answer both alike).
        """
        return await attach_task(self, task_id, tool)

    def call_tool_stream(
        self,
        name: str,
        arguments: dict[str, object] | None = None,
        *,
        timeout: float | None = None,
        meta: dict[str, object] | None = None,
    ) -> AsyncIterator[ToolResponse]:
        """Call a tool, yielding progress chunks (``is_last=False``) then the final response.

        Cancelling the iteration cancels the call: the server receives
        ``notifications/cancelled``. ``meta`` is sent as the request's ``_meta``. Interrupted
        calls are handled as by :meth:`call_tool` (a retry first yields a progress chunk
        saying so); the iteration may raise ``MCPCallInterrupted``.
        """
        if self._requires_task(name):
            return _single(call_via_task(self, name, arguments or {}, meta))
        return self._stream_or_task(name, arguments or {}, timeout, meta)

    async def _stream_or_task(
        self,
        name: str,
        arguments: dict[str, object],
        read_timeout: float | None,
        meta: dict[str, object] | None,
    ) -> AsyncIterator[ToolResponse]:
        """A streamed call, sent again as a task if a 2026-07-28 server requires one."""
        stream = cast(
            "AsyncGenerator[ToolResponse, None]",
            call_stream(self, name, arguments, read_timeout, meta),
        )
        async with contextlib.aclosing(stream) as s:
            async for chunk in s:
                if chunk.is_last and (chunk.metadata or {}).get("mcp_requires_tasks"):
                    yield await call_via_task(self, name, arguments, meta)
                    return
                yield chunk

    async def get_callable_function(self, name: str) -> MCPToolFunction:
        """A local async callable for one server tool, with its schema.

        The callable looks the live session up on every call, so it keeps working across
        reconnects.

        Raises:
            MCPError: the server has no such tool.
        """
        for tool in await self.list_tools():
            if tool.name == name:
                return MCPToolFunction(self, tool)
        raise MCPError(f"MCP server {self.name!r} has no tool {name!r}")

    # -- resources and prompts ---------------------------------------------------------
    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Bound a request by ``timeout`` and map SDK errors to agentkit's MCPError family."""
        from mcp import MCPError as SDKError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        try:
            with anyio.fail_after(self.timeout):
                yield
        except ValidationError as exc:  # the server broke the protocol's schema
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise MCPProtocolError(
                f"MCP server {self.name!r} sent an invalid answer to {what}: {problems}"
            ) from None
        except TimeoutError:
            raise MCPError(
                f"MCP server {self.name!r} did not answer {what} within {self.timeout}s"
            ) from None
        except SDKError as exc:
            if self._conn is not None and self._conn.session_lost:
                raise MCPConnectionError(
                    f"MCP server {self.name!r} lost our session during {what} "
                    "(HTTP 404: it restarted); a new session is started on the next request"
                ) from exc
            if exc.code == CONNECTION_CLOSED:
                if self._conn is not None:
                    self._conn.broken = True
                raise MCPConnectionError(
                    f"MCP server {self.name!r} closed the connection during {what}"
                ) from exc
            raise MCPError(f"MCP server {self.name!r} refused {what}: {exc.message}") from exc

    async def _all_pages(self, method: str, attr: str) -> list[Any]:
        try:
            return await self._pages_once(method, attr)
        except MCPConnectionError:
            if self._conn is None or not self._conn.session_lost:
                raise
            return await self._pages_once(method, attr)  # on a new session (spec: 404)

    async def _pages_once(self, method: str, attr: str) -> list[Any]:
        client = await self._session()
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        wire = _WIRE_METHODS.get(method, method)
        with self._guard(wire):
            for _ in range(1000):  # a paginator that never ends must not hang us
                page = await getattr(client, method)(cursor=cursor)
                items.extend(getattr(page, attr))
                # ttl_ms defaults to 0 in the model: only a hint the server sent counts.
                sent = "ttl_ms" in getattr(page, "model_fields_set", ())
                ttl = getattr(page, "ttl_ms", None) if sent else None
                if isinstance(ttl, int):  # the shortest hint of all pages wins
                    self._ttl_ms = ttl if self._ttl_ms is None else min(ttl, self._ttl_ms)
                cursor = page.next_cursor
                if not cursor:
                    break
                if cursor in seen:  # the server sent us round in a circle
                    raise MCPProtocolError(
                        f"MCP server {self.name!r} sent the {wire} cursor {cursor!r} twice "
                        f"(a pagination loop); stopped after {len(items)} items"
                    )
                seen.add(cursor)
        return items

    async def list_resources(self) -> list[mcp_types.Resource]:
        """All resources the server lists (every page)."""
        return await self._all_pages("list_resources", "resources")

    async def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]:
        """All resource templates the server lists (every page)."""
        return await self._all_pages("list_resource_templates", "resource_templates")

    async def read_resource(self, uri: str) -> list[ToolResultContent]:
        """Read a resource; its contents as text/image/audio blocks."""
        from mcp_types import EmbeddedResource

        client = await self._session()
        with self._guard(f"resources/read {uri!r}"):
            result = await client.read_resource(uri)
        return content_to_blocks([EmbeddedResource(resource=c) for c in result.contents])

    async def subscribe_resource(self, uri: str, callback: ResourceCallback) -> None:
        """Call ``callback(uri)`` (sync or async) whenever the server says ``uri`` changed.

        Handshake era: ``resources/subscribe``; 2026-07-28: the listen stream is reopened
        with the subscription.
        """
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        from agentkit.mcp._context import handshake_era_api

        if not self.events.add_resource_callback(uri, callback):
            return  # already subscribed
        conn = await self.live_connection()
        assert conn.client is not None
        if conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self.events.listen(conn)  # a stream that includes the new URI
            return
        with self._guard(f"resources/subscribe {uri!r}"), handshake_era_api():
            await conn.client.session.subscribe_resource(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        """Stop the callbacks of :meth:`subscribe_resource` for ``uri``."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        from agentkit.mcp._context import handshake_era_api

        if not self.events.remove_resource_callbacks(uri):
            return
        conn = await self.live_connection()
        assert conn.client is not None
        if conn.client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            with self._guard(f"resources/unsubscribe {uri!r}"), handshake_era_api():
                await conn.client.session.unsubscribe_resource(uri)

    async def complete(
        self,
        kind: Literal["prompt", "resource"],
        target: str,
        argument: str,
        value: str,
        context: dict[str, str] | None = None,
    ) -> list[str]:
        """Completions for an argument of a prompt or a resource template.

        ``target`` is the prompt's name or the template's URI template.
        """
        from mcp_types import PromptReference, ResourceTemplateReference

        ref: PromptReference | ResourceTemplateReference = (
            PromptReference(name=target)
            if kind == "prompt"
            else ResourceTemplateReference(uri=target)
        )
        client = await self._session()
        with self._guard(f"completion/complete {target!r}"):
            result = await client.complete(ref, {"name": argument, "value": value}, context)
        return list(result.completion.values)

    async def list_prompts(self) -> list[mcp_types.Prompt]:
        """All prompts the server lists (every page)."""
        return await self._all_pages("list_prompts", "prompts")

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> list[Msg]:
        """Render a prompt into agentkit messages."""
        client = await self._session()
        with self._guard(f"prompts/get {name!r}"):
            result = await client.get_prompt(name, arguments)
        return [
            Msg(
                name=self.name,
                content=list(content_to_blocks([m.content])),
                role="assistant" if m.role == "assistant" else "user",
            )
            for m in result.messages
        ]


async def _single(response: Awaitable[ToolResponse]) -> AsyncIterator[ToolResponse]:
    """A one-chunk stream: the final response of a call that streams no progress."""
    yield await response

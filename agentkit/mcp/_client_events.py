"""What a server tells an ``MCPClient`` on its own: list changes, resource updates.

The bookkeeping lives in :class:`ClientEvents`, a component every client has as
``client.events``: the client makes requests, its events object holds who wants to hear
about changes and tells them.

Handshake era (<= 2025-11-25): unsolicited notifications reach
:meth:`ClientEvents.handle_message`. 2026-07-28: the client opens a ``subscriptions/listen``
stream (tools, prompts and resources list changes, and the subscribed resources); a new
subscription reopens it. Both end in the same callbacks. Tool-list changes are debounced
and refresh every Toolkit the client is registered in; pinned-tool changes go to the
client's ``on_tool_change``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agentkit.mcp._defenses import ToolChange

if TYPE_CHECKING:
    from agentkit.mcp._client import MCPClient
    from agentkit.mcp._connection import Connection

__all__ = ["ClientEvents", "ListKind", "ResourceCallback", "ToolsChangedCallback"]

ToolsChangedCallback = Callable[["MCPClient"], Awaitable[None]]
ResourceCallback = Callable[[str], object]
"""``(uri) -> None`` (sync or async): the subscribed resource changed; read it again."""
ListKind = Literal["tools", "prompts", "resources"]


class ClientEvents:
    """The change notifications of one MCP client (``client.events``).

    Applications subscribe with :meth:`on_tools_changed` and :meth:`on_list_changed`
    (resource updates: ``client.subscribe_resource``, a request to the server). The other
    methods are the internal API of ``agentkit.mcp``: the client feeds its connections'
    notifications in, the toolkit bridge reports pinned-tool changes.

    Args:
        client: The client whose server sends the notifications (handed to the
            tools-changed callbacks; its ``on_tool_change`` hears of pinned-tool changes).
        forget_tools: Drops the client's cached tool list (the server changed it).
    """

    def __init__(self, client: MCPClient, forget_tools: Callable[[], None]) -> None:
        self._client = client
        self._forget_tools = forget_tools
        self._conn: Connection | None = None  # the latest connection: async callbacks run in it
        self._dirty: anyio.Event | None = None
        self._tools_changed: list[ToolsChangedCallback] = []
        self._pending: list[Any] = []
        self._list_callbacks: dict[str, list[Callable[[], object]]] = {}
        self._resource_callbacks: dict[str, list[ResourceCallback]] = {}

    # -- for applications ----------------------------------------------------------------
    def on_tools_changed(self, callback: ToolsChangedCallback) -> None:
        """Call ``callback(client)`` after the server's tool list changed (debounced)."""
        if callback not in self._tools_changed:
            self._tools_changed.append(callback)

    def remove_tools_changed_callback(self, callback: ToolsChangedCallback) -> None:
        """Forget a callback added with :meth:`on_tools_changed`."""
        if callback in self._tools_changed:
            self._tools_changed.remove(callback)

    def on_list_changed(self, kind: ListKind, callback: Callable[[], object]) -> None:
        """Call ``callback()`` (sync or async) when the server's prompts/resources/tools change."""
        self._list_callbacks.setdefault(kind, []).append(callback)

    # -- for agentkit.mcp ----------------------------------------------------------------
    def report_tool_change(self, change: ToolChange) -> None:
        """Tell the client's ``on_tool_change`` that a pinned tool changed (errors are logged)."""
        callback = self._client.on_tool_change
        if callback is not None:
            self._fire([callback], change)

    async def refresh_toolkits(self) -> None:
        """Run the :meth:`on_tools_changed` callbacks now (their errors propagate)."""
        for callback in list(self._tools_changed):
            await callback(self._client)

    def start(self, conn: Connection, *, listen: bool) -> None:
        """Hear ``conn``'s events: the debounced refresh, and (``listen``) the listen stream.

        Called by the client from the connection's runner once its session is up.
        """
        self._conn = conn
        self._dirty = anyio.Event()
        conn.spawn(self._refresh_loop)
        if listen:
            self.listen(conn)

    def listen(self, conn: Connection) -> None:
        """(Re)open the 2026-07-28 listen stream on ``conn``, with every subscribed URI."""
        conn.spawn(lambda: self._listen(conn))

    def tools_changed(self) -> None:
        """The server's tools may have changed (a reconnect): refetch and refresh."""
        self._forget_tools()
        if self._dirty is not None:
            self._dirty.set()

    def add_resource_callback(self, uri: str, callback: ResourceCallback) -> bool:
        """Call ``callback(uri)`` on ``uri``'s updates; True for its first callback."""
        first = uri not in self._resource_callbacks
        self._resource_callbacks.setdefault(uri, []).append(callback)
        return first

    def remove_resource_callbacks(self, uri: str) -> bool:
        """Forget ``uri``'s callbacks; False when it had none."""
        return self._resource_callbacks.pop(uri, None) is not None

    async def handle_message(self, conn: Connection, message: Any) -> None:
        """Handshake-era notifications and transport faults (the SDK's ``message_handler``)."""
        import mcp_types as t

        if isinstance(message, t.ToolListChangedNotification):
            self._changed("tools")
        elif isinstance(message, t.PromptListChangedNotification):
            self._changed("prompts")
        elif isinstance(message, t.ResourceListChangedNotification):
            self._changed("resources")
        elif isinstance(message, t.ResourceUpdatedNotification):
            self._changed("resource", str(message.params.uri))
        elif isinstance(message, Exception):
            self._client.logger.debug("transport error: %r", message)
            conn.note_transport_error(message)

    # -- internals -----------------------------------------------------------------------
    def _fire(self, callbacks: list[Callable[..., object]], *args: Any) -> None:
        """Run callbacks; async ones in the connection's task group (errors are logged)."""
        for callback in list(callbacks):
            try:
                result = callback(*args)
            except Exception as exc:
                self._warn("MCP %r notification callback failed: %s", exc)
                continue
            if inspect.isawaitable(result):
                self._pending.append(result)
        if self._pending and (self._conn is None or not self._conn.spawn(self._drain)):
            for pending in self._pending:  # never awaited: close them, no "never awaited"
                close = getattr(pending, "close", None)
                if close is not None:
                    close()
            self._pending.clear()

    async def _drain(self) -> None:
        while self._pending:
            try:
                await self._pending.pop(0)
            except Exception as exc:
                self._warn("MCP %r notification callback failed: %s", exc)

    def _warn(self, message: str, exc: Exception) -> None:
        self._client.logger.warning(message, self._client.name, exc)

    def _changed(self, kind: str, uri: str | None = None) -> None:
        if kind == "tools":
            self.tools_changed()
        if uri is not None:
            self._fire(self._resource_callbacks.get(uri, []), uri)
        else:
            self._fire(self._list_callbacks.get(kind, []))

    async def _listen(self, conn: Connection) -> None:
        """2026-07-28 change events via ``subscriptions/listen``."""
        from mcp.client.subscriptions import (
            PromptsListChanged,
            ResourcesListChanged,
            ResourceUpdated,
            ToolsListChanged,
        )

        assert conn.client is not None
        kinds = {ToolsListChanged: "tools", PromptsListChanged: "prompts"}
        kinds[ResourcesListChanged] = "resources"
        try:
            async with conn.client.listen(
                tools_list_changed=True,
                prompts_list_changed=True,
                resources_list_changed=True,
                resource_subscriptions=sorted(self._resource_callbacks),
            ) as subscription:
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        self._changed("resource", str(event.uri))
                    elif type(event) in kinds:
                        self._changed(kinds[type(event)])
        except Exception as exc:  # no listen support, or the stream dropped
            self._client.logger.debug("subscriptions/listen ended: %r", exc)

    async def _refresh_loop(self) -> None:
        """Coalesce bursts of change events into one refresh of the registered tools."""
        while True:
            dirty = self._dirty
            assert dirty is not None
            await dirty.wait()
            await anyio.sleep(0.05)  # servers often announce several changes at once
            self._dirty = anyio.Event()
            for callback in list(self._tools_changed):
                try:
                    await callback(self._client)
                except Exception as exc:
                    self._warn("refreshing tools of %r failed: %s", exc)

"""What a server tells an ``MCPClient`` on its own: list changes, resource updates.

Handshake era (<= 2025-11-25): unsolicited notifications reach ``_on_message``. 2026-07-28:
the client opens a ``subscriptions/listen`` stream (tools, prompts and resources list
changes, and the subscribed resources); a new subscription reopens it. Both end in the same
callbacks. Tool-list changes are debounced and refresh every Toolkit the client is
registered in; pinned-tool changes go to ``on_tool_change``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, cast

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
    """Change notifications of an MCP client (a mixin of :class:`MCPClient`)."""

    name: str
    logger: logging.Logger
    on_tool_change: Callable[[ToolChange], object] | None
    _conn: Connection | None
    _tools: Any
    _dirty: anyio.Event | None
    _tools_changed: list[ToolsChangedCallback]
    _pending_callbacks: list[Any]
    _list_callbacks: dict[str, list[Callable[[], object]]]
    _resource_callbacks: dict[str, list[ResourceCallback]]

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

    def _mark_tools_changed(self) -> None:
        self._tools = None
        if self._dirty is not None:
            self._dirty.set()

    def _fire(self, callbacks: list[Callable[..., object]], *args: Any) -> None:
        """Run callbacks; async ones in the connection's task group (errors are logged)."""
        for callback in list(callbacks):
            try:
                result = callback(*args)
            except Exception as exc:
                self.logger.warning("MCP %r notification callback failed: %s", self.name, exc)
                continue
            if inspect.isawaitable(result):
                self._pending_callbacks.append(result)
        if self._pending_callbacks and (
            self._conn is None or not self._conn.spawn(self._drain_callbacks)
        ):
            for pending in self._pending_callbacks:
                close = getattr(pending, "close", None)
                if close is not None:
                    close()
            self._pending_callbacks.clear()

    async def _drain_callbacks(self) -> None:
        while self._pending_callbacks:
            try:
                await self._pending_callbacks.pop(0)
            except Exception as exc:
                self.logger.warning("MCP %r notification callback failed: %s", self.name, exc)

    def report_tool_change(self, change: ToolChange) -> None:
        """Tell ``on_tool_change`` that a pinned tool changed (errors are logged)."""
        if self.on_tool_change is not None:
            self._fire([self.on_tool_change], change)

    def _changed(self, kind: str, uri: str | None = None) -> None:
        if kind == "tools":
            self._mark_tools_changed()
        if uri is not None:
            self._fire(self._resource_callbacks.get(uri, []), uri)
        else:
            self._fire(self._list_callbacks.get(kind, []))

    async def _on_message(self, conn: Connection, message: Any) -> None:
        """Handshake-era notifications and transport faults (``message_handler``)."""
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
            self.logger.debug("transport error: %r", message)
            conn.note_transport_error(message)

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
            self.logger.debug("subscriptions/listen ended: %r", exc)

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
                    await callback(cast("MCPClient", self))  # this mixin is only MCPClient's
                except Exception as exc:
                    self.logger.warning("refreshing tools of %r failed: %s", self.name, exc)

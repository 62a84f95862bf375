"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): a tool's ``ui://`` resource.

A server ties an interactive UI to a tool with ``_meta.ui.resourceUri`` (or the legacy
``_meta["ui/resourceUri"]``) in its ``tools/list`` entry; the UI is a ``ui://`` resource of
the same server, an HTML document served as ``text/html;profile=mcp-app``. Hosts render it
in a sandboxed frame (``agentkit.serve`` does, for servers with ``trust="trusted"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentkit.exceptions import MCPError
from agentkit.mcp._tool import MCPTool

if TYPE_CHECKING:
    from agentkit.tools._base import Tool

__all__ = ["APP_MIME_TYPE", "UIResource", "app_tool", "read_ui_resource", "ui_resource_uri"]

APP_MIME_TYPE = "text/html;profile=mcp-app"
MAX_UI_BYTES = 5 * 1024 * 1024  # a single-file app with its SDK inlined is well under this


@dataclass(frozen=True, slots=True)
class UIResource:
    """A ``ui://`` resource as read from its server.

    Attributes:
        uri: The ``ui://`` URI.
        html: The HTML document.
        meta: The resource's ``_meta.ui`` (``csp``, ``permissions``, ``prefersBorder``...).
    """

    uri: str
    html: str
    meta: dict[str, object] = field(default_factory=dict)


def _ui_meta(meta: object) -> dict[str, object]:
    ui = meta.get("ui") if isinstance(meta, dict) else None
    return ui if isinstance(ui, dict) else {}


def ui_resource_uri(tool: Tool | None) -> str | None:
    """The ``ui://`` resource an MCP server's tool declares, or None (any other tool)."""
    if not isinstance(tool, MCPTool):
        return None
    meta = tool.definition.meta
    uri = _ui_meta(meta).get("resourceUri")
    if uri is None and isinstance(meta, dict):
        uri = meta.get("ui/resourceUri")  # the format ext-apps still reads for compatibility
    return uri if isinstance(uri, str) and uri.startswith("ui://") else None


def app_tool(tool: Tool | None, server: str) -> MCPTool | None:
    """``tool`` when a ``server``'s app may call it: that server's, visible to apps.

    ``_meta.ui.visibility`` (``["model", "app"]`` by default) without ``"app"`` keeps a
    tool from the server's UI.
    """
    if not isinstance(tool, MCPTool) or tool.client.name != server:
        return None
    visibility = _ui_meta(tool.definition.meta).get("visibility")
    if isinstance(visibility, list) and "app" not in visibility:
        return None
    return tool


async def read_ui_resource(tool: MCPTool, uri: str) -> UIResource:
    """Read ``uri`` from the server of ``tool``: the HTML of its app.

    Raises:
        MCPError: the server has no such resource, or not as ``text/html;profile=mcp-app``
            text, or it is over 5 MiB.
    """
    client = tool.client
    conn = await client.live_connection()
    assert conn.client is not None
    result = await conn.client.read_resource(uri)
    for item in result.contents:
        text = getattr(item, "text", None)
        if item.uri != uri or not isinstance(text, str):
            continue
        mime = (item.mime_type or "").replace(" ", "").lower()
        if mime != APP_MIME_TYPE:
            raise MCPError(
                f"MCP server {client.name!r} serves {uri!r} as {item.mime_type!r}, not "
                f"{APP_MIME_TYPE!r}: it is not an MCP App"
            )
        if len(text.encode()) > MAX_UI_BYTES:
            raise MCPError(f"MCP server {client.name!r}: the app {uri!r} is over 5 MiB")
        return UIResource(uri, text, _ui_meta(item.meta))
    raise MCPError(f"MCP server {client.name!r} sent no HTML text for {uri!r}")

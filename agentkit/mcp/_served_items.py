"""Content and registrations an :class:`~agentkit.mcp._app.MCPApp` serves.

Shared by the app (registration) and its request handlers, so neither imports the other.
"""

from __future__ import annotations

import base64
import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from agentkit.mcp._served_tools import MCP_CONTENT_KEY
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from mcp import types

_T = TypeVar("_T")

__all__ = [
    "EmbeddedResource",
    "ServedPrompt",
    "ServedResource",
    "block_to_wire",
    "call_maybe_async",
    "summary",
    "template_pattern",
    "tool_result",
]


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """A resource's contents embedded in a tool result or a prompt message."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def to_mcp(self) -> dict[str, object]:
        """The wire form (``{"type": "resource", "resource": {...}}``)."""
        resource: dict[str, object] = {"uri": self.uri}
        if self.mime_type:
            resource["mimeType"] = self.mime_type
        if self.text is not None:
            resource["text"] = self.text
        else:
            resource["blob"] = base64.b64encode(self.blob or b"").decode()
        return {"type": "resource", "resource": resource}

    def as_block(self) -> ToolResultContent:
        """How a model (or any non-MCP consumer) sees it: a text block."""
        if self.text is not None:
            return {"type": "text", "text": f"[resource {self.uri}]\n{self.text}"}
        size = len(self.blob or b"")
        return {"type": "text", "text": f"[resource {self.uri}: {self.mime_type}, {size} bytes]"}


def tool_result(*items: str | ToolResultContent | EmbeddedResource) -> ToolResponse:
    """A tool result mixing text, image/audio blocks and embedded resources.

    Served over MCP the items go out verbatim (embedded resources as ``resource`` content);
    anywhere else the resources read as text blocks.
    """
    blocks: list[ToolResultContent] = []
    wire: list[dict[str, object]] = []
    for item in items:
        if isinstance(item, EmbeddedResource):
            blocks.append(item.as_block())
            wire.append(item.to_mcp())
            continue
        block: ToolResultContent = {"type": "text", "text": item} if isinstance(item, str) else item
        blocks.append(block)
        wire.append(block_to_wire(block))
    return ToolResponse(content=blocks, metadata={MCP_CONTENT_KEY: wire})


def block_to_wire(block: ToolResultContent) -> dict[str, object]:
    """An agentkit content block as MCP content (JSON)."""
    if block["type"] == "text":
        return {"type": "text", "text": block["text"]}
    source = block["source"]
    if source["type"] == "url":
        return {"type": "text", "text": f"[{block['type']}: {source['url']}]"}
    return {"type": block["type"], "data": source["data"], "mimeType": source["media_type"]}


@dataclass
class ServedResource:
    uri: str
    fn: Callable[..., object]
    name: str
    title: str | None
    description: str | None
    mime_type: str | None
    pattern: re.Pattern[str] | None  # set for templates

    async def read(self, uri: str, variables: dict[str, str]) -> types.ReadResourceResult:
        from mcp import types

        value = await call_maybe_async(self.fn, **variables)
        if isinstance(value, bytes | bytearray):
            blob = base64.b64encode(bytes(value)).decode()
            mime = self.mime_type or "application/octet-stream"
            item: types.BlobResourceContents | types.TextResourceContents
            item = types.BlobResourceContents(uri=uri, mime_type=mime, blob=blob)
        else:
            mime = self.mime_type or "text/plain"
            item = types.TextResourceContents(uri=uri, mime_type=mime, text=str(value))
        return types.ReadResourceResult(contents=[item])


@dataclass
class ServedPrompt:
    name: str
    fn: Callable[..., object]
    title: str | None
    description: str | None


async def call_maybe_async(
    fn: Callable[..., Awaitable[_T] | _T], *args: object, **kwargs: object
) -> _T:
    """``fn(...)``, awaited if it returned an awaitable."""
    value = fn(*args, **kwargs)
    if isinstance(value, Awaitable):
        result: _T = await value
        return result
    return value


def template_pattern(uri: str) -> re.Pattern[str]:
    """A regex matching ``uri``'s template (``{var}`` matches one path segment)."""
    parts = re.split(r"\{(\w+)\}", uri)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
    return re.compile(f"^{regex}$")


def summary(fn: Callable[..., object]) -> str | None:
    """The first paragraph of ``fn``'s docstring."""
    doc = inspect.getdoc(fn)
    return doc.strip().split("\n\n")[0] if doc else None

"""``MCPTool``: an MCP server tool behind the Toolkit's one ``Tool`` interface."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentkit.tools.base import Tool
from agentkit.tools.response import ToolResponse

if TYPE_CHECKING:
    import mcp_types

    from agentkit.mcp.client import MCPClient

__all__ = ["MCPTool", "toolkit_name"]

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64  # the longest function name OpenAI and Anthropic accept


def toolkit_name(mcp_name: str, prefix: str | None) -> str:
    """The name a server tool gets in a Toolkit.

    Providers accept ``^[a-zA-Z0-9_-]{1,64}$`` function names: other characters (``.``,
    ``/``, spaces) become ``_``, and a prefix is joined with ``_``. A name longer than 64
    characters keeps its first 55 and ends with ``_`` plus 8 hex digits of a hash of the
    full name, so two long names sharing a 64-character start stay distinct.
    """
    raw = f"{prefix}_{mcp_name}" if prefix else mcp_name
    name = _INVALID.sub("_", raw) or "_"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's input schema, completed to a valid ``object`` schema."""
    params = dict(schema)
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return params


class MCPTool(Tool):
    """One tool of an MCP server.

    Attributes:
        client: The owning client; every call goes through its live session.
        mcp_name: The tool's name on the server (``name`` may carry a prefix).
        annotations: The server's tool annotations (``readOnlyHint``...), as a dict.
        output_schema: The server's output schema, if any.
    """

    def __init__(
        self,
        client: MCPClient,
        tool: mcp_types.Tool,
        *,
        name: str | None = None,
        group: str = "basic",
        timeout: float | None = None,
    ) -> None:
        super().__init__(
            name or tool.name,
            tool.description or tool.title or tool.name,
            _object_schema(tool.input_schema),
            group=group,
            timeout=timeout,
        )
        self.client = client
        self.mcp_name = tool.name
        self.annotations: dict[str, Any] = (
            tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else {}
        )
        self.output_schema = tool.output_schema
        self.definition = tool

    def same_definition(self, tool: mcp_types.Tool) -> bool:
        """Whether ``tool`` (a fresh listing) describes this tool unchanged."""
        return tool == self.definition

    async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
        """Call the server tool: progress chunks, then the final response."""
        async for chunk in self.client.call_tool_stream(self.mcp_name, arguments):
            yield chunk

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.client.name!r}, group={self.group!r})"

"""``MCPTool``: an MCP server tool behind the Toolkit's one ``Tool`` interface."""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from agentkit.exceptions import MCPCallInterrupted
from agentkit.mcp._defenses import (
    ToolChange,
    clean_schema,
    clean_text,
    definition_hash,
    is_tainted,
    mark_untrusted_content,
)
from agentkit.tools._annotations import MCPToolAnnotations, ToolAnnotations
from agentkit.tools._base import Tool
from agentkit.tools._response import ToolResponse
from agentkit.tools._toolkit import Toolkit

if TYPE_CHECKING:
    import mcp_types

    from agentkit.mcp._client import MCPClient
    from agentkit.tools._context import ToolContext

__all__ = ["MCPTool", "MCPToolFunction", "tool_hash", "toolkit_name"]

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


def _object_schema(schema: dict[str, object]) -> dict[str, object]:
    """The tool's input schema, completed to a valid ``object`` schema."""
    params = dict(schema)
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return params


def tool_hash(tool: mcp_types.Tool) -> str:
    """The pin of a server tool's definition (as the server sent it), annotations included."""
    annotations = (
        tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        if tool.annotations
        else None
    )
    return definition_hash(
        tool.name, tool.description, tool.input_schema, title=tool.title, annotations=annotations
    )


class MCPTool(Tool):
    """One tool of an MCP server (see :mod:`agentkit.mcp._defenses` for the safeguards).

    Attributes:
        client: The owning client; every call goes through its live session.
        mcp_name: The tool's name on the server (``name`` may carry a prefix).
        annotations: The server's tool annotations (``readOnlyHint``...), as a dict.
        output_schema: The server's output schema, if any.
        title: The server's human-readable title, if any (for UIs).
        icons: The server's icons (``{"src", "mimeType", "sizes"}`` dicts), for UIs.
        flags: What was cleaned out of its definition (invisible characters, a long text).
        pin: Hash of the definition it was registered with.
        changed: Set when the server changed the definition since: calls are refused.
    """

    def __init__(
        self,
        client: MCPClient,
        tool: mcp_types.Tool,
        *,
        name: str | None = None,
        group: str = "basic",
        timeout: float | None = None,
        toolkit: object = None,
    ) -> None:
        description, flags = clean_text(
            tool.description or tool.title or tool.name, client.max_description_chars
        )
        parameters = clean_schema(_object_schema(tool.input_schema), flags)
        super().__init__(name or tool.name, description, parameters, group=group, timeout=timeout)
        self.flags = flags
        if flags:
            client.logger.warning(
                "MCP server %r, tool %r: %s", client.name, tool.name, "; ".join(flags)
            )
        self.pin = tool_hash(tool)
        self.changed: ToolChange | None = None
        self._toolkit = weakref.ref(toolkit) if toolkit is not None else None
        self.client = client
        self.mcp_name = tool.name
        self.annotations = (
            ToolAnnotations.from_mcp(
                cast(MCPToolAnnotations, tool.annotations.model_dump(by_alias=True))
            )
            if tool.annotations
            else None
        )
        self.output_schema = tool.output_schema
        self.title = tool.title or (tool.annotations.title if tool.annotations else None)
        self.icons = [i.model_dump(mode="json", exclude_none=True) for i in tool.icons or []]
        self.definition = tool

    @property
    def requires_approval(self) -> bool:
        """Registered so, or an untrusted server's tool after open-world input.

        Judged on the toolkit the tool was registered in; see :meth:`requires_approval_in`.
        """
        return self.requires_approval_in(self._toolkit() if self._toolkit else None)

    @requires_approval.setter
    def requires_approval(self, value: bool) -> None:
        self._approval = value

    def requires_approval_in(self, toolkit: object) -> bool:
        """Registered so, or an untrusted server's non-read-only tool after open-world input.

        Judged on ``toolkit``, the one running the call: each copy of the registering
        toolkit (``Toolkit.copy()``, a conversation) has its own taint.
        """
        if self._approval:
            return True
        read_only = self.annotations is not None and self.annotations.read_only is True
        if self.client.trust == "trusted" or read_only:
            return False
        return is_tainted(toolkit, self.client.name)

    def same_definition(self, tool: mcp_types.Tool) -> bool:
        """Whether ``tool`` (a fresh listing) describes this tool unchanged."""
        return tool == self.definition

    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Call the server tool: progress chunks, then the final response."""
        return self._call(arguments, self._toolkit() if self._toolkit else None, None)

    def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Call the server tool; open-world output taints the toolkit that runs the call."""
        toolkit: object = context.toolkit
        if toolkit is None and self._toolkit is not None:
            toolkit = self._toolkit()
        return self._call(arguments, toolkit, context.call_id)

    async def _call(
        self, arguments: dict[str, object], toolkit: object, call_id: str | None
    ) -> AsyncIterator[ToolResponse]:
        if self.changed is not None:
            yield ToolResponse.error(
                f"MCP server {self.client.name!r} changed the definition of tool "
                f"{self.mcp_name!r} after it was registered; the tool is disabled until the "
                f"user accepts the change (client.accept_tool_changes())",
                metadata={"mcp_server": self.client.name, "mcp_tool_changed": True},
            )
            return
        taint = self._taint()
        try:
            async for chunk in self.client.call_tool_stream(self.mcp_name, arguments):
                if chunk.is_last and taint is not None and isinstance(toolkit, Toolkit):
                    mark_untrusted_content(toolkit, taint)
                yield chunk
        except MCPCallInterrupted as exc:
            # Not the toolkit's generic "the server is unavailable, call it again later":
            # the model must check whether the call took effect before repeating it.
            exc.call_id = call_id
            yield ToolResponse.error(
                str(exc),
                metadata={
                    "error": "mcp_call_interrupted",
                    "mcp_server": exc.server,
                    "mcp_tool": exc.tool,
                    "mcp_call_interrupted": True,
                    "call_id": call_id,
                },
            )

    def _taint(self) -> str | None:
        """Where this tool's output counts as coming from (see ``mark_untrusted_content``).

        Its output may carry instructions: from anyone (``openWorldHint: true``), or at least
        from this server (untrusted input for the other servers' tools). Only a server the
        user trusts is believed when it says a tool is closed-world: an untrusted server's
        own claim never lowers the trust the user configured.
        """
        open_world = self.annotations.open_world if self.annotations is not None else None
        if open_world is True:
            return "*"
        if open_world is False and self.client.trust == "trusted":
            return None
        return self.client.name

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.client.name!r}, group={self.group!r})"


class MCPToolFunction:
    """An async callable for one MCP tool that survives reconnects.

    Attributes:
        name: The server-side tool name.
        description: The tool's description.
        parameters: The tool's input JSON schema.
        json_schema: OpenAI-style function schema.
    """

    def __init__(self, client: MCPClient, tool: mcp_types.Tool) -> None:
        self.client = client
        self.name = tool.name
        self.description = tool.description or ""
        self.parameters: dict[str, object] = dict(tool.input_schema)
        self.__name__ = tool.name
        self.__doc__ = self.description

    @property
    def json_schema(self) -> dict[str, object]:
        """OpenAI-style function schema."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    async def __call__(self, **arguments: Any) -> ToolResponse:
        """Call the tool on whatever session is live now."""
        return await self.client.call_tool(self.name, arguments)

    def __repr__(self) -> str:
        return f"MCPToolFunction({self.client.name!r}, {self.name!r})"

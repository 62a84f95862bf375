"""Tool annotations: a title and behaviour hints (read-only, destructive...) for a tool.

They follow MCP's ``ToolAnnotations`` and travel with a tool when it is served over MCP; the
MCP client side uses a server's hints for its approval policy. Hints are *hints*: a server
you do not trust can lie in them, so they can only make agentkit more careful, never less.

Example:
    >>> from agentkit.tools import Toolkit
    >>> from agentkit.tools._annotations import annotate
    >>> tk = Toolkit()
    >>> def rm(path: str) -> str:
    ...     '''Delete a file.'''
    ...     return path
    >>> _ = tk.register_tool_function(rm)
    >>> annotate(tk, "rm", title="Delete file", destructive=True).to_mcp()
    {'title': 'Delete file', 'destructiveHint': True}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:
    from agentkit.tools._base import Tool

__all__ = ["MCPToolAnnotations", "ToolAnnotations", "annotate"]


class MCPToolAnnotations(TypedDict, total=False):
    """``ToolAnnotations`` in MCP's wire form (unset fields left out)."""

    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class _HasTools(Protocol):
    def get_tool(self, name: str) -> Tool | None: ...


@runtime_checkable
class _Annotated(Protocol):
    annotations: ToolAnnotations | None


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """MCP tool annotations (None: not stated).

    Attributes:
        title: A human-readable name.
        read_only: The tool does not modify its environment.
        destructive: The tool may delete or overwrite (meaningful when not read-only).
        idempotent: Calling it again with the same arguments has no further effect.
        open_world: The tool reaches outside a closed domain (the web, other people's data).
    """

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @classmethod
    def from_mcp(cls, wire: MCPToolAnnotations) -> ToolAnnotations:
        """Read the wire form (``readOnlyHint``...); a non-boolean hint counts as unset."""

        def hint(key: str) -> bool | None:
            value = wire.get(key)
            return value if isinstance(value, bool) else None

        title = wire.get("title")
        return cls(
            title if isinstance(title, str) else None,
            hint("readOnlyHint"),
            hint("destructiveHint"),
            hint("idempotentHint"),
            hint("openWorldHint"),
        )

    def to_mcp(self) -> MCPToolAnnotations:
        """The wire form (``readOnlyHint``...), without unset fields."""
        out: MCPToolAnnotations = {}
        if self.title is not None:
            out["title"] = self.title
        if self.read_only is not None:
            out["readOnlyHint"] = self.read_only
        if self.destructive is not None:
            out["destructiveHint"] = self.destructive
        if self.idempotent is not None:
            out["idempotentHint"] = self.idempotent
        if self.open_world is not None:
            out["openWorldHint"] = self.open_world
        return out


def annotate(
    where: _HasTools | Tool,
    name: str | None = None,
    *,
    title: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> ToolAnnotations:
    """Set a tool's annotations: ``annotate(toolkit, "name", ...)`` or ``annotate(tool)``.

    They are the tool's ``annotations`` attribute, so they travel with the tool object
    (into every toolkit and copy that holds it).

    Raises:
        KeyError: the toolkit has no tool ``name``.
    """
    tool: object = where
    if name is not None:
        get_tool = getattr(where, "get_tool", None)
        tool = get_tool(name) if get_tool is not None else None
    if not isinstance(tool, _Annotated):
        raise KeyError(f"no tool named {name!r} to annotate")
    value = ToolAnnotations(title, read_only, destructive, idempotent, open_world)
    tool.annotations = value
    return value

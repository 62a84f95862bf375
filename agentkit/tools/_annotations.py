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

import weakref
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

__all__ = ["MCPToolAnnotations", "ToolAnnotations", "annotate", "annotations_of"]


class MCPToolAnnotations(TypedDict, total=False):
    """``ToolAnnotations`` in MCP's wire form (unset fields left out)."""

    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class _HasTools(Protocol):
    def get_tool(self, name: str) -> Any: ...


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


_REGISTRY: weakref.WeakKeyDictionary[object, ToolAnnotations] = weakref.WeakKeyDictionary()


def annotate(
    where: _HasTools | Any,
    name: str | None = None,
    *,
    title: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> ToolAnnotations:
    """Attach annotations to a tool: ``annotate(toolkit, "name", ...)`` or ``annotate(tool)``.

    Raises:
        KeyError: the toolkit has no tool ``name``.
    """
    tool = where.get_tool(name) if name is not None else where
    if tool is None:
        raise KeyError(f"no tool named {name!r} to annotate")
    value = ToolAnnotations(title, read_only, destructive, idempotent, open_world)
    _REGISTRY[tool] = value
    return value


def annotations_of(tool: object) -> ToolAnnotations | None:
    """The annotations attached to ``tool`` with :func:`annotate`, if any."""
    try:
        return _REGISTRY.get(tool)
    except TypeError:  # not weak-referenceable
        return None

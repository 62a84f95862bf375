"""``ToolSource``: tools a Toolkit holds on behalf of something that keeps them current.

An MCP server's tools change when the server says so; the Toolkit cannot know how. What it
needs from such a source is small, and it asks for it explicitly: follow a copy of the
toolkit (``Toolkit.copy()``), and save and restore the source's part of the toolkit's
state (``Toolkit.state_dict()``). The toolkit holds its sources as a field of its own, so a
copy gets its sources by construction and nothing is attached to a toolkit from outside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from agentkit.exceptions import StateError

if TYPE_CHECKING:
    from agentkit.tools._toolkit import Toolkit

__all__ = ["SavedSources", "ToolSource", "parse_saved_sources"]

SavedSources = dict[str, dict[str, dict[str, str]]]
"""Saved parts of tool sources: ``{state key: {source name: {str: str}}}``."""


class ToolSource(Protocol):
    """What a Toolkit needs from a source of tools it does not own (an MCP server's).

    Register one with :meth:`Toolkit.add_tool_source`; ``agentkit.mcp.register_mcp_client``
    does so for an MCP client. The source registers and removes its tools through the
    toolkit's ordinary methods.
    """

    @property
    def state_key(self) -> str:
        """The toolkit-state key under which sources of this kind are saved (``"mcp_pins"``)."""
        ...

    @property
    def name(self) -> str:
        """This source's name under :attr:`state_key` (an MCP client's name)."""
        ...

    def follow(self, copy: Toolkit) -> ToolSource:
        """The same source for ``copy``, a new copy of the toolkit, kept current as this one."""
        ...

    def save_state(self) -> Mapping[str, str] | None:
        """This source's part of the toolkit's saved state (JSON-safe); None: nothing."""
        ...

    def restore_state(self, saved: Mapping[str, str]) -> None:
        """Take back a saved part of the toolkit's state.

        Called when the toolkit's state is loaded, or when this source is added to a
        toolkit whose loaded state had a part for it.
        """
        ...


def parse_saved_sources(state: Mapping[str, object], keys: list[str]) -> SavedSources:
    """The saved source parts under ``keys`` of a Toolkit state, checked.

    Raises:
        StateError: one is not ``{source name: {str: str}}``.
    """
    parsed: SavedSources = {}
    for key in keys:
        value = state[key]
        if not isinstance(value, Mapping) or not all(
            isinstance(name, str)
            and isinstance(part, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in part.items())
            for name, part in value.items()
        ):
            raise StateError(f"Toolkit state: {key!r} must map tool source names to {{str: str}}")
        parsed[key] = {name: dict(part) for name, part in value.items()}
    return parsed

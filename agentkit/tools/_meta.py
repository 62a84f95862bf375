"""The meta tool ``reset_equipped_tools``: the model chooses its active tool groups itself.

Its schema has one boolean per group other than "basic", kept in sync with the groups; the
Toolkit validates a call against it before it runs, so invalid arguments change nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agentkit.tools._base import Tool
from agentkit.tools._errors import ArgumentsError
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.tools._toolkit import Toolkit

__all__ = ["MetaTool", "refresh_meta_tool"]

_DESCRIPTION = (
    "Choose which tool groups are equipped. Set a group to true to equip its tools, false "
    "or omit it to put them away; the groups set to true are exactly the ones equipped "
    "afterwards. The basic tools are always available."
)


class MetaTool(Tool):
    """Switches the toolkit's groups on and off at the model's request."""

    def __init__(self, toolkit: Toolkit, name: str) -> None:
        super().__init__(name, _DESCRIPTION, {"type": "object", "properties": {}})
        self.toolkit = toolkit
        refresh_meta_tool(self, toolkit)

    async def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Activate exactly the groups set to true; describe the result."""
        toolkit = self.toolkit
        switchable = [g for g in toolkit.groups if g != "basic"]
        unknown = [k for k in arguments if k not in switchable]
        if unknown or not all(isinstance(v, bool) for v in arguments.values()):
            # The schema already refuses this; kept so a direct invoke changes nothing either.
            raise ArgumentsError(f"unknown tool groups {unknown}; choose among {switchable}")
        wanted = [g for g in switchable if arguments.get(g)]
        unwanted = [g for g in switchable if not arguments.get(g)]
        if unwanted:
            toolkit.update_tool_groups(unwanted, active=False)
        if wanted:
            toolkit.update_tool_groups(wanted, active=True)
        names = ", ".join(t.name for t in toolkit.active_tools()) or "none"
        text = f"Equipped tool groups: {', '.join(['basic', *wanted])}. Available tools: {names}."
        notes = toolkit.get_active_group_notes()
        if notes:
            text += "\n\n" + notes
        yield ToolResponse.text(text)


def refresh_meta_tool(tool: Tool, toolkit: Toolkit) -> None:
    """Rebuild the meta tool's schema from the toolkit's current groups."""
    properties = {
        name: {"type": "boolean", "description": group.description}
        for name, group in toolkit.groups.items()
        if name != "basic"
    }
    listing = "; ".join(
        f"{g.name} ({'equipped' if g.active else 'not equipped'})"
        for g in toolkit.groups.values()
        if g.name != "basic"
    )
    tool.description = _DESCRIPTION + (f" Groups: {listing}." if listing else "")
    tool.parameters = {"type": "object", "properties": properties, "additionalProperties": False}
    tool.invalidate_schema()

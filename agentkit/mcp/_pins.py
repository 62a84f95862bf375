"""Tool pins in saved state: a restored conversation still catches a changed tool.

``MCPClient.pins`` (tool name -> hash of its definition, annotations included) lives in memory.
A rug pull that happens while the process is down (the server's tools are rewritten
between two sessions) would go unnoticed if a restarted process pinned whatever the server
shows first. So the pins travel with the toolkit's state: an MCP client's registration is a
tool source of the toolkit (:class:`agentkit.mcp._bridge.Registration`), whose saved part is
the client's pins, so ``Toolkit.state_dict()`` (and so ``agent.state_dict()`` and every
session store) saves them per server, under ``"mcp_pins"``; loading the state restores them,
and a tool whose current definition does not match the approved pin is disabled (calls
refused, ``on_tool_change`` called, its new description and schema withheld from the model)
until ``client.accept_tool_changes()``.

Either order works: load the state after registering the MCP client (registered tools are
checked at once), or before (the toolkit keeps the pins until a client of that name
registers, and saves them meanwhile).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.mcp._defenses import ToolChange
from agentkit.mcp._tool import MCPTool

if TYPE_CHECKING:
    from agentkit.mcp._client import MCPClient
    from agentkit.tools._toolkit import Toolkit

__all__ = ["check_pins", "withhold"]


def withhold(tool: MCPTool) -> None:
    """Keep a changed tool's new description and schema away from the model.

    Used when the approved definition's text is not at hand (only its hash is): after a
    restart, or when a changed tool is registered anew.
    """
    tool.description = (
        f"[disabled by agentkit: MCP server {tool.client.name!r} changed this tool's "
        "definition after it was approved; the new description is withheld until the user "
        "accepts the change]"
    )
    tool.parameters = {"type": "object", "properties": {}}
    tool.invalidate_schema()


def check_pins(client: MCPClient, toolkit: Toolkit) -> None:
    """Disable ``client``'s tools in ``toolkit`` whose definition differs from the pin."""
    for tool in list(toolkit.tools.values()):
        if not (isinstance(tool, MCPTool) and tool.client is client) or tool.changed:
            continue
        approved = client.pins.get(tool.mcp_name)
        if approved is None or approved == tool.pin:
            continue
        tool.changed = ToolChange(
            client.name, tool.mcp_name, approved, tool.pin, tool.definition.description or ""
        )
        withhold(tool)
        client.logger.warning(
            "MCP server %r changed tool %r since the saved session approved it: disabled "
            "until accepted (client.accept_tool_changes())",
            client.name,
            tool.mcp_name,
        )
        client.events.report_tool_change(tool.changed)

"""Tool pins in saved state: a restored conversation still catches a changed tool.

``MCPClient.pins`` (tool name -> hash of its definition, annotations included) lives in memory.
A rug pull that happens while the process is down (the server's tools are rewritten
between two sessions) would go unnoticed if a restarted process pinned whatever the server
shows first. So the pins travel with the toolkit's state: ``Toolkit.state_dict()`` (and
so ``agent.state_dict()`` and every session store) saves them per server, under
``"mcp_pins"``; loading the state restores them, and a tool whose current definition does
not match the approved pin is disabled (calls refused, ``on_tool_change`` called, its new
description and schema withheld from the model) until ``client.accept_tool_changes()``.

Either order works: load the state after registering the MCP client (registered tools are
checked at once), or before (the pins wait for a client of that name to register).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentkit.exceptions import StateError
from agentkit.mcp._defenses import ToolChange
from agentkit.mcp._tool import MCPTool

if TYPE_CHECKING:
    from agentkit.mcp._client import MCPClient

__all__ = ["parse_pins_state", "pins_state", "restore_pins", "take_pending_pins", "withhold"]

logger = logging.getLogger("agentkit.mcp")

# Saved pins of servers not registered (yet) in a toolkit, keyed by the toolkit.
_PENDING: weakref.WeakKeyDictionary[Any, dict[str, dict[str, str]]] = weakref.WeakKeyDictionary()


def _clients(toolkit: Any) -> dict[str, MCPClient]:
    """The MCP clients whose tools are in ``toolkit``, by client name."""
    found: dict[str, MCPClient] = {}
    for tool in toolkit.tools.values():
        if isinstance(tool, MCPTool):
            found.setdefault(tool.client.name, tool.client)
    return found


def pins_state(toolkit: Any) -> dict[str, dict[str, str]]:
    """``{server (client name): {tool: pin}}`` for ``toolkit``'s MCP clients (JSON-safe).

    Pins restored for a server that has not registered again yet are kept too, so a save
    in between loses nothing.
    """
    state = {name: dict(pins) for name, pins in _PENDING.get(toolkit, {}).items()}
    for name, client in _clients(toolkit).items():
        if client.pin_tools:
            state[name] = dict(sorted(client.pins.items()))
    return state


def parse_pins_state(value: Any) -> dict[str, dict[str, str]]:
    """Check a saved ``"mcp_pins"`` value before anything changes.

    Raises:
        StateError: it is not ``{str: {str: str}}``.
    """
    ok = isinstance(value, Mapping) and all(
        isinstance(server, str)
        and isinstance(pins, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items())
        for server, pins in value.items()
    )
    if not ok:
        raise StateError("Toolkit state: 'mcp_pins' must map server names to {tool: hash}")
    return {server: dict(pins) for server, pins in value.items()}


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


def _check(client: MCPClient, toolkit: Any) -> None:
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
        client.report_tool_change(tool.changed)


def restore_pins(toolkit: Any, saved: Mapping[str, Mapping[str, str]]) -> None:
    """Restore saved pins (from :func:`parse_pins_state`) into ``toolkit``'s clients.

    The saved pins win over the ones taken in this process: they are what was approved.
    Servers not registered in ``toolkit`` yet get them when they register.
    """
    clients = _clients(toolkit)
    pending: dict[str, dict[str, str]] = {}
    for name, pins in saved.items():
        client = clients.get(name)
        if client is None:
            pending[name] = dict(pins)
        elif client.pin_tools:
            client.pins.update(pins)
            _check(client, toolkit)
    if pending:
        _PENDING[toolkit] = pending
    else:
        _PENDING.pop(toolkit, None)


def take_pending_pins(toolkit: Any, client: MCPClient) -> None:
    """Before ``client`` registers in ``toolkit``: adopt the pins saved for its name."""
    pending = _PENDING.get(toolkit)
    pins = pending.pop(client.name, None) if pending else None
    if pins and client.pin_tools:
        client.pins.update(pins)

"""Span and metric attributes of the GenAI conventions, built once and reused.

Most of what a span carries is fixed per model (provider, request model) or per tool
(name, description, MCP server), and every metric record of one model carries the same
attribute set. Building those dicts on every request and call was a third of the
instrumentation's own cost, so they are built once here and shared. The dicts are never
mutated after they are cached: the OpenTelemetry SDK copies what it is given.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

    from opentelemetry.util.types import AttributeValue

    from agentkit.tools._base import Tool

__all__ = [
    "PROVIDER_NAMES",
    "MetricAttributes",
    "chat_attributes",
    "mcp_attributes",
    "metric_attributes",
    "tool_attributes",
]

Attributes = dict[str, "AttributeValue"]

_LIMIT: Final = 1024  # entries per cache; a process with more models or tools just rebuilds
_chat: dict[tuple[str, str], Attributes] = {}
_tools: dict[int, tuple[weakref.ref[Tool], str, Attributes]] = {}


# agentkit's provider names -> the GenAI conventions' well-known ``gen_ai.provider.name``
# values (backends key their provider views and prices on them); others are kept as named.
PROVIDER_NAMES: Final = {
    "bedrock": "aws.bedrock",
    "vertex": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "azure": "azure.ai.openai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}


def chat_attributes(model: object) -> Attributes:
    """``gen_ai.operation.name``/``provider.name``/``request.model`` of a chat span (shared)."""
    key = (str(getattr(model, "provider", "unknown")), str(getattr(model, "model_name", "unknown")))
    found = _chat.get(key)
    if found is None:
        if len(_chat) >= _LIMIT:
            _chat.clear()
        found = _chat[key] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER_NAMES.get(key[0], key[0]),
            "gen_ai.request.model": key[1],
        }
    return found


def tool_attributes(name: str, tool: Tool | None) -> Attributes:
    """The per-tool attributes of an ``execute_tool`` span (call id not included).

    Shared per tool object, checked against its current description, so a tool that changes
    (``invalidate_schema``) or is replaced gets fresh attributes. ``tool`` is None for a
    name the toolkit does not know (the call is answered with an error).
    """
    if tool is None:
        return _function_tool(name)
    entry = _tools.get(id(tool))
    if entry is not None and entry[0]() is tool and entry[1] is tool.description:
        return entry[2]
    attributes = _function_tool(tool.name)
    if tool.description:
        attributes["gen_ai.tool.description"] = tool.description[:500]
    attributes.update(mcp_attributes(tool))
    if len(_tools) >= _LIMIT:
        _tools.clear()
    _tools[id(tool)] = (weakref.ref(tool), tool.description, attributes)
    return attributes


def _function_tool(name: str) -> Attributes:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }


def mcp_attributes(tool: object) -> Attributes:
    """``mcp.*``/``server.*``/``network.transport`` of an MCP tool (empty for others)."""
    client = getattr(tool, "client", None)
    server = getattr(client, "server", None)
    if server is None or not hasattr(tool, "mcp_name"):
        return {}
    attributes: Attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.type": "extension",
        "agentkit.mcp.server.name": str(getattr(client, "name", "")),
    }
    url = getattr(server, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        attributes["network.transport"] = "tcp"
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port:
            attributes["server.port"] = parts.port
    else:
        attributes["network.transport"] = "pipe"
        # The executable's name only: arguments (and a path's directories) can carry
        # secrets (``--api-key=...``), and spans leave the process even without content.
        attributes["agentkit.mcp.server.command"] = os.path.basename(str(server.command))
    return attributes


class MetricAttributes:
    """The attribute sets of one chat request's metric records (shared per model and outcome).

    Attributes:
        duration: For ``gen_ai.client.operation.duration``.
        input_tokens: For ``gen_ai.client.token.usage`` with ``gen_ai.token.type=input``.
        output_tokens: The same with ``gen_ai.token.type=output``.
    """

    __slots__ = ("duration", "input_tokens", "output_tokens")

    def __init__(self, base: Mapping[str, AttributeValue]) -> None:
        self.duration = dict(base)
        self.input_tokens = {**base, "gen_ai.token.type": "input"}
        self.output_tokens = {**base, "gen_ai.token.type": "output"}


_metrics: dict[tuple[object, ...], MetricAttributes] = {}


def metric_attributes(
    chat: Attributes, response_model: str | None, error: str | None
) -> MetricAttributes:
    """The shared metric attribute sets of a request of ``chat``'s model that ended so."""
    key = (chat["gen_ai.provider.name"], chat["gen_ai.request.model"], response_model, error)
    found = _metrics.get(key)
    if found is None:
        base: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": chat["gen_ai.provider.name"],
            "gen_ai.request.model": chat["gen_ai.request.model"],
        }
        if response_model is not None:
            base["gen_ai.response.model"] = response_model
        if error is not None:
            base["error.type"] = error
        if len(_metrics) >= _LIMIT:
            _metrics.clear()
        found = _metrics[key] = MetricAttributes(base)
    return found

"""MCP: any MCP server's tools in a Toolkit, over stdio, streamable HTTP or SSE.

Importing this package is cheap: the ``mcp`` SDK is loaded on the first connection.

Example:
    >>> from agentkit.mcp import MCPClient, StdioServer
    >>> client = MCPClient("time", StdioServer("mcp-server-time"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentkit.mcp.config import HttpServer, StdioServer

if TYPE_CHECKING:
    from agentkit.mcp.bridge import create_resource_tool, register_mcp_client, remove_mcp_clients
    from agentkit.mcp.client import MCPClient
    from agentkit.mcp.oauth import FileTokenStorage, OAuth
    from agentkit.mcp.server import serve
    from agentkit.mcp.tool import MCPTool, MCPToolFunction

__all__ = [
    "FileTokenStorage",
    "HttpServer",
    "MCPClient",
    "MCPTool",
    "MCPToolFunction",
    "OAuth",
    "StdioServer",
    "create_resource_tool",
    "register_mcp_client",
    "remove_mcp_clients",
    "serve",
]

_LAZY = {
    "FileTokenStorage": "agentkit.mcp.oauth",
    "OAuth": "agentkit.mcp.oauth",
    "MCPClient": "agentkit.mcp.client",
    "MCPToolFunction": "agentkit.mcp.tool",
    "MCPTool": "agentkit.mcp.tool",
    "create_resource_tool": "agentkit.mcp.bridge",
    "register_mcp_client": "agentkit.mcp.bridge",
    "remove_mcp_clients": "agentkit.mcp.bridge",
    "serve": "agentkit.mcp.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkit.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

"""MCP: any MCP server's tools in a Toolkit, over stdio, streamable HTTP or SSE.

Importing this package is cheap: the ``mcp`` SDK is loaded on the first connection.

Example:
    >>> from agentkit.mcp import MCPClient, StdioServer
    >>> client = MCPClient("time", StdioServer("mcp-server-time"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.mcp._config import HttpServer, StdioServer

__all__ = [
    "ClientEvents",
    "EmbeddedResource",
    "FileTokenStorage",
    "HttpServer",
    "MCPApp",
    "MCPClient",
    "MCPContext",
    "MCPTask",
    "MCPTool",
    "MCPToolFunction",
    "OAuth",
    "StdioServer",
    "TaskState",
    "build_server",
    "check_bind",
    "create_resource_tool",
    "mark_untrusted_content",
    "register_mcp_client",
    "remove_mcp_clients",
    "reset_untrusted_content",
    "resolve_token",
    "serve",
    "tool_result",
]

if TYPE_CHECKING:
    from agentkit.mcp._app import EmbeddedResource, MCPApp, tool_result
    from agentkit.mcp._bridge import create_resource_tool, register_mcp_client, remove_mcp_clients
    from agentkit.mcp._client import MCPClient
    from agentkit.mcp._client_events import ClientEvents
    from agentkit.mcp._context import MCPContext
    from agentkit.mcp._defenses import mark_untrusted_content, reset_untrusted_content
    from agentkit.mcp._http_auth import check_bind, resolve_token
    from agentkit.mcp._oauth import FileTokenStorage, OAuth
    from agentkit.mcp._server import build_server, serve
    from agentkit.mcp._tasks import MCPTask, TaskState
    from agentkit.mcp._tool import MCPTool, MCPToolFunction
else:
    from agentkit._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        __all__,
        {
            "FileTokenStorage": "._oauth",
            "OAuth": "._oauth",
            "MCPClient": "._client",
            "ClientEvents": "._client_events",
            "MCPToolFunction": "._tool",
            "MCPTool": "._tool",
            "create_resource_tool": "._bridge",
            "register_mcp_client": "._bridge",
            "remove_mcp_clients": "._bridge",
            "serve": "._server",
            "build_server": "._server",
            "EmbeddedResource": "._app",
            "MCPApp": "._app",
            "tool_result": "._app",
            "MCPContext": "._context",
            "MCPTask": "._tasks",
            "TaskState": "._tasks",
            "check_bind": "._http_auth",
            "resolve_token": "._http_auth",
            "mark_untrusted_content": "._defenses",
            "reset_untrusted_content": "._defenses",
        },
    )

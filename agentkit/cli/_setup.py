"""Building what a CLI command needs: the model, MCP server configs, the toolkit."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from agentkit.cli._demo_model import DEMO_LABEL, demo_model, model_from_env

if TYPE_CHECKING:
    from agentkit.mcp import MCPClient
    from agentkit.mcp._config import ServerConfig
    from agentkit.models._base import ChatModel
    from agentkit.tools import Toolkit

__all__ = ["build_toolkit", "import_tools", "mcp_server", "open_mcp", "resolve_model"]

NO_MODEL_NOTICE = (
    "No model configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or "
    "AGENTKIT_MODEL=provider:model (e.g. ollama:qwen3), or pass --model.\n"
    f"Using the offline {DEMO_LABEL} for now."
)


def resolve_model(spec: str | None, *, demo: bool = False) -> tuple[ChatModel, str | None]:
    """The model to use and a notice for the human (None when there is nothing to say).

    Order: ``--demo``; ``--model SPEC``; the environment (:func:`model_from_env`); else the
    offline demo model, with a notice saying how to configure a real one.
    """
    if demo:
        return demo_model(), None
    if spec:
        from agentkit.models import from_string

        return from_string(spec, stream=True), None
    model = model_from_env()
    if model is not None:
        return model, None
    return demo_model(), NO_MODEL_NOTICE


def mcp_server(
    stdio: str | None = None,
    http: str | None = None,
    *,
    sse: bool = False,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ServerConfig:
    """A server config from CLI strings: ``stdio="node server.js stdio"`` or an HTTP URL.

    Raises:
        ValueError: neither or both given, or an empty command.
    """
    from agentkit.mcp import HttpServer, StdioServer

    if (stdio is None) == (http is None):
        raise ValueError("give exactly one of --stdio CMD or --http URL")
    if stdio is not None:
        argv = shlex.split(stdio)
        if not argv:
            raise ValueError("the --stdio command is empty")
        return StdioServer(argv[0], argv[1:], env=dict(env) if env else None)
    assert http is not None
    return HttpServer(
        http,
        headers=dict(headers) if headers else None,
        transport="sse" if sse else "streamable_http",
    )


def server_name(config: ServerConfig, index: int = 1) -> str:
    """How errors name a server: its command line (stdio) or its URL (HTTP).

    ``index`` is kept for callers that number servers; the name no longer uses it, since
    ``stdio-1`` told the human nothing about which server failed.
    """
    from agentkit.mcp import StdioServer

    if isinstance(config, StdioServer):
        return shlex.join([config.command, *config.args])
    return str(config.url)


def sse_hint(config: ServerConfig) -> str | None:
    """A hint when a streamable-HTTP URL failed but answers like a legacy SSE endpoint."""
    from agentkit.mcp import HttpServer

    if not isinstance(config, HttpServer) or config.transport != "streamable_http":
        return None
    import httpx2

    headers = {**(config.headers or {}), "Accept": "text/event-stream"}
    try:
        with httpx2.stream("GET", config.url, headers=headers, timeout=3.0) as response:
            kind = response.headers.get("content-type", "")
    except httpx2.HTTPError:
        return None
    if response.status_code == 200 and kind.startswith("text/event-stream"):
        return "this looks like an SSE endpoint: add --sse"
    return None


async def open_mcp(stack: AsyncExitStack, name: str, config: ServerConfig) -> MCPClient:
    """Connect an ``MCPClient``; it is closed when ``stack`` closes."""
    from agentkit.mcp import MCPClient

    client = MCPClient(name, config)
    await client.connect()
    stack.push_async_callback(client.close)
    return client


def import_tools(spec: str) -> list[Any]:
    """Import ``module:name``: a function, a ``Tool``, a ``Toolkit``, or a list of them.

    The current directory is importable, like ``python -m``.

    Raises:
        ValueError: malformed spec. ImportError / AttributeError: nothing there.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--tools expects module:name, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    value: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    return list(value) if isinstance(value, list | tuple) else [value]


def _register(toolkit: Toolkit, item: Any) -> None:
    from agentkit.tools import Tool, Toolkit

    if isinstance(item, Toolkit):
        for tool in item.tools.values():
            toolkit.register_tool(tool, namesake="rename")
    elif isinstance(item, Tool):
        toolkit.register_tool(item, namesake="rename")
    elif callable(item):
        toolkit.register_tool_function(item, namesake="rename")
    else:
        raise ValueError(f"{item!r} is not a function, Tool or Toolkit")


async def build_toolkit(
    stack: AsyncExitStack,
    tools: Sequence[str],
    stdio: Sequence[str],
    http: Sequence[str],
    *,
    demo_tools: bool = False,
) -> Toolkit:
    """A Toolkit with the demo tools, ``--tools`` imports and every MCP server's tools."""
    from agentkit.cli._demo_model import demo_toolkit
    from agentkit.mcp import register_mcp_client
    from agentkit.tools import Toolkit

    toolkit = demo_toolkit() if demo_tools else Toolkit()
    for spec in tools:
        for item in import_tools(spec):
            _register(toolkit, item)
    configs = [mcp_server(stdio=cmd) for cmd in stdio] + [mcp_server(http=url) for url in http]
    for index, config in enumerate(configs, 1):
        client = await open_mcp(stack, server_name(config, index), config)
        await register_mcp_client(toolkit, client, namesake="rename")
    return toolkit

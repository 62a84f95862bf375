"""``agentkit mcp login|logout URL``: OAuth for a remote MCP server from the terminal.

``login`` runs the authorization-code + PKCE flow (dynamic client registration unless
``--client-id`` is given): it prints the authorization URL (``--open`` also opens it in the
system browser), waits for the redirect on a 127.0.0.1 port, and stores the tokens in
``~/.config/agentkit/mcp-oauth/`` (mode 0600). Later ``agentkit mcp tools --http URL
--oauth`` and ``HttpServer(URL, oauth=OAuth())`` use them, refreshing them when they expire.
``logout`` deletes what was stored for the server.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from agentkit._text import terminal_safe
from agentkit.exceptions import AgentkitError

__all__ = ["add_login_parsers", "run_login"]


def add_login_parsers(sub: Any) -> None:
    """Add ``login`` and ``logout`` to the ``mcp`` sub-parsers (``add_subparsers()``)."""
    login = sub.add_parser(
        "login", help="log in to an OAuth-protected server (browser flow), store the tokens"
    )
    login.add_argument("url", help="the server's MCP endpoint (https://.../mcp)")
    login.add_argument(
        "--scope", action="append", default=[], metavar="SCOPE", help="scope to ask for (repeat)"
    )
    login.add_argument("--client-name", default="agentkit", help="name shown on consent")
    login.add_argument("--client-id", help="a pre-registered client (no dynamic registration)")
    login.add_argument("--client-secret", help="the pre-registered client's secret")
    login.add_argument("--port", type=int, help="port of the 127.0.0.1 redirect listener")
    login.add_argument("--open", action="store_true", help="also open the system browser")
    login.add_argument("--force", action="store_true", help="forget stored tokens, log in anew")
    login.add_argument("--sse", action="store_true", help="the server uses the SSE transport")
    login.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for your approval"
    )
    logout = sub.add_parser("logout", help="forget the tokens stored for a server")
    logout.add_argument("url", help="the server's MCP endpoint")


def run_login(args: argparse.Namespace) -> int:
    """Run ``login`` or ``logout``; return the exit status."""
    try:
        if args.mcp_command == "logout":
            return anyio.run(_logout, args.url, backend="asyncio")
        return anyio.run(_login, args, backend="asyncio")
    except AgentkitError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


async def _logout(url: str) -> int:
    from agentkit.mcp._oauth import FileTokenStorage

    store = FileTokenStorage.for_server(url)
    if await store.clear():
        print(f"logged out of {url} (removed {store.path})")
    else:
        print(f"no login stored for {url}")
    return 0


async def _login(args: argparse.Namespace) -> int:
    from agentkit.mcp import HttpServer, MCPClient
    from agentkit.mcp._oauth import FileTokenStorage, OAuth

    store = FileTokenStorage.for_server(args.url)
    if args.force:
        await store.clear()
    before = await store.get_tokens()
    oauth = OAuth(
        client_name=args.client_name,
        scopes=args.scope or None,
        token_store=store,
        open_browser=args.open,
        redirect_port=args.port,
        login_timeout=args.timeout,
        client_id=args.client_id,
        client_secret=args.client_secret,
    )
    server = HttpServer(args.url, transport="sse" if args.sse else "streamable_http", oauth=oauth)
    async with MCPClient("login", server) as client:
        info = client.server_info
    name = f" ({terminal_safe(info.name)})" if info is not None and info.name else ""
    after = await store.get_tokens()
    if after is None:
        print(f"{args.url}{name} did not ask for authorization: nothing stored")
    elif before is not None and after.access_token == before.access_token:
        print(f"already logged in to {args.url}{name} (tokens in {store.path}; --force to redo)")
    else:
        print(f"logged in to {args.url}{name}; tokens stored in {store.path} (mode 0600)")
    return 0

"""Command-line plumbing shared by ``python -m toolkits.NAME``: transport options, serving."""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Callable

import anyio

from agentkit.mcp import serve
from agentkit.mcp.http_auth import check_bind, resolve_token
from agentkit.tools import Toolkit

__all__ = ["base_parser", "serve_from_args"]


def base_parser(module: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with the transport options every toolkit server accepts."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument(
        "--transport",
        choices=["stdio", "streamable_http"],
        default="stdio",
        help="MCP transport (default: stdio)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port")
    parser.add_argument("--path", default="/mcp", help="HTTP path of the MCP endpoint")
    parser.add_argument(
        "--token",
        default=None,
        help="bearer token HTTP clients must send (default: $AGENTKIT_MCP_TOKEN); "
        "required for any non-loopback --host",
    )
    parser.add_argument(
        "--json-response", action="store_true", help="HTTP: plain JSON answers, no SSE"
    )
    parser.add_argument(
        "--stateless", action="store_true", help="HTTP: no MCP sessions (each request alone)"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="extra Host header value to accept (repeatable)",
    )
    return parser


def serve_from_args(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    build: Callable[[], Toolkit],
    *,
    name: str,
) -> None:
    """Build the toolkit (bad options exit with a usage error) and serve it until done."""
    try:
        toolkit = build()
        if args.transport == "streamable_http":
            check_bind(args.host, resolve_token(args.token))
    except (OSError, ValueError) as exc:  # a missing --root, an unknown --allow program...
        parser.error(str(exc))
    run = functools.partial(
        serve,
        toolkit,
        args.transport,
        host=args.host,
        port=args.port,
        path=args.path,
        name=name,
        token=args.token,
        allowed_hosts=args.allow_host,
        json_response=args.json_response,
        stateless=args.stateless,
    )
    # Ctrl-C on an HTTP server is the normal way to stop it: no traceback.
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(run)

"""Command-line plumbing shared by ``python -m toolkits.NAME``: transport options, serving."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import threading
from collections.abc import Awaitable, Callable

import anyio

from agentkit.mcp import check_bind, resolve_token, serve
from agentkit.tools import Toolkit

__all__ = ["add_root_arguments", "base_parser", "root_from_args", "serve_from_args"]

# After SIGTERM, how long the server may take to stop (tool calls kill their process groups
# in their cleanup) before the process exits regardless: a stdio read blocked in a worker
# thread would otherwise keep it alive until the client closes the pipe.
_STOP_GRACE_S = 5.0


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


def add_root_arguments(parser: argparse.ArgumentParser, help_text: str) -> None:
    """The root directory, positionally (as the reference servers take it) or as ``--root``."""
    parser.add_argument("root_dir", nargs="?", metavar="DIR", help=help_text)
    parser.add_argument("--root", help=f"{help_text} (same as DIR)")


def root_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The one root given positionally or with ``--root`` (usage error if none or both)."""
    if args.root is not None and args.root_dir is not None and args.root != args.root_dir:
        parser.error("give the root directory once: DIR or --root DIR")
    root = args.root if args.root is not None else args.root_dir
    if root is None:
        parser.error("the root directory is required: DIR or --root DIR")
    return str(root)


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
        anyio.run(_until_terminated, run)


async def _until_terminated(run: Callable[[], Awaitable[None]]) -> None:
    """Serve until done, or until SIGTERM: then cancel everything (a graceful stop).

    Cancelling runs every tool call's cleanup, which kills the process group of a command
    still running; the default SIGTERM action would end this process at once and leave the
    command running with nobody to enforce its timeout.
    """
    failures: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def serve_then_stop() -> None:
            try:
                await run()
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # re-raised below, outside the task group
                failures.append(exc)
            tg.cancel_scope.cancel()

        tg.start_soon(serve_then_stop)
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _signum in signals:
                _exit_later(_STOP_GRACE_S, 128 + signal.SIGTERM)
                tg.cancel_scope.cancel()
                break
    if failures:
        # One failure (a port in use...) is reported as itself, not as a task group's.
        raise _innermost(failures[0])


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _exit_later(delay_s: float, status: int) -> None:
    timer = threading.Timer(delay_s, os._exit, args=(status,))
    timer.daemon = True
    timer.start()

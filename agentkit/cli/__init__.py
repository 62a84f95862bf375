"""The ``agentkit`` command line: ``chat``, ``serve``, ``mcp`` and ``durable``.

Run ``agentkit --help`` (or ``python -m agentkit --help``). The sub-commands import what
they need lazily, so ``agentkit --help`` is instant.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

__all__ = [
    "DEMO_LABEL",
    "build_parser",
    "demo_model",
    "demo_toolkit",
    "describe_model",
    "main",
    "model_from_env",
]

# The demo model behind ``agentkit chat --demo`` and the examples, loaded on first use.
if TYPE_CHECKING:
    from agentkit.cli._demo_model import (
        DEMO_LABEL,
        demo_model,
        demo_toolkit,
        describe_model,
        model_from_env,
    )
else:
    from agentkit._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        __all__,
        dict.fromkeys(
            ("DEMO_LABEL", "demo_model", "demo_toolkit", "describe_model", "model_from_env"),
            "._demo_model",
        ),
    )


def _plain(doc: str | None) -> str:
    """A module docstring as ``--help`` text: reST literals and ``::`` markers removed."""
    text = re.sub(r"``([^`]+)``", r"\1", doc or "")
    return re.sub(r"::\n", ":\n", text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``agentkit`` command."""
    from agentkit._version import __version__
    from agentkit.cli._chat import __doc__ as chat_doc
    from agentkit.cli._chat import add_arguments as chat_arguments
    from agentkit.cli._mcp_cmd import __doc__ as mcp_doc
    from agentkit.cli._mcp_cmd import add_arguments as mcp_arguments
    from agentkit.cli._serve_cmd import __doc__ as serve_doc
    from agentkit.cli._serve_cmd import add_arguments as serve_arguments

    parser = argparse.ArgumentParser(
        prog="agentkit",
        description="Chat with a tool-using agent, serve it over HTTP, inspect MCP servers, "
        "or recover durable runs.",
    )
    parser.add_argument("--version", action="version", version=f"agentkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{chat,serve,mcp,durable}")
    chat_arguments(
        sub.add_parser(
            "chat",
            help="chat in the terminal (Ctrl-C interrupts the agent)",
            description=_plain(chat_doc),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    serve_arguments(
        sub.add_parser(
            "serve",
            help="serve an agent over HTTP (AG-UI) with a web chat",
            description=_plain(serve_doc),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    mcp_arguments(
        sub.add_parser(
            "mcp",
            help="inspect an MCP server: list | tools | call | login | logout",
            description=_plain(mcp_doc),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    from agentkit.cli._durable_cmd import __doc__ as durable_doc
    from agentkit.cli._durable_cmd import add_arguments as durable_arguments

    durable_arguments(
        sub.add_parser(
            "durable",
            help="durable runs: recover a dead worker's runs",
            description=_plain(durable_doc),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentkit`` console script; returns the exit status."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    # The mcp SDK logs a traceback for every line a stdio server prints that is not JSON-RPC;
    # the connection error quotes those lines already. A handler here stops Python's
    # last-resort handler from dumping the tracebacks on the terminal (configured root
    # logging still sees the records).
    logging.getLogger("mcp.client.stdio").addHandler(logging.NullHandler())
    if args.command == "chat":
        from agentkit.cli._chat import run as run_chat

        return run_chat(args)
    if args.command == "durable":
        from agentkit.cli._durable_cmd import run as run_durable

        return run_durable(args)
    if args.command == "serve":
        from agentkit.cli._serve_cmd import run as run_serve

        return run_serve(args)
    from agentkit.cli._mcp_cmd import run as run_mcp

    return run_mcp(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

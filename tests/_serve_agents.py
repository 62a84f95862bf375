"""Agents served by the serve tests (offline: the scripted demo model, real tools).

``python -m tests._serve_agents PORT DB [TOKEN]`` serves :func:`make_agent` with uvicorn (the
browser and ``@ag-ui/client`` tests start it as a subprocess, like a user would).
"""

from __future__ import annotations

import sys

import anyio

from agentkit import ReActAgent
from agentkit.cli._demo_model import demo_model, demo_toolkit
from agentkit.tools import ToolContext

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script><b>bold</b>'


async def slow_task(topic: str, ctx: ToolContext) -> str:
    """Work on a topic slowly (about a minute), reporting progress.

    Args:
        topic: What to work on.
        ctx: The call context.
    """
    for step in range(1, 121):
        await ctx.report_progress(f"step {step}/120 on {topic}", progress=step, total=120)
        await anyio.sleep(0.5)
    return f"finished {topic}"


async def markup(kind: str = "all") -> str:
    """Return hostile markup (the page must show it as text).

    Args:
        kind: Unused label.
    """
    return XSS


async def delete_files(pattern: str) -> str:
    """Delete files matching a pattern (needs approval; pretends).

    Args:
        pattern: A glob.
    """
    return f"deleted files matching {pattern}"


def make_agent() -> ReActAgent:
    """A fresh demo agent with the test tools."""
    toolkit = demo_toolkit()
    toolkit.register_tool_function(slow_task)
    toolkit.register_tool_function(markup)
    toolkit.register_tool_function(delete_files, requires_approval=True)
    return ReActAgent(
        "assistant",
        "You are a test assistant.",
        demo_model(chunk_delay=0.005),
        toolkit,
        print_hint=False,
    )


def main() -> None:
    import socket

    import uvicorn

    from agentkit.serve import create_app
    from agentkit.session import SQLiteSession

    port, db = int(sys.argv[1]), sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else None
    app = create_app(make_agent, sessions=SQLiteSession(db), auth_token=token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))  # port 0: the OS picks a free one, printed for the caller
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()

"""One ``to_a2a`` worker process on a shared SQLite store, for the two-worker tests.

``python tests/a2a/worker.py <db path>`` serves a crawler agent on 127.0.0.1 (a port the OS
picks) and prints JSON lines: ``{"url": ...}`` once serving, ``{"started": site}`` when its
tool starts and ``{"stopped": site}`` when the tool is stopped (the run interrupted).
"""

from __future__ import annotations

import json
import socket
import sys

import anyio
import uvicorn

from agentkit import ReActAgent, Toolkit
from agentkit.a2a import to_a2a
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use


def say(**line: object) -> None:
    print(json.dumps(line), flush=True)


def make_agent() -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool
    async def crawl(site: str) -> str:
        """Crawl a site (slow)."""
        say(started=site)
        try:
            await anyio.sleep_forever()
        finally:
            say(stopped=site)
        return "never"

    model = ScriptedModel([tool_use("crawl", "c1", site="x"), "Stopped."])
    return ReActAgent("crawler", "You crawl.", model, toolkit)


async def main(db: str) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = to_a2a(make_agent, sessions=SQLiteSession(db))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        say(url=f"http://127.0.0.1:{sock.getsockname()[1]}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])

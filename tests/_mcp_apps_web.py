"""The MCP Apps tests' agent: tools of ``tests._mcp_app_server``, and a scripted model.

``python -m tests._mcp_apps_web PORT DB TOKEN [frozen]`` serves it with uvicorn (the server is
registered with ``trust="trusted"``: its apps render). TOKEN is one bearer token, or
``token=user,token=user`` for several users; ``frozen`` stops the apps' clock (no refill of
their call budget: counts are exact). Several such processes on one DB are the workers
behind a balancer. The model calls ``get-time`` for
"what time is it" and ``hostile`` for "hostile", then answers "Shown in the app.".
``get-time`` needs approval (the model's calls and the app's alike).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from agentkit import ReActAgent
from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.messages import Msg
from agentkit.testing import FunctionModel, ScriptItem, tool_use
from agentkit.tools import Toolkit

PROMPTS = {"what time is it": "get-time", "hostile": "hostile"}


def decide(messages: list[Msg], tools: object) -> ScriptItem:
    """A tool call for a known prompt, then a short answer."""
    if messages and messages[-1].has_blocks("tool_result"):
        return "Shown in the app."
    humans = [m for m in messages if m.role == "user" and not m.has_blocks("tool_result")]
    prompt = humans[-1].get_text().strip() if humans else ""
    tool = PROMPTS.get(prompt)
    return [tool_use(tool, f"call_{tool}_{len(messages)}")] if tool else f"You said: {prompt}"


def app_server() -> StdioServer:
    """The ext-apps example server, as a stdio subprocess."""
    return StdioServer(sys.executable, ["-m", "tests._mcp_app_server"], stderr="devnull")


@asynccontextmanager
async def app_agent(
    trust: Literal["trusted", "untrusted"] = "trusted",
) -> AsyncIterator[ReActAgent]:
    """The agent, its MCP client connected (closed on exit)."""
    async with MCPClient("examples", app_server(), trust=trust) as client:
        toolkit = Toolkit()
        await register_mcp_client(toolkit, client)
        tool = toolkit.get_tool("get-time")
        assert tool is not None
        tool.requires_approval = True
        model = FunctionModel(decide, stream=True, model_name="apps")
        yield ReActAgent("helper", "You show apps.", model, toolkit, print_hint=False)


async def main() -> None:
    """Serve the agent on PORT (0: any free port, printed as ``port N``)."""
    import socket

    import uvicorn

    from agentkit.serve import create_app
    from agentkit.serve._apps import AppSessions
    from agentkit.session import SQLiteSession

    port, db, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    tokens: str | dict[str, str] = token
    if "=" in token:
        tokens = dict(pair.split("=", 1) for pair in token.split(","))
    async with app_agent() as agent:
        app = create_app(agent, sessions=SQLiteSession(db), auth_token=tokens)
        if sys.argv[4:] == ["frozen"]:
            app.state.mcp_apps = AppSessions(clock=lambda: 1000.0)
        sock = socket.socket()
        sock.bind(("127.0.0.1", port))
        print(f"port {sock.getsockname()[1]}", flush=True)
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
        await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    import anyio

    anyio.run(main)

"""MCP servers over stdio and streamable HTTP, their tools side by side in one agent.

- stdio: agentkit's filesystem toolkit, spawned as a child process
  (``python -m toolkits.filesystem --root DIR``), like any npm/PyPI MCP server.
- streamable HTTP: a Toolkit of our own served in-process with ``agentkit.mcp.serve`` on
  127.0.0.1 (a free port), reached with ``HttpServer(url)``.

The agent calls a tool of each server in the same turn (in parallel). The clients are also
used directly: ``list_tools()`` and ``call_tool()``.

Offline it runs on the scripted demo model; set OPENAI_API_KEY / ANTHROPIC_API_KEY /
AGENTKIT_MODEL to use a real one.
"""

from __future__ import annotations

import pathlib
import socket
import sys
import tempfile

import anyio

from agentkit.agent import ReActAgent
from agentkit.cli import demo_model, describe_model, model_from_env
from agentkit.mcp import HttpServer, MCPClient, StdioServer, register_mcp_client, serve
from agentkit.models import ChatModel
from agentkit.tools import Toolkit

ROOT = pathlib.Path(__file__).resolve().parent.parent


async def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name.
    """
    return f"{city}: snow showers, -2 °C"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_port(port: int) -> None:
    while True:
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            await anyio.sleep(0.05)
        else:
            await stream.aclose()
            return


async def main() -> None:
    model = model_from_env() or demo_model(chunk_delay=0)
    print(f"model: {describe_model(model)}")
    weather_tools = Toolkit()
    weather_tools.register_tool_function(get_weather)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "notes.md").write_text("Pack: wool socks, a thermos, crampons.\n")
        async with anyio.create_task_group() as servers:
            # The HTTP server runs in this process until we cancel it.
            servers.start_soon(lambda: serve(weather_tools, "streamable_http", port=port))
            with anyio.fail_after(15):
                await wait_for_port(port)
            files = MCPClient(
                "files",
                StdioServer(
                    sys.executable,
                    ["-m", "toolkits.filesystem", "--root", tmp, "--read-only"],
                    cwd=ROOT,
                ),
            )
            weather = MCPClient("weather", HttpServer(f"http://127.0.0.1:{port}/mcp"))
            async with files, weather:
                await show_servers(files, weather)
                await use_in_agent(model, files, weather)
            servers.cancel_scope.cancel()  # stop the HTTP server (graceful shutdown)
    print("servers stopped.")


async def show_servers(files: MCPClient, weather: MCPClient) -> None:
    for client in (files, weather):
        names = [t.name for t in await client.list_tools()]
        print(
            f"{client.name} ({type(client.server).__name__}, protocol "
            f"{client.protocol_version}): {names}"
        )
    result = await weather.call_tool("get_weather", {"city": "Reykjavik"})
    print(f"direct call over HTTP: {result.get_text()}")


async def use_in_agent(model: ChatModel, files: MCPClient, weather: MCPClient) -> None:
    toolkit = Toolkit()
    await register_mcp_client(toolkit, files)
    await register_mcp_client(toolkit, weather)
    agent = ReActAgent(
        "assistant",
        "Use the tools, in parallel when you can. Be brief.",
        model,
        toolkit,
        print_hint=False,
    )
    question = "What's the weather in Oslo, and what does notes.md say?"
    print(f"\nuser: {question}")
    reply = await agent(question)
    for msg in await agent.memory.get_memory():
        for call in msg.get_blocks("tool_use"):
            print(f"  called {call['name']}({call['input']})")
    print(f"assistant: {reply.get_text()}")


if __name__ == "__main__":
    anyio.run(main)

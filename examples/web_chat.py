"""Serve an agent to people: AG-UI over HTTP, and a web chat with Stop and Approve.

    python examples/web_chat.py --serve            # then open http://127.0.0.1:8000/
    agentkit serve examples.web_chat:make_agent    # the same, from the CLI

Without ``--serve`` (as the test suite runs it) the example starts the server on a free
port, talks to it the way any AG-UI client does (``POST /agui``, server-sent events), stops a
slow tool mid-run with ``POST /threads/{id}/interrupt``, answers an approval with a
``resume`` entry, and exits.

Offline it runs on the scripted demo model; set OPENAI_API_KEY / ANTHROPIC_API_KEY /
AGENTKIT_MODEL to serve a real one.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from starlette.requests import Request

from agentkit.agent import ReActAgent
from agentkit.cli import demo_model, demo_toolkit, model_from_env
from agentkit.serve import create_app, current_deps
from agentkit.session import SQLiteSession


async def whoami() -> str:
    """Tell which user this conversation acts for."""
    deps = current_deps() or {}
    return f"You are {deps.get('user', 'unknown')}."


def make_agent() -> ReActAgent:
    """A fresh agent per conversation turn (the server loads the thread's state into it)."""
    toolkit = demo_toolkit()  # get_weather, research (slow), send_email (needs approval)
    toolkit.register_tool_function(whoami)
    model = model_from_env() or demo_model()
    return ReActAgent("assistant", "You are a helpful assistant.", model, toolkit)


def user_deps(request: Request) -> dict[str, Any]:
    """Per-request dependencies: who is asking (the token's user when tokens name users)."""
    return {"user": request.state.user or "local user"}


def build_app(db: Path) -> Any:
    return create_app(make_agent, sessions=SQLiteSession(db), deps=user_deps)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run_once(client: httpx2.AsyncClient, thread: str, body: dict[str, Any]) -> dict[str, Any]:
    """One AG-UI run: print the events as they stream; return RUN_FINISHED."""
    payload = {"threadId": thread, "runId": os.urandom(8).hex(), "messages": [], **body}
    last: dict[str, Any] = {}
    async with client.stream("POST", "/agui", json=payload) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "TEXT_MESSAGE_CONTENT":
                print(event["delta"], end="", flush=True)
            elif event["type"] == "TOOL_CALL_START":
                print(f"\n  [tool] {event['toolCallName']}", flush=True)
            elif event["type"] == "CUSTOM":
                print(f"  [progress] {event['value']['text']}", flush=True)
            elif event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                last = event
    print(f"\n-> {last['type']} {json.dumps(last.get('outcome', last.get('message')))}\n")
    return last


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"id": os.urandom(8).hex(), "role": "user", "content": text}]}


async def tour(base: str) -> None:
    async with httpx2.AsyncClient(base_url=base, timeout=30) as client:
        thread = (await client.post("/threads")).json()["threadId"]  # 128-bit random id
        await run_once(client, thread, say("weather in Paris and Tokyo"))
        await run_once(client, thread, say("call whoami"))

        # Stop a slow tool mid-run: the interrupt endpoint returns once the run stopped.
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_once, client, thread, say("research the history of tea"))
            await anyio.sleep(1.0)
            stopped = (await client.post(f"/threads/{thread}/interrupt")).json()
            print(f"interrupt -> {stopped}")
        await run_once(client, thread, say("just a quick summary"))

        # A call that needs approval ends the run with an AG-UI interrupt; resume answers it.
        paused = await run_once(client, thread, say("email bob@example.com about lunch"))
        interrupt = paused["outcome"]["interrupts"][0]
        answer = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }
        await run_once(client, thread, {"resume": [answer]})
        stored = (await client.get(f"/threads/{thread}")).json()
        print(f"thread {thread}: {len(stored['messages'])} messages stored server-side")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        config = uvicorn.Config(build_app(Path(tmp) / "threads.db"), port=port, log_level="warning")
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
                await anyio.sleep(0.01)
            try:
                await tour(f"http://127.0.0.1:{port}")
            finally:
                server.should_exit = True


if __name__ == "__main__":
    if "--serve" in sys.argv:
        db = Path("~/.agentkit/web_chat.db").expanduser()
        print("open http://127.0.0.1:8000/")
        uvicorn.run(build_app(db), host="127.0.0.1", port=8000, log_level="warning")
    else:
        anyio.run(main)

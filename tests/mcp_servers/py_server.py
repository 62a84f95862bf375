"""A Python MCP test server built on the mcp SDK's ``MCPServer`` (mcp 2.x).

Run: ``python py_server.py stdio`` | ``python py_server.py http PORT`` |
``python py_server.py sse PORT`` (HTTP transports bind 127.0.0.1 only).

Over ``mcp.Client(mode="auto")`` it negotiates 2026-07-28; with ``mode="legacy"`` the
handshake era (2025-11-25), so one server exercises both protocol eras.
"""

from __future__ import annotations

import base64
import contextlib
import os
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ListRootsResult,
    ResourceLink,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

server = MCPServer("py-test", instructions="agentkit test server")

# Observable server-side state for cancellation tests (one process = one state).
STATE: dict[str, int] = {"started": 0, "cancelled": 0, "finished": 0}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def echo_meta(ctx: Context) -> str:
    """The request's ``_meta``, as JSON (pass-through check)."""
    import json

    return json.dumps(dict(ctx.request_context.meta or {}), default=str)


@server.tool()
def client_info(ctx: Context) -> str:
    """The calling client's name and version, as JSON (either protocol era)."""
    import json

    meta = dict(ctx.request_context.meta or {})
    info = meta.get("io.modelcontextprotocol/clientInfo")
    params = ctx.session.client_params
    if info is None and params is not None:
        info = params.client_info.model_dump(mode="json", exclude_none=True)
    return json.dumps(info)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer; records whether it was cancelled."""
    STATE["started"] += 1
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        STATE["cancelled"] += 1
        raise
    STATE["finished"] += 1
    return f"slept {seconds}"


@server.tool()
def stats() -> str:
    """Report started/cancelled/finished counters of ``slow``."""
    return f"started={STATE['started']} cancelled={STATE['cancelled']} finished={STATE['finished']}"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await anyio.sleep(0.02)
    return f"done {steps}"


@server.tool()
def crash() -> str:
    """Exit the server process abruptly in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def pid() -> int:
    """Return the server process id."""
    return os.getpid()


@server.tool()
def env_keys() -> list[str]:
    """List the environment variable names the server sees."""
    return sorted(os.environ)


class Weather(BaseModel):
    """Structured weather."""

    city: str
    temperature: int


@server.tool()
def weather(city: str) -> Weather:
    """Structured content."""
    return Weather(city=city, temperature=21)


@server.tool()
def fail(message: str) -> str:
    """Raise, so the server answers isError."""
    raise ToolError(message)


@server.tool()
def media() -> CallToolResult:
    """Image, audio blob, embedded text resource, a resource link and text."""
    content: list[ContentBlock] = [
        ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        EmbeddedResource(
            resource=TextResourceContents(
                uri="test://doc", text="embedded text", mime_type="text/plain"
            )
        ),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="test://blob", blob=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"
            )
        ),
        ResourceLink(name="readme", uri="test://readme", description="the readme"),
        TextContent(text="plain"),
    ]
    return CallToolResult(content=content)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool ``name`` and announce the tool list change (both eras)."""

    def dynamic(x: int) -> int:
        return x * 2

    server.add_tool(dynamic, name=name, description=f"dynamic tool {name}")
    await ctx.notify_tools_changed()  # 2026-07-28 listen streams
    with contextlib.suppress(Exception):  # handshake era only
        await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def quiet_add_tool(name: str) -> str:
    """Register a new tool ``name`` without announcing it (cache-hint tests)."""
    server.add_tool(lambda x: x, name=name, description=f"quiet tool {name}")
    return f"added {name}"


@server.tool()
async def log(message: str, ctx: Context) -> str:
    """Emit a log notification."""
    await ctx.warning(message, logger_name="py-test")
    return "logged"


def _ask_model(prompt: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(text=prompt))], max_tokens=50)


@server.tool()
def sample(prompt: str, answer: Annotated[CreateMessageResult, Resolve(_ask_model)]) -> str:
    """Ask the client's model (sampling) and return its answer."""
    assert isinstance(answer.content, TextContent)
    return f"model said: {answer.content.text}"


class Person(BaseModel):
    """What the elicitation asks."""

    name: str
    age: int


def _ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@server.tool()
def greet(person: Annotated[Person, Resolve(_ask_person)]) -> str:
    """Elicit a person from the user and greet them."""
    return f"hello {person.name} ({person.age})"


class Confirm(BaseModel):
    """A yes/no question."""

    ok: bool


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the user mid-call (handshake era) and report the action they took."""
    result = await ctx.elicit("Proceed?", Confirm)
    return f"action={result.action}"


def _ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def roots(listed: Annotated[ListRootsResult, Resolve(_ask_roots)]) -> list[str]:
    """The client's roots (URIs)."""
    return [str(r.uri) for r in listed.roots]


@server.resource("test://static/readme", mime_type="text/plain")
def readme() -> str:
    """The readme."""
    return "read me"


@server.resource("test://items/{item}")
def item(item: str) -> str:
    """A templated item."""
    return f"item {item}"


@server.prompt()
def review(code: str) -> str:
    """Ask for a code review."""
    return f"Please review: {code}"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif mode == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

"""agentkit.mcp.serve / build_server: a Toolkit served over MCP (in memory, stdio, HTTP).

The round trip: serve a toolkit, connect an agentkit ``MCPClient``, register its tools in a
second Toolkit, and get the same schemas and the same results as the original.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, types

from agentkit.mcp import HttpServer, MCPClient, StdioServer, register_mcp_client, serve
from agentkit.mcp._server import build_http_app, build_server
from agentkit.tools import Toolkit
from tests._mcp_serve_demo import PIXEL_PNG, build
from tests._toolkits_helpers import call
from tests._waiting import eventually, listening

DEMO = str(Path(__file__).with_name("_mcp_serve_demo.py"))
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("add", {"a": 40}),
    ("add", {"a": 1, "b": 2}),
    ("add", {"a": "one"}),  # invalid arguments: the Toolkit's jsonschema message
    ("shout", {"text": "hi", "times": 3, "mood": "grumpy"}),
    ("shout", {"text": "hi", "times": 7}),
    ("count", {"n": 3}),
    ("fail", {"message": "boom"}),
    ("pixel", {}),
    ("hidden", {}),  # inactive group
    ("no_such_tool", {}),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- in memory, with the raw mcp SDK client ------------------------------------------------


async def test_lists_active_tools_with_schemas_unchanged() -> None:
    tk = build()
    async with Client(build_server(tk, name="demo")) as client:
        assert client.server_info.name == "demo"
        listed = (await client.list_tools()).tools
    expected = {d.name: d for d in tk.get_tool_definitions()}
    assert [t.name for t in listed] == list(expected)
    assert "hidden" not in expected
    for tool in listed:
        assert tool.input_schema == expected[tool.name].parameters
        assert tool.description == expected[tool.name].description


async def test_group_activation_shows_on_the_next_listing() -> None:
    tk = build()
    async with Client(build_server(tk), cache=None) as client:
        assert "hidden" not in {t.name for t in (await client.list_tools()).tools}
        tk.update_tool_groups(["extra"], active=True)
        assert "hidden" in {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("hidden", {})
        assert result.content == [types.TextContent(type="text", text="hidden")]


async def test_results_errors_and_images() -> None:
    async with Client(build_server(build())) as client:
        ok = await client.call_tool("add", {"a": 40})
        assert not ok.is_error
        assert ok.content == [types.TextContent(type="text", text="42")]
        failed = await client.call_tool("fail", {"message": "boom"})
        assert failed.is_error
        assert "RuntimeError: boom" in failed.content[0].text  # type: ignore[union-attr]
        invalid = await client.call_tool("add", {"a": "one"})
        assert invalid.is_error
        assert "'one' is not of type 'integer'" in invalid.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:  # a protocol error (-32602), per the spec
            await client.call_tool("nope", {})
        assert unknown.value.code == -32602 and unknown.value.message == "Unknown tool: nope"
        pixel = await client.call_tool("pixel", {})
        assert pixel.content == [
            types.TextContent(type="text", text="a pixel"),
            types.ImageContent(type="image", data=PIXEL_PNG, mime_type="image/png"),
        ]


async def test_progress_chunks_become_progress_notifications() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(build_server(build())) as client:
        result = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)
        assert result.content == [types.TextContent(type="text", text="counted to 3")]
        # Without a progress token nothing is sent, and the call still works.
        assert not (await client.call_tool("count", {"n": 2})).is_error
    assert seen == [(1.0, 3.0, "at 1"), (2.0, 3.0, "at 2"), (3.0, 3.0, "at 3")]


async def test_client_cancellation_cancels_the_tool(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with Client(build_server(build())) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "wait_forever", {"marker": str(marker)})
            await eventually(marker.exists, "the tool to start")
            tg.cancel_scope.cancel()
        await eventually(lambda: marker.read_text() == "cancelled", "the tool to be cancelled")
        assert (await client.call_tool("add", {"a": 1})).content[0].text == "3"  # type: ignore[union-attr]


# -- round trips with agentkit's MCPClient -------------------------------------------------


async def assert_round_trip(original: Toolkit, client: MCPClient) -> None:
    mirror = Toolkit()
    await register_mcp_client(mirror, client)
    assert mirror.get_tool_definitions() == original.get_tool_definitions()
    for name, arguments in CALLS:
        mine = await call(original, name, **arguments)
        theirs = await call(mirror, name, **arguments)
        assert theirs.is_error == mine.is_error, (name, theirs, mine)
        if name in ("no_such_tool", "hidden"):  # unknown to the mirror: it answers itself
            continue
        assert theirs.content == mine.content, name


async def test_round_trip_over_stdio() -> None:
    client = MCPClient("demo", StdioServer(sys.executable, [DEMO], stderr="devnull"), timeout=30)
    async with client:
        await assert_round_trip(build(), client)
        chunks = [c async for c in client.call_tool_stream("count", {"n": 2})]
        assert [c.get_text() for c in chunks][-1] == "counted to 2"
        assert [(c.metadata or {}).get("message") for c in chunks[:-1]] == ["at 1", "at 2"]
        assert [(c.metadata or {}).get("progress") for c in chunks[:-1]] == [1, 2]
        assert [c.is_last for c in chunks] == [False, False, True]


async def test_round_trip_over_streamable_http() -> None:
    port = free_port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(build(), "streamable_http", port=port, name="demo"))
        url = f"http://127.0.0.1:{port}/mcp"
        await eventually(lambda: listening(port), "uvicorn to listen", timeout=20)
        async with MCPClient("demo", HttpServer(url), timeout=30) as client:
            await assert_round_trip(build(), client)
        tg.cancel_scope.cancel()


async def test_streamable_http_subprocess_and_dns_rebinding_guard() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, DEMO, "streamable_http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import httpx2

        async with httpx2.AsyncClient() as http:

            async def answers() -> bool:
                try:
                    await http.get(f"http://127.0.0.1:{port}/mcp", headers={"Host": "a:1"})
                except httpx2.ConnectError:
                    return False
                return True

            await eventually(answers, "the server to answer", timeout=20)
            # A page on another site pointing its DNS at 127.0.0.1 sends its own Host header.
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            evil = await http.post(
                f"http://127.0.0.1:{port}/mcp", json=body, headers={"Host": "evil.example:80"}
            )
            assert evil.status_code in (403, 421)
        async with MCPClient("demo", HttpServer(f"http://127.0.0.1:{port}/mcp")) as client:
            assert (await client.call_tool("add", {"a": 2})).get_text() == "4"
    finally:
        proc.terminate()
        proc.wait(10)


# -- API details ----------------------------------------------------------------------------


async def test_unknown_transport() -> None:
    with pytest.raises(ValueError, match="unknown transport"):
        await serve(Toolkit(), "carrier_pigeon")  # type: ignore[arg-type]


def test_build_http_app_is_an_asgi_app() -> None:
    app = build_http_app(build(), path="/tools")
    assert [route.path for route in app.routes] == ["/tools"]  # type: ignore[attr-defined]


def test_importing_the_server_module_is_cheap() -> None:
    code = (
        "import sys, json, agentkit.mcp._server;"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'uvicorn', 'starlette'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []

"""MCPClient features and fixes of issue 15 (client side), against real servers.

Restart test: a streamable-HTTP server is restarted mid-session and the next call succeeds
(the client starts a new session on the 404, as the spec requires), in both protocol eras.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import pytest

import agentkit
from agentkit.exceptions import MCPProtocolError
from agentkit.mcp import HttpServer, MCPClient, StdioServer, register_mcp_client, serve
from agentkit.tools import Toolkit
from tests._mcp_helpers import PY_SERVER, ROOT, free_port
from tests._waiting import eventually, listening

RAW = str(ROOT / "tests" / "mcp_servers" / "raw_server.py")
pytestmark = pytest.mark.anyio


def start_http(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(PY_SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:  # uvicorn waits for open SSE streams (a 2026 listen stream) before exiting
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_server_restart_mid_session_next_call_succeeds(protocol: Any) -> None:
    port = free_port()
    proc = start_http(port)
    server = HttpServer(f"http://127.0.0.1:{port}/mcp")
    try:
        async with MCPClient("py", server, protocol=protocol, timeout=30) as client:
            first = await client.call_tool("echo", {"text": "one"})
            assert first.get_text() == "one"
            if protocol == "auto":
                # A 2026-07-28 client holds a listen stream open, and uvicorn's graceful
                # shutdown waits on it for good: stop() would only wait out its 5 s and kill.
                proc.kill()
                proc.wait(10)
            else:
                stop(proc)
            proc = start_http(port)  # same address, new process: our session id is unknown
            again = await client.call_tool("echo", {"text": "two"})
            assert not again.is_error, again.get_text()
            assert again.get_text() == "two"
            assert "echo" in {t.name for t in await client.list_tools(refresh=True)}
    finally:
        stop(proc)


async def test_meta_pass_through_on_calls() -> None:
    seen: dict[str, Any] = {}
    async with MCPClient("py", StdioServer(sys.executable, [str(PY_SERVER), "stdio"])) as client:
        tools = {t.name for t in await client.list_tools()}
        name = "echo_meta" if "echo_meta" in tools else None
        if name is None:
            pytest.fail("py_server needs an echo_meta tool")
        result = await client.call_tool(name, {}, meta={"traceparent": "00-abc-def-01"})
        seen["text"] = result.get_text()
    assert "00-abc-def-01" in seen["text"]


async def test_client_info_version_is_the_package_version() -> None:
    async with MCPClient("py", StdioServer(sys.executable, [str(PY_SERVER), "stdio"])) as client:
        result = await client.call_tool("client_info", {})
    assert f'"version": "{agentkit.__version__}"' in result.get_text()


async def test_looping_pagination_cursor_is_detected() -> None:
    server = StdioServer(sys.executable, [RAW, "--loop-cursor"])
    async with MCPClient("raw", server) as client:
        with pytest.raises(MCPProtocolError, match="twice"):
            await client.list_tools()


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_sampling_passes_the_servers_max_tokens(protocol: Any) -> None:
    from agentkit.testing import ScriptedModel

    model = ScriptedModel(["fine"])
    server = StdioServer(sys.executable, [str(PY_SERVER), "stdio"])
    async with MCPClient("py", server, protocol=protocol, sampling_model=model) as client:
        result = await client.call_tool("sample", {"prompt": "hi"})
    assert result.get_text() == "model said: fine"
    assert model.requests[0].settings == {"max_tokens": 50}


@pytest.mark.parametrize("answer", ["cancel", "decline", None])
async def test_elicitation_cancel_and_decline(answer: Any) -> None:
    server = StdioServer(sys.executable, [str(PY_SERVER), "stdio"])
    client = MCPClient("py", server, protocol="legacy", elicitation_callback=lambda m, s: answer)
    async with client:
        result = await client.call_tool("ask", {})
    assert result.get_text() == f"action={answer or 'decline'}"


async def test_set_roots_sends_roots_list_changed(tmp_path: Any) -> None:
    client = MCPClient("raw", StdioServer(sys.executable, [RAW]), roots=[tmp_path])
    async with client:
        await client.set_roots([tmp_path / "other"])
        result = await client.call_tool("notified", {})
    assert "notifications/roots/list_changed" in result.get_text()


async def test_tasks_only_tools_are_registered() -> None:
    from agentkit.mcp._tool import MCPTool
    from agentkit.tools import Toolkit
    from tests._mcp_helpers import everything_stdio

    async with MCPClient("everything", everything_stdio()) as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        listed = {t.name for t in await client.list_tools()}
    assert "simulate-research-query" in listed  # execution.taskSupport = "required"
    assert isinstance(tk.get_tool("simulate-research-query"), MCPTool)  # called as a task
    summed = tk.get_tool("get-sum")
    assert isinstance(summed, MCPTool) and summed.title == "Get Sum Tool"


async def test_resource_subscription_and_completion_against_server_everything() -> None:
    from tests._mcp_helpers import everything_stdio

    updated: list[str] = []
    got_update = anyio.Event()

    def on_update(changed: str) -> None:
        updated.append(changed)
        got_update.set()

    uri = "demo://resource/dynamic/text/1"
    async with MCPClient("everything", everything_stdio()) as client:
        await client.subscribe_resource(uri, on_update)
        await client.call_tool("toggle-subscriber-updates", {})
        with anyio.fail_after(30):
            await got_update.wait()
        assert updated[0] == uri
        await client.unsubscribe_resource(uri)
        values = await client.complete("prompt", "completable-prompt", "department", "E")
    assert values == ["Engineering"]


async def test_list_changed_callbacks_for_prompts_and_resources() -> None:
    from agentkit.mcp._app import MCPApp
    from tests._mcp_helpers import free_port as _port

    seen: list[str] = []
    tk = Toolkit()
    app = MCPApp(tk)

    @app.prompt()
    def hello() -> str:
        """Say hello."""
        return "hello"

    @app.resource("mem://x")
    def x() -> str:
        """A value."""
        return "x"

    @tk.tool
    async def announce() -> str:
        """Tell clients that prompts and resources changed."""
        await app.notify_list_changed("prompts")
        await app.notify_list_changed("resources")
        return "done"

    port = _port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(app, "streamable_http", port=port))
        url = f"http://127.0.0.1:{port}/mcp"
        await eventually(lambda: listening(port), "the server to listen", timeout=30)
        async with MCPClient("app", HttpServer(url), protocol="legacy") as client:
            both = anyio.Event()

            def changed(kind: str) -> None:
                seen.append(kind)
                if len(seen) == 2:
                    both.set()

            client.events.on_list_changed("prompts", lambda: changed("prompts"))
            client.events.on_list_changed("resources", lambda: changed("resources"))
            await client.list_tools()
            await client.call_tool("announce", {})
            with anyio.fail_after(30):
                await both.wait()
        tg.cancel_scope.cancel()
    assert sorted(seen) == ["prompts", "resources"]


async def test_tool_list_cached_without_hints() -> None:
    async with MCPClient("raw", StdioServer(sys.executable, [RAW])) as client:
        for _ in range(3):
            await client.list_tools()
        assert (await client.call_tool("list_count", {})).get_text() == "1"


async def test_cache_hint_ttl_zero_means_no_cache() -> None:
    # mcp 2.x servers answer tools/list with ttlMs: 0 at 2026-07-28: never reuse the list.
    server = StdioServer(sys.executable, [str(PY_SERVER), "stdio"])
    async with MCPClient("py", server, protocol="auto") as client:
        assert client.protocol_version == "2026-07-28"
        await client.list_tools()
        await client.call_tool("quiet_add_tool", {"name": "unannounced"})
        assert "unannounced" in {t.name for t in await client.list_tools()}

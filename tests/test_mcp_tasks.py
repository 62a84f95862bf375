"""MCP tasks (SEP-1686): agentkit's client against agentkit's own served task tools."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest

from agentkit.mcp import HttpServer, MCPClient, StdioServer
from tests._mcp_helpers import ROOT, free_port

SERVER = ROOT / "tests" / "mcp_servers" / "task_server.py"
pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def _client(transport: str) -> AsyncIterator[MCPClient]:
    if transport == "stdio":
        config = StdioServer(sys.executable, [str(SERVER), "stdio"], env={"PYTHONPATH": str(ROOT)})
        async with MCPClient("tasks", config) as client:
            yield client
        return
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "no server"
            time.sleep(0.05)
        async with MCPClient("tasks", HttpServer(f"http://127.0.0.1:{port}/mcp")) as client:
            yield client
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_task_tool_completes_fails_and_cancels(transport: str) -> None:
    async with _client(transport) as client:
        task = await client.call_tool_as_task("add", {"a": 2, "b": 3})
        assert (await task.result()).get_text() == "5"
        assert (await task.status()).status == "completed"

        failing = await client.call_tool_as_task("boom", {})
        response = await failing.result()
        assert response.is_error and "kaboom" in response.get_text()
        assert (await failing.status()).status == "failed"

        running = await client.call_tool_as_task("block", {})
        assert (await running.status()).status == "working"
        assert (await running.cancel()).status == "cancelled"
        cancelled = await running.result()
        assert cancelled.is_error and "cancelled" in cancelled.get_text()


async def test_required_task_tool_refuses_a_plain_call() -> None:
    async with _client("stdio") as client:
        response = await client.call_tool("add", {"a": 1, "b": 1})
        assert response.is_error and "-32601" in response.get_text()
        assert (await client.call_tool("echo", {"text": "hi"})).get_text() == "hi"
        assert (
            await (await client.call_tool_as_task("echo", {"text": "t"})).result()
        ).get_text() == "t"

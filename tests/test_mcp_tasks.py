"""MCP tasks, SEP-1686 (2025-11-25) and SEP-2663 (2026-07-28): agentkit's client against
agentkit's own served task tools."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentkit.mcp import HttpServer, MCPClient
from tests._mcp_task_helpers import task_server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with task_server("http") as url:
        yield url


@contextlib.asynccontextmanager
async def _client(protocol: str, url: str) -> AsyncIterator[MCPClient]:
    mode: Any = protocol
    async with MCPClient("tasks", HttpServer(url), protocol=mode) as client:
        yield client


# 2026-07-28 (the tasks extension, SEP-2663) and 2025-11-25 (SEP-1686)
ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]


@pytest.mark.parametrize(("protocol", "version"), ERAS, ids=[v for _, v in ERAS])
async def test_task_tool_completes_fails_and_cancels(
    protocol: str, version: str, http_url: str
) -> None:
    async with _client(protocol, http_url) as client:
        assert client.protocol_version == version
        task = await client.call_tool_as_task("add", {"a": 2, "b": 3})
        assert (await task.result()).get_text() == "5"
        assert (await task.status()).status == "completed"

        failing = await client.call_tool_as_task("boom", {})
        response = await failing.result()
        assert response.is_error and "kaboom" in response.get_text()
        # A tool error: on 2026-07-28 a completed task with an error result.
        expected = "completed" if version == "2026-07-28" else "failed"
        assert (await failing.status()).status == expected

        running = await client.call_tool_as_task("block", {})
        assert (await running.status()).status == "working"
        assert (await running.cancel()).status == "cancelled"
        cancelled = await running.result()
        assert cancelled.is_error and "cancelled" in cancelled.get_text()

        again = await client.get_task(task.task_id, tool="add")
        assert (await again.result()).get_text() == "5"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_tool_that_requires_tasks_is_called_through_one(
    protocol: str, http_url: str
) -> None:
    async with _client(protocol, http_url) as client:
        await client.list_tools()  # the listing says which tools require tasks
        assert (await client.call_tool("add", {"a": 1, "b": 1})).get_text() == "2"
        assert (await client.call_tool("echo", {"text": "hi"})).get_text() == "hi"
        assert (
            await (await client.call_tool_as_task("echo", {"text": "t"})).result()
        ).get_text() == "t"


async def test_a_call_asks_first_then_becomes_a_task(http_url: str) -> None:
    """SEP-2663's MRTR-to-task composition: the question comes as a synchronous input round
    (no task yet), the retry with the answer creates the task, whose result has the answer."""
    asked: list[str] = []

    def answer(message: str, schema: dict[str, Any]) -> dict[str, object]:
        asked.append(message)
        return {"name": "Alice"}

    server = HttpServer(http_url)
    async with MCPClient("tasks", server, elicitation_callback=answer) as client:
        assert client.protocol_version == "2026-07-28"
        task = await client.call_tool_as_task("greet_later", {})
        assert asked == ["Your name?"]  # answered before the task existed
        assert not task.task_id.startswith("immediate-")  # a real task, on the server
        assert (await task.result()).get_text() == "hello Alice"

        # A task that asks from inside itself: input_required, answered with tasks/update.
        inside = await client.call_tool_as_task("greet_in_task", {})
        assert (await inside.result()).get_text() == "hi Alice"
        assert asked == ["Your name?", "Your name?"]

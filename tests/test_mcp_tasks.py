"""MCP tasks, SEP-1686 (2025-11-25) and SEP-2663 (2026-07-28): agentkit's client against
agentkit's own served task tools."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from agentkit.mcp import HttpServer, MCPClient, TaskState
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


async def test_a_task_status_notification_ends_the_wait(
    http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2025-11-25: the server pushes ``notifications/tasks/status`` when the task ends, and
    ``wait()`` takes the pushed state (here ``tasks/get`` never reports the end)."""
    async with _client("legacy", http_url) as client:
        task = await client.call_tool_as_task("gated", {})
        polling = anyio.Event()

        async def stale_status() -> TaskState:
            polling.set()  # wait() is in its loop, tracking the task
            return TaskState(task.task_id, "working", poll_interval=0.05)

        monkeypatch.setattr(task, "status", stale_status)
        waited: list[TaskState] = []

        async def wait() -> None:
            waited.append(await task.wait())

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await polling.wait()
                assert (await client.call_tool("release", {})).get_text() == "ok"
        assert [s.status for s in waited] == ["completed"]
        monkeypatch.undo()
        assert (await task.result()).get_text() == "released"  # tasks/result as before


async def test_status_notifications_are_kept_only_for_tasks_being_waited_on() -> None:
    from mcp_types import TaskStatusNotificationParams

    from agentkit.mcp._tasks import TaskUpdates

    def note(task_id: str, status: str) -> TaskStatusNotificationParams:
        wire = {"taskId": task_id, "status": status, "createdAt": "2025-11-25T00:00:00Z"}
        return TaskStatusNotificationParams.model_validate(
            {**wire, "lastUpdatedAt": "x", "ttl": None}
        )

    updates = TaskUpdates()
    await updates.receive(note("stranger", "completed"))  # nobody waits on it: dropped
    assert updates.take("stranger") is None
    changed = updates.track("mine")
    await updates.receive(note("mine", "completed"))
    assert changed.is_set()
    pushed = updates.take("mine")
    assert pushed is not None and pushed.status == "completed"
    assert updates.take("mine") is None  # taken once
    updates.forget("mine")
    await updates.receive(note("mine", "failed"))
    assert updates.take("mine") is None

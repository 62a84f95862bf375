"""Served MCP tasks belong to whoever created them (real HTTP sessions, two principals).

A task id is a capability only for its creator: another session (2025-11-25) or another
authenticated principal (both eras) gets, reads, cancels and lists exactly what it would
for an id that never existed. Each owner holds a bounded number of tasks, for a TTL the
server caps, and a session's tasks end with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client, types

from agentkit.exceptions import MCPError
from agentkit.mcp import HttpServer, MCPClient
from agentkit.mcp._tasks import MAX_TASKS_PER_OWNER, MAX_TTL_MS
from tests._mcp_task_helpers import task_server

pytestmark = pytest.mark.anyio
FAKE = "0" * 32  # a task id no one created


@pytest.fixture(scope="module")
def open_url() -> Iterator[str]:
    """One served MCPApp with task tools, no authentication (sessions tell callers apart)."""
    with task_server("http") as url:
        yield url


@pytest.fixture(scope="module")
def auth_url() -> Iterator[str]:
    """The same app behind bearer tokens of two principals (alice and bob)."""
    with task_server("http-auth") as url:
        yield url


def _client(url: str, protocol: str, token: str | None = None) -> MCPClient:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    mode: Any = protocol
    return MCPClient("tasks", HttpServer(url, headers=headers), protocol=mode)


async def _attempt(client: MCPClient, task_id: str, action: str) -> str:
    try:
        task = await client.get_task(task_id)  # polls once: tasks/get
        await getattr(task, action)()
    except MCPError as exc:
        return str(exc).replace(task_id, "<id>")
    return "allowed"


async def _refusals(client: MCPClient, task_id: str) -> list[str]:
    """What ``client`` is told for get, cancel and result of ``task_id``, the id masked."""
    return [await _attempt(client, task_id, a) for a in ("status", "cancel", "result")]


@pytest.mark.parametrize("protocol", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_another_principal_cannot_see_or_touch_a_task(auth_url: str, protocol: str) -> None:
    async with (
        _client(auth_url, protocol, "alice-token") as alice,
        _client(auth_url, protocol, "bob-token") as bob,
    ):
        task = await alice.call_tool_as_task("block", {})
        refused = await _refusals(bob, task.task_id)
        assert refused == await _refusals(bob, FAKE)
        assert all("Unknown task: <id>" in r for r in refused), refused
        assert (await task.status()).status == "working"  # bob's cancel did nothing
        assert (await task.cancel()).status == "cancelled"


async def _list(url: str) -> list[types.Task]:
    """``tasks/list`` from a fresh 2025-11-25 session."""
    async with Client(url, mode="legacy") as raw:
        listed = await raw.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    return listed.tasks


async def test_another_session_cannot_see_touch_or_list_a_task(open_url: str) -> None:
    async with _client(open_url, "legacy") as owner, _client(open_url, "legacy") as other:
        task = await owner.call_tool_as_task("block", {})
        refused = await _refusals(other, task.task_id)
        assert refused == await _refusals(other, FAKE)
        assert all("Unknown task: <id>" in r for r in refused), refused
        assert await _list(open_url) == []
        assert (await task.status()).status == "working"
        assert (await task.cancel()).status == "cancelled"


async def test_a_sessions_tasks_end_when_it_closes(open_url: str) -> None:
    async with _client(open_url, "legacy") as observer:
        before = int((await observer.call_tool("wait_ended", {"count": 0})).get_text())
        async with _client(open_url, "legacy") as client:
            await client.call_tool_as_task("block", {})
            await client.call_tool_as_task("block", {})
        # The session closed (DELETE): both tasks were stopped, none waits for its TTL.
        ended = await observer.call_tool("wait_ended", {"count": before + 2})
        assert int(ended.get_text()) == before + 2


async def test_tasks_per_session_are_bounded_and_their_ttl_capped(open_url: str) -> None:
    async with _client(open_url, "legacy") as client:
        first = await client.call_tool_as_task("block", {}, ttl=10 * MAX_TTL_MS / 1000)
        assert (await first.status()).ttl == MAX_TTL_MS / 1000
        for _ in range(MAX_TASKS_PER_OWNER - 1):
            await client.call_tool_as_task("block", {})
        with pytest.raises(MCPError, match="too many tasks"):
            await client.call_tool_as_task("block", {})
        await first.cancel()
        await client.call_tool_as_task("block", {})  # the ended task made room
        with pytest.raises(MCPError, match="Unknown task"):
            await first.status()

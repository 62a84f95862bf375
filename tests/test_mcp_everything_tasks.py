"""server-everything's task-only tool (SEP-1686, taskSupport "required") through MCPClient."""

from __future__ import annotations

import pytest

from agentkit.mcp import MCPClient
from tests._mcp_helpers import EVERYTHING, everything_stdio

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not EVERYTHING.exists(), reason="run scripts/test: it installs servers"),
]


async def test_a_task_only_tool_is_called_and_cancelled_as_a_task() -> None:
    async with MCPClient("everything", everything_stdio()) as client:
        assert client.protocol_version == "2025-11-25"
        await client.list_tools()  # the listing says the tool requires tasks
        report = await client.call_tool("simulate-research-query", {"topic": "otters"})
        assert not report.is_error, report.get_text()
        assert "Research Report: otters" in report.get_text()

        task = await client.call_tool_as_task("simulate-research-query", {"topic": "seals"})
        assert (await task.status()).status == "working"
        assert (await task.cancel()).status == "cancelled"
        stopped = await task.result()
        assert stopped.is_error and "cancelled" in stopped.get_text()

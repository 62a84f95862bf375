"""server-everything's task-only tool (SEP-1686, taskSupport "required") through MCPClient."""

from __future__ import annotations

import pytest

from agentkit.mcp import MCPClient, register_mcp_client
from agentkit.messages import ToolUseBlock
from agentkit.tools import Toolkit
from tests._mcp_helpers import EVERYTHING, everything_stdio

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not EVERYTHING.exists(), reason="run scripts/test: it installs servers"),
]


async def test_a_task_only_tool_is_called_and_cancelled_as_a_task() -> None:
    async with MCPClient("everything", everything_stdio()) as client:
        assert client.protocol_version == "2025-11-25"
        toolkit = Toolkit()
        await register_mcp_client(toolkit, client)  # the listing says it requires tasks
        block = ToolUseBlock(
            type="tool_use", id="t1", name="simulate-research-query", input={"topic": "otters"}
        )
        chunks = [c async for c in toolkit.call_tool_function(block)]  # as an agent calls it
        report = chunks[-1]
        assert not report.is_error, report.get_text()
        assert "Research Report: otters" in report.get_text()

        task = await client.call_tool_as_task("simulate-research-query", {"topic": "seals"})
        assert (await task.status()).status == "working"
        assert (await task.cancel()).status == "cancelled"
        stopped = await task.result()
        assert stopped.is_error and "cancelled" in stopped.get_text()

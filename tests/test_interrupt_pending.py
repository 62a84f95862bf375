"""``agent.interrupt_pending()``: a reply paused for approval ends as interrupted."""

from __future__ import annotations

import pytest

from agentkit.agent import ReActAgent
from agentkit.exceptions import StateError
from agentkit.memory import check_memory_invariant
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import INTERRUPTED_TEXT, Toolkit


def make_agent(model: ScriptedModel, ran: list[str]) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        ran.append(path)
        return "deleted"

    return ReActAgent("a", "You help.", model, toolkit, print_hint=False)


async def test_pending_calls_are_answered_as_interrupted_and_the_chat_goes_on() -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [[tool_use("delete", "d1", path="/a"), tool_use("delete", "d2", path="/b")], "ok"]
    )
    agent = make_agent(model, ran)
    first = await agent.run("clean up")
    assert first.stop_reason == "pending_approval" and len(first.pending) == 2
    result = await agent.interrupt_pending("stop, keep the files")
    assert result.stop_reason == "interrupted" and result.interrupted and result.pending == []
    assert agent.pending_tool_calls == [] and ran == []
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    results = [b for m in memory for b in m.get_blocks("tool_result")]
    assert [b["id"] for b in results] == ["d1", "d2"]
    assert all(INTERRUPTED_TEXT in str(b["output"]) for b in results)
    assert memory[-1].get_text() == "stop, keep the files"
    assert agent.state_dict()["pending_tool_calls"] == []
    follow = await agent.run("what now?")
    assert follow.output == "ok" and len(model.requests) == 2


async def test_nothing_pending_is_a_state_error() -> None:
    agent = make_agent(ScriptedModel(["hi"]), [])
    with pytest.raises(StateError, match="no tool calls waiting"):
        await agent.interrupt_pending()
    await agent.run("hello")
    with pytest.raises(StateError):
        await agent.interrupt_pending("x")

"""Tools a capability offers (``Capability.tools``) run like toolkit tools: offered after
the toolkit's, validated, approved when they require it (resumed approvals too), seen by
``before_tool``, and asked for again before each request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentkit import Capability, ReActAgent, RunContext, Toolkit
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import FunctionTool, Tool


def shout(word: str) -> str:
    """Shout a word.

    Args:
        word: The word.
    """
    return word.upper()


class Offers(Capability[Any]):
    def __init__(self, *, requires_approval: bool = False) -> None:
        self.tool = FunctionTool(shout, requires_approval=requires_approval)
        self.asked = 0

    async def tools(self, ctx: RunContext[Any]) -> Sequence[Tool]:
        self.asked += 1
        return [self.tool]


def echo_toolkit() -> Toolkit:
    toolkit = Toolkit()

    @toolkit.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    return toolkit


async def test_offered_tools_follow_the_toolkit_and_are_called_with_checks() -> None:
    caps = Offers()
    model = ScriptedModel(
        [[tool_use("shout", "c1", word="hi"), tool_use("shout", "c2", wrong=1)], "Done."]
    )
    agent = ReActAgent("bot", "sys", model, echo_toolkit(), capabilities=[caps])
    result = await agent.run("go")
    assert model.requests[0].tool_names == ["echo", "shout"]
    assert caps.asked == 2  # once per request
    blocks = [b for m in result.new_messages if isinstance(m.content, list) for b in m.content]
    outputs = {b["id"]: b for b in blocks if b["type"] == "tool_result"}
    assert outputs["c1"]["output"] == "HI" and not outputs["c1"].get("is_error")
    assert outputs["c2"].get("is_error") and "word" in str(outputs["c2"]["output"])


async def test_an_offered_tool_that_requires_approval_pauses_and_resumes() -> None:
    model = ScriptedModel([[tool_use("shout", "c1", word="hi")], "Done."])
    agent = ReActAgent("bot", "sys", model, capabilities=[Offers(requires_approval=True)])
    paused = await agent.run("go")
    assert paused.stop_reason == "pending_approval"
    resumed = await agent.run(approvals={"c1": True})
    assert resumed.stop_reason == "final" and resumed.output == "Done."
    blocks = [b for m in resumed.new_messages if isinstance(m.content, list) for b in m.content]
    assert [b["output"] for b in blocks if b["type"] == "tool_result"] == ["HI"]

"""``AgentHooks``: typed hooks adapted onto the string registry."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import AgentHooks, ToolResponse
from agentkit.messages import Msg, ToolUseBlock
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, agent_for, results_of


class Log(AgentHooks):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before_run(self, agent: Any, messages: list[Msg]) -> None:
        self.seen.append(f"run:{[m.get_text() for m in messages]}")

    async def before_model(self, agent: Any, messages: list[Msg]) -> None:
        self.seen.append(f"model:{len(messages)}")

    async def before_tool(self, agent: Any, call: ToolUseBlock) -> ToolUseBlock | None:
        self.seen.append(f"tool:{call['id']}")
        if call["name"] == "add":  # rewrite the arguments
            return {**call, "input": {"a": 40, "b": 2}}
        return None

    async def after_tool(
        self, agent: Any, call: ToolUseBlock, result: ToolResponse
    ) -> ToolResponse | None:
        self.seen.append(f"done:{call['id']}")
        return None

    async def after_run(self, agent: Any, reply: Msg) -> Msg | None:
        return Msg(reply.name, reply.get_text().upper(), "assistant", reply.metadata)


async def test_typed_hooks_see_typed_values_and_may_replace_them() -> None:
    rec = Recorder()
    model = ScriptedModel(
        [[text("go"), tool_use("add", "a1", a=1, b=1), tool_use("sleep", "s1", label="s")], "ok"]
    )
    agent = agent_for(model, rec)
    log = Log()
    agent.add_hooks(log)
    result = await agent.run("hi")
    assert result.output == "OK"
    assert results_of(result.new_messages)["a1"] == ("42", False)
    assert log.seen[:2] == ["run:['hi']", "model:2"]
    # Parallel calls: each call's before precedes its after; both calls are seen once.
    tools = log.seen[2:-1]
    assert sorted(tools) == ["done:a1", "done:s1", "tool:a1", "tool:s1"]
    assert tools.index("tool:a1") < tools.index("done:a1")
    assert tools.index("tool:s1") < tools.index("done:s1")
    assert log.seen[-1] == "model:4"
    agent.remove_hook("pre_acting", "Log")  # registered under the class name


async def test_only_overridden_methods_are_registered() -> None:
    class OnlyModel(AgentHooks):
        async def before_model(self, agent: Any, messages: list[Msg]) -> None:
            pass

    agent = agent_for(ScriptedModel(["x"]))
    agent.add_hooks(OnlyModel(), name="m")
    with pytest.raises(KeyError):
        agent.remove_hook("pre_acting", "m")
    agent.remove_hook("pre_reasoning", "m")

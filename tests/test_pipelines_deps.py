"""A run's dependencies travel through pipelines to every agent that takes them."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit import ReActAgent, ToolContext, Toolkit
from agentkit.agent._user import UserAgent
from agentkit.messages import Msg
from agentkit.pipelines import fanout_pipeline, sequential_pipeline
from agentkit.pipelines._protocols import accepts_deps
from agentkit.testing import ScriptedModel, tool_use


@dataclass
class Deps:
    user_id: int


def whoami_agent(name: str, seen: list[tuple[str, object]]) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool
    def whoami(ctx: ToolContext[Deps]) -> str:
        """Report the caller's user id."""
        seen.append((name, ctx.deps))
        return f"user {ctx.deps.user_id}" if ctx.deps is not None else "nobody"

    script = [[tool_use("whoami", f"{name}-1")], f"{name} done"]
    return ReActAgent(name, "Answer.", ScriptedModel(script), toolkit)


async def test_sequential_pipeline_hands_deps_to_every_agent() -> None:
    seen: list[tuple[str, object]] = []
    deps = Deps(7)
    agents = [whoami_agent("a", seen), whoami_agent("b", seen)]
    reply = await sequential_pipeline(agents, "go", deps=deps)
    assert reply is not None and reply.get_text() == "b done"
    assert seen == [("a", deps), ("b", deps)]
    for agent in agents:  # never stored in memory
        assert "user_id" not in str([m.to_dict() for m in await agent.memory.get_memory()])


async def test_fanout_pipeline_shares_deps_and_without_them_tools_see_none() -> None:
    seen: list[tuple[str, object]] = []
    deps = Deps(3)
    agents = [whoami_agent("a", seen), whoami_agent("b", seen)]
    replies = await fanout_pipeline(agents, Msg("user", "go", "user"), deps=deps)
    assert [r.get_text() for r in replies] == ["a done", "b done"]
    assert sorted(seen, key=lambda s: s[0]) == [("a", deps), ("b", deps)]

    seen.clear()
    again = [whoami_agent("c", seen)]
    await fanout_pipeline(again, "go")
    assert seen == [("c", None)]


def test_only_agents_that_take_deps_get_them() -> None:
    assert accepts_deps(whoami_agent("a", []))
    assert not accepts_deps(UserAgent("human"))
    assert not accepts_deps(object())

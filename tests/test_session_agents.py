"""Sessions with real ReActAgents: continue a conversation, groups, rejected states."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.agent import ReActAgent
from agentkit.exceptions import StateError
from agentkit.memory import check_memory_invariant
from agentkit.session import JSONSession, Session, SQLiteSession, StateGroup
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit


def make(name: str, script: list[object]) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    return ReActAgent(name, "Be brief.", ScriptedModel(script), toolkit, print_hint=False)  # type: ignore[arg-type]


@pytest.fixture(params=["json", "sqlite"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Session:
    if request.param == "json":
        return JSONSession(tmp_path / "json")
    return SQLiteSession(tmp_path / "s.db")


async def test_conversation_continues_after_load(session: Session) -> None:
    first = make("calc", [[tool_use("add", "c1", a=2, b=3)], "2 + 3 = 5"])
    await first("What is 2 + 3?")
    await session.save("calc-1", first)

    second = make("calc", ["And doubled: 10"])
    assert await session.load("calc-1", second)
    before = await first.memory.get_memory()
    assert await second.memory.get_memory() == before
    reply = await second("Double it.")
    assert reply.get_text() == "And doubled: 10"
    seen = second.model.requests[0].messages  # type: ignore[attr-defined]
    assert [m.id for m in seen if m.role != "system"][: len(before)] == [m.id for m in before]
    check_memory_invariant(await second.memory.get_memory())


async def test_group_of_agents_in_one_session(session: Session) -> None:
    alice, bob = make("alice", ["hi from alice"]), make("bob", ["hi from bob"])
    await alice("hello")
    await bob("hello")
    await session.save("pair", StateGroup({"alice": alice, "bob": bob}))
    alice2, bob2 = make("alice", []), make("bob", [])
    assert await session.load("pair", StateGroup({"alice": alice2, "bob": bob2}))
    assert [m.get_text() for m in await alice2.memory.get_memory()] == ["hello", "hi from alice"]
    assert [m.get_text() for m in await bob2.memory.get_memory()] == ["hello", "hi from bob"]


async def test_inconsistent_state_is_rejected_and_agent_kept(session: Session) -> None:
    agent = make("calc", [[tool_use("add", "c1", a=1, b=1)], "2"])
    await agent("1 + 1?")
    state = agent.state_dict()
    # Drop the tool result: a tool call without a result breaks the memory invariant.
    state["memory"]["messages"] = [
        m for m in state["memory"]["messages"] if "tool_result" not in str(m["content"])
    ]
    await session.save_state("broken", state)
    fresh = make("calc", ["kept"])
    await fresh("keep me")
    with pytest.raises(StateError, match="inconsistent"):
        await session.load("broken", fresh)
    assert [m.get_text() for m in await fresh.memory.get_memory()] == ["keep me", "kept"]


async def test_saving_from_a_post_reply_hook(session: Session) -> None:
    """Autosave after every reply: state_dict works from a post_reply hook."""
    agent = make("calc", ["one", "two"])

    async def autosave(a: ReActAgent, kwargs: dict[str, object], output: object) -> None:
        await session.save("auto", a)

    agent.register_hook("post_reply", "autosave", autosave)
    await agent("first")
    await agent("second")
    restored = make("calc", [])
    assert await session.load("auto", restored)
    assert [m.get_text() for m in await restored.memory.get_memory()] == [
        "first",
        "one",
        "second",
        "two",
    ]

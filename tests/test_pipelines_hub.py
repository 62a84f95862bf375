"""MsgHub, sequential and fanout pipelines, with real ReActAgents driven by ScriptedModels."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentkit.agent import ReActAgent
from agentkit.agent._user import UserAgent
from agentkit.exceptions import AgentBusyError, ModelAPIError
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.pipelines import MsgHub, fanout_pipeline, sequential_pipeline
from agentkit.pipelines._hub import audible_copy
from agentkit.testing import FunctionModel, ScriptedModel, thinking, tool_use
from agentkit.tools import Toolkit


def make_agent(name: str, script: list[Any], **kwargs: Any) -> ReActAgent:
    return ReActAgent(name, f"You are {name}.", ScriptedModel(script, **kwargs), print_hint=False)


async def said(agent: ReActAgent) -> list[tuple[str, str]]:
    """(author, text) of every message in the agent's memory that carries text."""
    return [(m.name, m.get_text()) for m in await agent.memory.get_memory() if m.get_text()]


async def test_hub_broadcasts_each_reply_to_the_others() -> None:
    alice = make_agent("alice", ["I'm Alice."])
    bob = make_agent("bob", ["I'm Bob."])
    carol = make_agent("carol", ["I'm Carol."])
    topic = Msg("host", "Introduce yourselves.", "user")
    async with MsgHub([alice, bob, carol], announcement=topic):
        await alice()
        await bob()
        await carol()
    assert await said(alice) == [
        ("host", "Introduce yourselves."),
        ("alice", "I'm Alice."),
        ("bob", "I'm Bob."),
        ("carol", "I'm Carol."),
    ]
    assert await said(bob) == await said(alice)
    assert await said(carol) == await said(alice)
    # Carol's model saw what Alice and Bob said before she spoke.
    seen = [m.get_text() for m in carol.model.requests[0].messages]  # type: ignore[attr-defined]
    assert seen[-3:] == ["Introduce yourselves.", "I'm Alice.", "I'm Bob."]
    # Memories hold copies, never shared objects.
    b_mem, c_mem = await bob.memory.get_memory(), await carol.memory.get_memory()
    assert b_mem[1] == c_mem[1] and b_mem[1] is not c_mem[1]
    assert b_mem[1].id == (await alice.memory.get_memory())[1].id


async def test_hooks_are_removed_on_exit_even_on_error() -> None:
    alice = make_agent("alice", ["inside", "outside"])
    bob = make_agent("bob", [])

    async def talk_then_fail() -> None:
        async with MsgHub([alice, bob]):
            await alice("hi")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await talk_then_fail()
    await alice("again")
    assert await said(bob) == [("alice", "inside")]
    assert alice._hooks is None or not alice._hooks.has("post_reply")


async def test_tool_calls_and_thinking_stay_private() -> None:
    toolkit = Toolkit()

    @toolkit.tool
    def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: The city.
        """
        return f"sunny in {city}"

    alice = ReActAgent(
        "alice",
        "x",
        ScriptedModel(
            [[thinking("let me check"), tool_use("lookup", city="Oslo")], "It is sunny."]
        ),
        toolkit=toolkit,
        print_hint=False,
    )
    bob = make_agent("bob", [])
    async with MsgHub([alice, bob]):
        await alice("weather?")
    bob_mem = await bob.memory.get_memory()
    assert [(m.name, m.content) for m in bob_mem] == [
        ("alice", [{"type": "text", "text": "It is sunny."}])
    ]
    check_memory_invariant(bob_mem)
    check_memory_invariant(await alice.memory.get_memory())


async def test_add_delete_broadcast_and_auto_broadcast_toggle() -> None:
    alice = make_agent("alice", ["one", "two", "three"])
    bob = make_agent("bob", [])
    carol = make_agent("carol", [])
    async with MsgHub([alice, bob]) as hub:
        await alice()  # bob hears "one"
        hub.add(carol)
        hub.add(carol)  # no duplicate
        assert [p.name for p in hub.participants] == ["alice", "bob", "carol"]
        await alice()  # bob and carol hear "two"
        hub.delete(bob)
        hub.set_auto_broadcast(False)
        await alice()  # nobody hears "three"
        await hub.broadcast(Msg("host", "news", "user"))
    assert await said(bob) == [("alice", "one"), ("alice", "two")]
    assert await said(carol) == [("alice", "two"), ("host", "news")]
    assert await said(alice) == [
        ("alice", "one"),
        ("alice", "two"),
        ("alice", "three"),
        ("host", "news"),
    ]


async def test_hub_cannot_be_entered_twice_and_nested_hubs_work() -> None:
    alice = make_agent("alice", ["hello"])
    bob = make_agent("bob", [])
    carol = make_agent("carol", [])
    hub = MsgHub([alice, bob])
    async with hub, MsgHub([alice, carol]):
        with pytest.raises(RuntimeError, match="already open"):
            await hub.__aenter__()
        await alice()
    assert await said(bob) == [("alice", "hello")]
    assert await said(carol) == [("alice", "hello")]


async def test_user_agent_takes_part_in_a_hub() -> None:
    shown: list[str] = []
    human = UserAgent("ann", lambda prompt: "Let's talk about cats.", output_fn=shown.append)
    bot = make_agent("bot", ["Cats are great."])
    async with MsgHub([human, bot], announcement=Msg("host", "Welcome!", "user")):
        await human()  # inside a hub, participants already heard each other: no message
        await bot()
    assert shown == ["host: Welcome!", "bot: Cats are great."]
    assert await said(bot) == [
        ("host", "Welcome!"),
        ("ann", "Let's talk about cats."),
        ("bot", "Cats are great."),
    ]


async def test_observers_replying_concurrently_get_messages_after_their_reply() -> None:
    """A hub broadcast to a busy agent is deferred until its reply ends (memory stays valid)."""
    fast = make_agent("fast", ["fast answer"])
    slow = make_agent("slow", ["slow answer"], delay=0.3)
    async with MsgHub([fast, slow]):
        replies = await fanout_pipeline([slow, fast], "go")
    assert [r.get_text() for r in replies] == ["slow answer", "fast answer"]
    assert await said(slow) == [("user", "go"), ("slow", "slow answer"), ("fast", "fast answer")]
    check_memory_invariant(await slow.memory.get_memory())


def test_audible_copy() -> None:
    msg = Msg("a", [thinking("t"), tool_use("x", "c1")], "assistant")
    assert audible_copy(msg) is None
    assert audible_copy(Msg("a", "", "assistant")) is None
    copy = audible_copy(Msg("a", "hi", "assistant", {"k": 1}))
    assert copy is not None and copy.content == "hi" and copy.metadata == {"k": 1}


# -- pipelines ----------------------------------------------------------------------


async def test_sequential_pipeline_passes_each_reply_on() -> None:
    writer = make_agent("writer", ["draft"])
    editor = make_agent("editor", ["edited draft"])
    critic = make_agent("critic", ["looks good"])
    reply = await sequential_pipeline([writer, editor, critic], "write a poem")
    assert reply is not None and reply.get_text() == "looks good"
    assert await said(editor) == [("writer", "draft"), ("editor", "edited draft")]
    assert await said(critic) == [("editor", "edited draft"), ("critic", "looks good")]
    msg = Msg("u", "x", "user")
    assert await sequential_pipeline([], msg) is msg
    assert await sequential_pipeline([], None) is None


async def test_fanout_runs_concurrently_in_agent_order_with_own_copies() -> None:
    # Each model answers only once all three are asking: run one after the other, the first
    # would wait for ever (the fail_after below turns that into a failure).
    asking: list[str] = []
    everyone = anyio.Event()
    finished: list[str] = []

    def answering(i: int) -> FunctionModel:
        async def fn(messages: object, info: object) -> str:
            asking.append(f"a{i}")
            if len(asking) == 3:
                everyone.set()
            await everyone.wait()
            await anyio.sleep(0.01 * (2 - i))  # a2 answers first: order comes from the pipeline
            finished.append(f"a{i}")
            return f"answer {i}"

        return FunctionModel(fn)

    agents = [
        ReActAgent(f"a{i}", f"You are a{i}.", answering(i), print_hint=False) for i in range(3)
    ]
    task = Msg("user", "question", "user")
    with anyio.fail_after(10):
        replies = await fanout_pipeline(agents, task)
    assert [r.get_text() for r in replies] == ["answer 0", "answer 1", "answer 2"]
    assert sorted(asking) == ["a0", "a1", "a2"] and finished[0] == "a2"
    firsts = [(await a.memory.get_memory())[0] for a in agents]
    assert all(m == task for m in firsts)
    assert len({id(m) for m in [*firsts, task]}) == 4  # every agent got its own copy


async def test_fanout_failure_cancels_the_others_and_leaves_valid_memory() -> None:
    ok = make_agent("ok", ["never"], delay=5)
    bad = make_agent("bad", [ModelAPIError("provider down")])
    with pytest.raises(ExceptionGroup) as info:
        with anyio.fail_after(3):
            await fanout_pipeline([ok, bad], "go")
    assert info.group_contains(ModelAPIError)
    assert not ok.is_replying
    check_memory_invariant(await ok.memory.get_memory())


async def test_fanout_same_agent_twice_is_busy() -> None:
    agent = make_agent("a", ["x"], delay=0.2)
    with pytest.raises(ExceptionGroup) as info:
        await fanout_pipeline([agent, agent], "go")
    assert info.group_contains(AgentBusyError)


async def test_an_interrupted_reply_is_not_broadcast() -> None:
    alice = make_agent("alice", ["never finished"], delay=10)
    bob = make_agent("bob", [])
    async with MsgHub([alice, bob]), anyio.create_task_group() as tg:
        tg.start_soon(alice, "talk")
        with anyio.fail_after(5):
            while not alice.is_replying:
                await anyio.sleep(0.01)
        await alice.interrupt()
    assert await bob.memory.get_memory() == []

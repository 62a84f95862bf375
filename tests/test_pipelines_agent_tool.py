"""Agents as tools: live progress, delegation in a hub, interrupt and timeout propagation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentkit.agent import ReActAgent
from agentkit.agent._user import UserAgent
from agentkit.events import ReplyFinished, ToolProgress
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.pipelines import AgentTool, MsgHub, agent_as_tool
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import INTERRUPTED_TEXT, Toolkit


def agent(name: str, script: list[Any], toolkit: Toolkit | None = None, **kw: Any) -> ReActAgent:
    return ReActAgent(
        name, f"You are {name}.", ScriptedModel(script, **kw), toolkit, print_hint=False
    )


def with_tools(*tools: Any) -> Toolkit:
    toolkit = Toolkit()
    for tool in tools:
        toolkit.register_tool(tool)
    return toolkit


async def said(a: ReActAgent) -> list[tuple[str, str]]:
    return [(m.name, m.get_text()) for m in await a.memory.get_memory() if m.get_text()]


async def results(a: ReActAgent) -> list[dict[str, Any]]:
    return [b for m in await a.memory.get_memory() for b in m.get_blocks("tool_result")]


async def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


async def test_delegation_streams_inner_events_as_progress() -> None:
    inner_tools = Toolkit()

    @inner_tools.tool
    def search(query: str) -> str:
        """Search the web.

        Args:
            query: What to look for.
        """
        return f"3 hits for {query}"

    researcher = agent(
        "researcher",
        [[tool_use("search", "s1", query="otters")], "Otters hold hands while sleeping."],
        inner_tools,
        stream=True,
    )
    boss = agent(
        "boss",
        [[tool_use("researcher", "d1", task="Find an otter fact.")], "Fact delivered."],
        with_tools(agent_as_tool(researcher)),
    )
    progress: list[str] = []
    reply = None
    async with boss.stream("Tell me about otters.") as events:
        async for event in events:
            if isinstance(event, ToolProgress):
                assert event.tool_call_id == "d1"
                # Labels of the inner event survive the trip through the outer Toolkit.
                assert event.chunk.metadata is not None
                assert event.chunk.metadata["agent"] == "researcher"
                progress.append(event.chunk.get_text())
            elif isinstance(event, ReplyFinished):
                reply = event.reply
    assert reply is not None and reply.get_text() == "Fact delivered."
    streamed = "".join(progress)
    assert '[search({"query": "otters"})]' in streamed
    assert "[search done]" in streamed
    assert "Otters hold hands while sleeping." in streamed
    assert len(progress) > 3  # the inner answer arrived in several deltas
    [result] = await results(boss)
    assert result["output"] in (
        "Otters hold hands while sleeping.",
        [{"type": "text", "text": "Otters hold hands while sleeping."}],
    )
    assert not result.get("is_error")
    # The inner agent got the task from the boss and keeps its own conversation.
    inner_mem = await researcher.memory.get_memory()
    assert (inner_mem[0].name, inner_mem[0].role, inner_mem[0].get_text()) == (
        "boss",
        "user",
        "Find an otter fact.",
    )
    check_memory_invariant(inner_mem)
    check_memory_invariant(await boss.memory.get_memory())


async def test_three_agents_in_a_hub_with_a_delegate() -> None:
    """A debate among three agents; Carol delegates fact-checking to a researcher outside."""
    researcher = agent("researcher", ["Yes: Mars has two moons."])
    alice = agent("alice", ["Mars has two moons."])
    bob = agent("bob", ["I doubt it."])
    carol = agent(
        "carol",
        [[tool_use("fact_check", "fc1", task="How many moons has Mars?")], "Checked: two."],
        with_tools(researcher.as_tool(name="fact_check", description="Checks facts.")),
    )
    async with MsgHub([alice, bob, carol], announcement=Msg("host", "Mars moons?", "user")):
        await alice()
        await bob()
        await carol()
    debate = [
        ("host", "Mars moons?"),
        ("alice", "Mars has two moons."),
        ("bob", "I doubt it."),
        ("carol", "Checked: two."),
    ]
    assert await said(alice) == debate
    assert await said(bob) == debate
    # Carol's memory also holds her private tool call and its result, in between.
    assert await said(carol) == debate
    [result] = await results(carol)
    assert "two moons" in str(result["output"])
    assert not await results(alice) and not await results(bob)
    # The researcher saw only Carol's task, nothing of the debate.
    assert await said(researcher) == [
        ("carol", "How many moons has Mars?"),
        ("researcher", "Yes: Mars has two moons."),
    ]
    # Alice's and Bob's models were never shown a tool call.
    for a in (alice, bob):
        for request in a.model.requests:  # type: ignore[attr-defined]
            assert not any(m.has_blocks("tool_use") for m in request.messages)


async def test_interrupting_the_outer_agent_interrupts_the_inner_one() -> None:
    inner_tools = Toolkit()
    started = anyio.Event()

    @inner_tools.tool
    async def crunch(n: int) -> str:
        """Crunch numbers for a long time.

        Args:
            n: How many.
        """
        started.set()
        await anyio.sleep(30)
        return "crunched"

    inner = agent("cruncher", [[tool_use("crunch", "k1", n=3)], "later answer"], inner_tools)
    outer = agent(
        "boss",
        [[tool_use("cruncher", "d1", task="crunch 3")], "after the interrupt"],
        with_tools(agent_as_tool(inner)),
    )
    replies: list[Msg] = []

    async def run_outer() -> None:
        replies.append(await outer("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_outer)
        with anyio.fail_after(5):
            await started.wait()
        assert await outer.interrupt()
    assert replies[0].metadata is not None and replies[0].metadata["interrupted"] is True
    assert not inner.is_replying and not outer.is_replying
    # Both memories are valid; the inner tool call was answered as interrupted.
    inner_mem = await inner.memory.get_memory()
    check_memory_invariant(inner_mem)
    check_memory_invariant(await outer.memory.get_memory())
    [inner_result] = await results(inner)
    assert inner_result["id"] == "k1" and inner_result["output"] in (
        INTERRUPTED_TEXT,
        [{"type": "text", "text": INTERRUPTED_TEXT}],
    )
    [outer_result] = await results(outer)
    assert outer_result["id"] == "d1" and outer_result.get("is_error")
    # The inner agent is ready for its next task.
    reply = await inner("next task")
    assert reply.get_text() == "later answer"


async def test_tool_timeout_interrupts_the_inner_agent() -> None:
    inner = agent("slowpoke", ["too slow"], delay=30)
    outer = agent(
        "boss",
        [[tool_use("slowpoke", "d1", task="hurry")], "gave up"],
        with_tools(AgentTool(inner, timeout=0.3)),
    )
    with anyio.fail_after(10):
        reply = await outer("go")
    assert reply.get_text() == "gave up"
    [result] = await results(outer)
    assert result.get("is_error") and "timed out" in str(result["output"]).lower()
    assert not inner.is_replying
    check_memory_invariant(await inner.memory.get_memory())
    assert await said(inner) == [("boss", "hurry")]


async def test_parallel_calls_to_one_agent_tool_are_served_in_turn() -> None:
    inner = agent("helper", ["first answer", "second answer"], delay=0.1)
    outer = agent(
        "boss",
        [
            [tool_use("helper", "a", task="task A"), tool_use("helper", "b", task="task B")],
            "both done",
        ],
        with_tools(agent_as_tool(inner)),
    )
    assert (await outer("go")).get_text() == "both done"
    outputs = sorted(str(r["output"]) for r in await results(outer))
    assert [("first" in o) or ("second" in o) for o in outputs] == [True, True]
    texts = [t for _, t in await said(inner)]
    assert len(texts) == 4 and texts[1] == "first answer" and texts[3] == "second answer"
    check_memory_invariant(await inner.memory.get_memory())


async def test_inner_agent_waiting_for_approval_pauses_the_outer_run() -> None:
    inner_tools = Toolkit()

    @inner_tools.tool(requires_approval=True)
    def delete_everything() -> str:
        """Delete all files."""
        return "deleted"

    inner = agent("janitor", [[tool_use("delete_everything", "x1")]], inner_tools)
    outer = agent(
        "boss",
        [[tool_use("janitor", "d1", task="clean up")], "ok"],
        with_tools(agent_as_tool(inner)),
    )
    result = await outer.run("go")
    assert result.stop_reason == "pending_approval"
    assert [c.id for c in result.pending] == ["d1/x1"]
    assert await results(outer) == []  # the outer call waits: no result yet
    assert inner.pending_tool_calls[0]["id"] == "x1"


async def test_invoke_without_a_toolkit_replays_progress_then_the_answer() -> None:
    inner = agent("echo", ["hello world"], stream=True)
    tool = AgentTool(inner)
    chunks = [c async for c in tool.invoke({"task": "say hi"})]
    assert [c.is_last for c in chunks][-1] is True
    assert all(not c.is_last for c in chunks[:-1]) and len(chunks) > 1
    assert "".join(c.get_text() for c in chunks[:-1]) == "hello world"
    assert chunks[-1].get_text() == "hello world"
    assert chunks[-1].metadata is not None and chunks[-1].metadata["agent"] == "echo"
    assert (await inner.memory.get_memory())[0].name == "user"


async def test_a_human_as_a_tool() -> None:
    human = UserAgent("ann", lambda prompt: "blue", output_fn=lambda s: None)
    outer = agent(
        "bot",
        [[tool_use("ask_human", "h1", task="Favourite colour?")], "Ann likes blue."],
        with_tools(agent_as_tool(human, name="ask_human", description="Ask the human.")),
    )
    assert (await outer("what colour?")).get_text() == "Ann likes blue."
    [result] = await results(outer)
    assert "blue" in str(result["output"])


def test_names_descriptions_and_schema() -> None:
    inner = agent("Research Bot #1", [])
    tool = agent_as_tool(inner)
    assert tool.name == "Research_Bot_1"
    assert "Research Bot #1" in tool.description
    assert tool.parameters["required"] == ["task"]
    assert tool.tool_definition.name == "Research_Bot_1"
    named = inner.as_tool(name="rb", description="Finds things.")
    assert isinstance(named, AgentTool) and (named.name, named.description) == (
        "rb",
        "Finds things.",
    )
    assert agent_as_tool(agent("日本", [])).name == "agent"
    assert AgentTool(inner, requires_approval=True, group="team").requires_approval


@pytest.mark.parametrize("stream", [False, True])
async def test_inner_failure_becomes_an_error_result(stream: bool) -> None:
    from agentkit.exceptions import ModelAPIError

    inner = agent("flaky", [ModelAPIError("provider down")], stream=stream)
    outer = agent(
        "boss",
        [[tool_use("flaky", "d1", task="x")], "recovered"],
        with_tools(agent_as_tool(inner)),
    )
    assert (await outer("go")).get_text() == "recovered"
    [result] = await results(outer)
    assert result.get("is_error") and "provider down" in str(result["output"])
    check_memory_invariant(await inner.memory.get_memory())


async def test_an_agent_without_interrupt_is_cancelled_outright() -> None:
    """Any object with ``name`` and ``async __call__`` can be a tool; cancelling stops it."""

    class Plain:
        name = "plain"
        cancelled = False

        async def __call__(self, msg: Any = None) -> Msg:
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                Plain.cancelled = True
                raise
            return Msg(self.name, "never", "assistant")

    outer = agent(
        "boss",
        [[tool_use("plain", "p1", task="wait")], "moved on"],
        with_tools(AgentTool(Plain(), timeout=0.2)),
    )
    with anyio.fail_after(5):
        assert (await outer("go")).get_text() == "moved on"
    assert Plain.cancelled

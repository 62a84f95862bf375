"""Interrupt at every point of a reply; memory is repaired exactly; resume continues."""

from __future__ import annotations

import asyncio
import json
import random
import threading

import anyio
import pytest

from agentkit.events import Interrupted, ReplyFinished, TextDelta
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel, text, tool_use
from agentkit.tools import INTERRUPTED_TEXT
from tests._agent_helpers import Recorder, SignalModel, agent_for, checked_memory, results_of, shape
from tests._waiting import eventually


async def _interrupt_when(agent, event: anyio.Event, msg=None) -> Msg:
    """Start a reply, interrupt it once ``event`` is set; return the reply."""
    reply: list[Msg] = []

    async def run() -> None:
        reply.append(await agent("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(5):
            await event.wait()
        assert await agent.interrupt(msg) is True
    return reply[0]


async def test_interrupt_during_model_text_streaming_keeps_partial_text():
    inner = ScriptedModel(["Hello there, friend."], stream=True, chunk_delay=0.05)
    model = SignalModel(inner, lambda c: c.get_text() == "Hello")
    agent = agent_for(model)
    reply = await _interrupt_when(agent, model.event)
    assert reply.metadata["interrupted"] is True
    assert reply.get_text() == "Hello"
    memory = await checked_memory(agent)
    assert shape(memory) == [("user", ["text:go"]), ("assistant", ["text:Hello"])]
    assert memory[1].metadata == {"interrupted": True}


async def test_interrupt_during_tool_argument_streaming_drops_the_partial_call():
    inner = ScriptedModel(
        [[text("Let me add."), tool_use("add", "c1", a=1, b=2)]], stream=True, chunk_delay=0.05
    )
    model = SignalModel(inner, lambda c: any("raw_input" in b for b in c.content))
    rec = Recorder()
    agent = agent_for(model, rec)
    reply = await _interrupt_when(agent, model.event)
    assert reply.metadata["interrupted"] is True
    memory = await checked_memory(agent)
    assert shape(memory) == [("user", ["text:go"]), ("assistant", ["text:Let me add."])]
    assert rec.calls == {}


async def test_interrupt_with_one_finished_and_two_running_tools():
    rec = Recorder()
    calls = [
        tool_use("sleep", "fast", label="fast", seconds=0.0),
        tool_use("sleep", "slow1", label="slow1", seconds=10),
        tool_use("sleep", "slow2", label="slow2", seconds=10),
    ]
    agent = agent_for(ScriptedModel([calls]), rec)
    finished = anyio.Event()
    agent.register_hook("post_acting", "signal", lambda a, kw, out: finished.set())
    reply = await _interrupt_when(agent, finished)
    assert reply.metadata["interrupted"] is True
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:go"]),
        ("assistant", ["use:fast", "use:slow1", "use:slow2"]),
        ("user", ["result:fast", "result:slow1!", "result:slow2!"]),
    ]
    results = results_of(memory)
    assert results["fast"] == ("slept fast", False)
    assert results["slow1"] == (INTERRUPTED_TEXT, True)
    assert set(rec.order) == {"fast", "slow1", "slow2"}  # the sleeps were cancelled


async def test_interrupt_during_a_sync_tool_abandons_its_thread():
    release = threading.Event()
    entered = anyio.Event()
    token = anyio.lowlevel.current_token()
    agent = agent_for(ScriptedModel([[tool_use("block", "c1")]]))

    def block() -> str:
        """Blocks its thread until released."""
        anyio.from_thread.run_sync(entered.set, token=token)
        release.wait(5)
        return "released"

    agent.toolkit.register_tool_function(block)
    try:
        reply = await _interrupt_when(agent, entered)
        # the reply came back while the thread is still blocked: it was not waited for
        assert not release.is_set()
    finally:
        release.set()
    assert reply.metadata["interrupted"] is True
    assert results_of(await checked_memory(agent))["c1"] == (INTERRUPTED_TEXT, True)


async def test_interrupt_while_waiting_for_the_approval_policy():
    asked = anyio.Event()

    async def policy(call) -> bool:
        asked.set()
        await anyio.sleep_forever()
        return True

    rec = Recorder()
    calls = [tool_use("guarded", "g1", label="g1"), tool_use("add", "a1", a=1, b=1)]
    agent = agent_for(ScriptedModel([calls]), rec, approval_policy=policy)
    reply = await _interrupt_when(agent, asked)
    assert reply.metadata["interrupted"] is True
    assert "pending_tool_calls" not in reply.metadata
    memory = await checked_memory(agent)
    assert results_of(memory) == {"g1": (INTERRUPTED_TEXT, True), "a1": (INTERRUPTED_TEXT, True)}
    assert rec.calls == {}
    assert agent.pending_tool_calls == []


async def test_interrupt_when_idle_is_a_noop_even_with_pending_calls():
    agent = agent_for(ScriptedModel([[tool_use("guarded", "g1", label="x")]]))
    assert await agent.interrupt() is False
    reply = await agent("go")
    assert [c["id"] for c in reply.metadata["pending_tool_calls"]] == ["g1"]
    assert await agent.interrupt(Msg("user", "ignored", "user")) is False
    assert agent.interrupt_threadsafe() is False
    memory = await checked_memory(agent)
    assert shape(memory)[-1] == ("assistant", ["use:g1"])


async def test_interrupt_message_is_added_after_repairs_and_resume_sees_it():
    rec = Recorder()
    model = ScriptedModel(
        [[tool_use("sleep", "s1", label="s1", seconds=10)], "Understood, stopping."]
    )
    agent = agent_for(model, rec)
    started = anyio.Event()
    agent.register_hook("pre_acting", "signal", lambda a, kw: started.set())
    note = Msg("user", "Stop, do something else.", "user")
    await _interrupt_when(agent, started, note)
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:go"]),
        ("assistant", ["use:s1"]),
        ("user", ["result:s1!"]),
        ("user", ["text:Stop, do something else."]),
    ]
    reply = await agent()  # resume from memory
    assert reply.get_text() == "Understood, stopping."
    assert model.requests[-1].messages[-1].get_text() == "Stop, do something else."
    assert rec.calls == {"s1": 1}


class _StartSignal(Recorder):
    """A Recorder that also sets an event when a tool starts running."""

    def __init__(self) -> None:
        super().__init__()
        self.event = anyio.Event()

    def start(self, label: str) -> None:
        super().start(label)
        self.event.set()


def _sleeping_agent():
    """An agent whose reply calls a 10 s tool, and an event set when the tool starts."""
    rec = _StartSignal()
    agent = agent_for(ScriptedModel([[tool_use("sleep", "s", label="s", seconds=10)]]), rec)
    return agent, rec.event


async def test_interrupt_latency_with_a_long_tool_is_milliseconds():
    # The latency itself is measured in benchmarks/scenarios/interrupts.py; here: the reply
    # returns on the interrupt, while the 10 s tool is still sleeping, never after it.
    agent, started = _sleeping_agent()
    events: list[str] = []

    async def run() -> None:
        reply = await agent("go")
        events.append("returned")
        assert reply.metadata is not None and reply.metadata["interrupted"]

    with anyio.fail_after(5):  # a hang guard, not a measurement
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()  # the tool is running
            events.append("interrupt")
            await agent.interrupt()
    assert events == ["interrupt", "returned"]
    assert results_of(await checked_memory(agent))["s"][1] is True  # answered as interrupted


async def test_interrupt_from_a_task_formats_no_task_repr(monkeypatch):
    """anyio's ``CancelScope.cancel()`` formats the calling task's repr into its message,
    about 0.1 ms (half of an interrupt's latency while a tool runs); ``interrupt()`` cancels
    from a loop callback instead, where there is no calling task."""
    import asyncio.base_tasks as base_tasks

    formatted: list[object] = []
    original = base_tasks._task_repr_info

    def counting(task: object) -> object:
        formatted.append(task)
        return original(task)

    agent, started = _sleeping_agent()
    replies: list[Msg] = []

    async def run() -> None:
        replies.append(await agent("go"))

    with anyio.fail_after(5):  # a hang guard, not a measurement
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            monkeypatch.setattr(base_tasks, "_task_repr_info", counting)
            assert await agent.interrupt() is True
    monkeypatch.setattr(base_tasks, "_task_repr_info", original)
    assert formatted == []
    assert replies[0].metadata is not None and replies[0].metadata["interrupted"] is True
    assert results_of(await checked_memory(agent))["s"] == (INTERRUPTED_TEXT, True)


async def test_interrupt_threadsafe_from_another_thread():
    agent, started = _sleeping_agent()
    results: list[bool] = []

    async def run() -> Msg:
        return await agent("go")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        thread = threading.Thread(target=lambda: results.append(agent.interrupt_threadsafe()))
        thread.start()
        await anyio.to_thread.run_sync(thread.join, 10)
        assert not thread.is_alive()
    assert results == [True]
    assert results_of(await checked_memory(agent))["s"][1] is True


async def test_outer_cancellation_propagates_after_repairing_memory():
    agent = agent_for(ScriptedModel([[tool_use("sleep", "s", label="s", seconds=10)]]))
    started = anyio.Event()
    agent.register_hook("pre_acting", "signal", lambda a, kw: started.set())
    outcome = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            with anyio.CancelScope() as scope:
                tg.start_soon(lambda: _cancel_after(started, scope))
                await agent("go")
                outcome.append("returned")  # must not happen
            outcome.append(scope.cancelled_caught)

        tg.start_soon(run)
    assert outcome == [True]
    assert not agent.is_replying
    assert results_of(await checked_memory(agent))["s"] == (
        "Tool call cancelled before it finished.",
        True,
    )


async def _cancel_after(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def test_stream_consumer_break_interrupts_the_reply():
    rec = Recorder()
    model = ScriptedModel(
        [[text("Working."), tool_use("sleep", "s", label="s", seconds=10)]], stream=True
    )
    agent = agent_for(model, rec)
    seen = []
    async with agent.stream("go") as events:
        async for event in events:
            seen.append(event.type)
            if event.type == "tool_call_started":
                break
    assert events.reply is not None and events.reply.metadata["interrupted"] is True
    assert not agent.is_replying
    assert results_of(await checked_memory(agent))["s"] == (INTERRUPTED_TEXT, True)
    assert seen[0] == "reply_started" and "text_delta" in seen


async def test_stream_aclose_interrupts_the_reply():
    agent = agent_for(ScriptedModel([[tool_use("sleep", "s", label="s", seconds=10)]]))
    events = agent.stream("go")
    async for event in events:
        if event.type == "tool_call_started":
            break
    await events.aclose()
    assert not agent.is_replying
    assert results_of(await checked_memory(agent))["s"][1] is True


async def test_interrupted_reply_emits_interrupted_then_finished():
    model = ScriptedModel(["Hello there."], stream=True, chunk_delay=0.05)
    agent = agent_for(model)
    seen = []
    async with agent.stream("go") as events:
        async for event in events:
            seen.append(event)
            if isinstance(event, TextDelta):
                await agent.interrupt()
    assert isinstance(seen[-2], Interrupted) and isinstance(seen[-1], ReplyFinished)
    assert seen[-1].reply.metadata["interrupted"] is True


@pytest.mark.timeout(180)  # 300 full runs: ~20 s alone, slower on a loaded CI machine
async def test_fuzz_interrupt_at_random_points_then_resume():
    """300 runs: interrupt at a random delay, resume to completion, check everything."""
    rng = random.Random(1234)
    baseline = set(asyncio.all_tasks())
    outcomes = {"interrupted": 0, "completed": 0}
    for run in range(300):
        rec = Recorder()
        first = [text("step one")] + [
            tool_use("sleep", f"a{i}", label=f"a{i}", seconds=rng.choice([0, 0.001, 0.003]))
            for i in range(3)
        ]
        second = [
            tool_use("barrier", "b", label="b", seconds=0.002),
            tool_use("add", "c", a=run, b=1),
        ]
        script = [first, second, "final answer", "final answer"]
        model = ScriptedModel(script, stream=rng.random() < 0.5, chunk_delay=0.0005)
        agent = agent_for(model, rec)
        result: list[Msg] = []

        async def go(agent=agent, result=result) -> None:
            result.append(await agent("start"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.sleep(rng.uniform(0, 0.012))
            await agent.interrupt()
        reply = result[0]
        memory = await checked_memory(agent)
        state = json.loads(json.dumps(agent.state_dict()))
        restored = agent_for(model, rec)
        restored.load_state_dict(state)
        assert await restored.memory.get_memory() == memory
        assert restored.state_dict() == state
        if reply.metadata.get("interrupted"):
            outcomes["interrupted"] += 1
            reply = await restored()  # resume from memory
        else:
            outcomes["completed"] += 1
        assert reply.get_text() == "final answer"
        assert "interrupted" not in reply.metadata
        await checked_memory(restored)
        assert all(count == 1 for count in rec.calls.values()), rec.calls
        assert set(asyncio.all_tasks()) == baseline
    assert outcomes["interrupted"] > 100  # the delays really cut runs at many points


async def test_interrupt_threadsafe_on_the_loop_thread_does_not_deadlock():
    agent = agent_for(ScriptedModel([[tool_use("sleep", "s", label="s", seconds=10)]]))
    started = anyio.Event()
    agent.register_hook("pre_acting", "signal", lambda a, kw: started.set())
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "go")
        await started.wait()
        with anyio.fail_after(2):
            assert agent.interrupt_threadsafe() is True
    assert results_of(await checked_memory(agent))["s"][1] is True


async def test_interrupt_between_streamed_calls_answers_the_complete_one_only():
    rec = Recorder()
    inner = ScriptedModel(
        [[tool_use("add", "c1", a=1, b=2), tool_use("add", "c2", a=3, b=4)]],
        stream=True,
        chunk_delay=0.05,
    )
    model = SignalModel(inner, lambda c: len(c.content) == 2 and "raw_input" in c.content[1])
    agent = agent_for(model, rec)
    reply = await _interrupt_when(agent, model.event)
    assert reply.metadata["interrupted"] is True
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:go"]),
        ("assistant", ["use:c1"]),
        ("user", ["result:c1!"]),
    ]
    assert memory[1].metadata == {"interrupted": True}
    assert results_of(memory)["c1"] == (INTERRUPTED_TEXT, True)
    assert rec.calls == {}  # a call that was never started is not run by the repair


async def test_abandoned_plain_iterator_interrupts_the_reply():
    agent = agent_for(ScriptedModel([[tool_use("sleep", "s", label="s", seconds=10)]]))

    async def consume_until_tool_starts() -> None:
        async for event in agent.stream("go"):
            if event.type == "tool_call_started":
                break  # no aclose: the iterator is dropped when this function returns

    await consume_until_tool_starts()
    # The tool sleeps 10 s: only the interrupt ends the reply sooner.
    await eventually(lambda: not agent.is_replying, "the reply to end", timeout=8)
    assert results_of(await checked_memory(agent))["s"] == (INTERRUPTED_TEXT, True)


async def test_a_listener_may_interrupt_on_reply_started():
    """``ReplyStarted`` is emitted inside the reply's cancel scope: a synchronous listener
    that interrupts on it stops the reply at its first checkpoint (it used to be a no-op:
    the event came before the scope existed)."""
    from agentkit.events import ReplyStarted

    model = ScriptedModel(["never asked"], stream=True, chunk_delay=0.01)
    agent = agent_for(model)
    outcomes: list[bool] = []

    def stop_at_start(event: object) -> None:
        if isinstance(event, ReplyStarted):
            outcomes.append(agent.interrupt_threadsafe())

    agent.add_event_listener(stop_at_start)
    reply = await agent("go")
    assert outcomes == [True]
    assert reply.metadata["interrupted"] is True
    memory = await checked_memory(agent)
    assert memory[0].role == "user"
    # Cut at the first checkpoint: the scripted stream's first chunk at most, never the rest.
    assert "never asked" not in json.dumps([m.content for m in memory])

"""The reply loop: multi-turn tool use, parallel acting, barriers, max_iters, usage."""

from __future__ import annotations

import json

import anyio
import pytest

from agentkit.agent import ReActAgent
from agentkit.exceptions import AgentBusyError, ModelAPIError
from agentkit.messages import Msg
from agentkit.models._base import ChatResponse, ChatUsage
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, agent_for, checked_memory, results_of, shape


async def test_multi_turn_tool_use_stores_exact_conversation():
    model = ScriptedModel(
        [
            [text("Adding."), tool_use("add", "c1", a=1, b=2)],
            [tool_use("add", "c2", a=3, b=4)],
            "The sums are 3 and 7.",
        ]
    )
    agent = agent_for(model)
    reply = await agent("add things")
    assert reply.get_text() == "The sums are 3 and 7."
    assert reply.role == "assistant" and reply.name == "bot"
    assert reply.metadata["iterations"] == 3
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:add things"]),
        ("assistant", ["text:Adding.", "use:c1"]),
        ("user", ["result:c1"]),
        ("assistant", ["use:c2"]),
        ("user", ["result:c2"]),
        ("assistant", ["text:The sums are 3 and 7."]),
    ]
    assert results_of(memory) == {"c1": ("3", False), "c2": ("7", False)}
    # The model saw the system prompt first and the tool schemas every time.
    first = model.requests[0]
    assert first.messages[0].role == "system"
    assert first.messages[0].content == "You are a test bot."
    assert "add" in first.tool_names
    assert [m.role for m in model.requests[2].messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


async def test_parallel_out_of_order_completion_keeps_call_order():
    rec = Recorder()
    calls = [tool_use("sleep", f"c{i}", label=f"t{i}", seconds=0.05 * (3 - i)) for i in range(3)]
    agent = agent_for(ScriptedModel([calls, "done"]), rec)
    await agent("go")
    assert rec.order == ["t2", "t1", "t0"]  # finished in reverse
    memory = await checked_memory(agent)
    results_msg = memory[2]
    assert results_msg.role == "user" and results_msg.name == "bot"
    assert [b["id"] for b in results_msg.get_blocks("tool_result")] == ["c0", "c1", "c2"]
    assert rec.max_in_flight == 3


async def test_failing_tool_does_not_cancel_siblings():
    rec = Recorder()
    calls = [
        tool_use("sleep", "a", label="a", seconds=0.05),
        tool_use("fail", "b", label="b"),
        tool_use("sleep", "c", label="c", seconds=0.05),
    ]
    agent = agent_for(ScriptedModel([calls, "ok"]), rec)
    await agent("go")
    results = results_of(await checked_memory(agent))
    assert results["a"] == ("slept a", False)
    assert results["c"] == ("slept c", False)
    assert results["b"][1] is True and "boom b" in results["b"][0]
    assert rec.calls == {"a": 1, "b": 1, "c": 1}


async def test_sequential_barrier_splits_parallel_segments():
    rec = Recorder()
    calls = [
        tool_use("sleep", "1", label="s1", seconds=0.05),
        tool_use("sleep", "2", label="s2", seconds=0.03),
        tool_use("barrier", "3", label="b", seconds=0.02),
        tool_use("sleep", "4", label="s4", seconds=0.01),
        tool_use("sleep", "5", label="s5", seconds=0.01),
    ]
    agent = agent_for(ScriptedModel([calls, "ok"]), rec)
    await agent("go")
    assert rec.started["b"] >= max(rec.ended["s1"], rec.ended["s2"])
    assert min(rec.started["s4"], rec.started["s5"]) >= rec.ended["b"]
    assert rec.started["s2"] < rec.ended["s1"]  # the first segment ran in parallel
    memory = await checked_memory(agent)
    assert [b["id"] for b in memory[2].get_blocks("tool_result")] == ["1", "2", "3", "4", "5"]


async def test_parallel_tool_calls_false_runs_one_at_a_time():
    rec = Recorder()
    calls = [tool_use("sleep", f"c{i}", label=f"t{i}", seconds=0.01) for i in range(4)]
    model = ScriptedModel([calls, "ok"])
    agent = agent_for(model, rec, parallel_tool_calls=False)
    await agent("go")
    assert rec.max_in_flight == 1
    assert rec.order == ["t0", "t1", "t2", "t3"]
    # The provider is asked for one call per turn as well.
    assert [r.settings for r in model.requests] == [{"parallel_tool_calls": False}] * 2


async def test_max_concurrency_bounds_calls_in_flight():
    rec = Recorder()
    calls = [tool_use("sleep", f"c{i}", label=f"t{i}", seconds=0.02) for i in range(6)]
    agent = agent_for(ScriptedModel([calls, "ok"]), rec, max_concurrency=2)
    assert agent.max_concurrency == 2
    await agent("go")
    assert rec.max_in_flight == 2
    assert sum(rec.calls.values()) == 6
    await checked_memory(agent)


async def test_eight_tools_of_200ms_run_concurrently():
    rec = Recorder()
    calls = [tool_use("sleep", f"c{i}", label=f"t{i}", seconds=0.2) for i in range(8)]
    agent = agent_for(ScriptedModel([calls, "ok"]), rec)
    await agent("go")
    # Ordering, not wall time (the ratio to a raw loop is in benchmarks/scenarios/parallel.py):
    # every call started before any of them ended.
    assert max(rec.started.values()) < min(rec.ended.values())
    assert rec.max_in_flight == 8
    await checked_memory(agent)


async def test_max_iters_asks_for_a_summary_without_tools():
    model = ScriptedModel(
        [
            [tool_use("add", "c1", a=1, b=1)],
            [tool_use("add", "c2", a=2, b=2)],
            # The summary call: a stray tool call must be dropped, never stored unanswered.
            [text("Summary: 2 and 4."), tool_use("add", "c3", a=9, b=9)],
        ]
    )
    agent = agent_for(model, max_iters=2)
    reply = await agent("loop")
    assert reply.get_text() == "Summary: 2 and 4."
    assert reply.metadata["max_iters_reached"] is True
    last = model.requests[-1]
    assert last.settings.get("tool_choice") == "none"
    assert "maximum number of steps" in last.messages[-1].get_text()
    memory = await checked_memory(agent)
    assert shape(memory)[-1] == ("assistant", ["text:Summary: 2 and 4."])
    assert all("maximum number of steps" not in m.get_text() for m in memory)


async def test_usage_accumulates_over_the_reply():
    model = ScriptedModel(
        [
            ChatResponse([tool_use("add", "c1", a=1, b=2)], usage=ChatUsage(10, 5)),
            ChatResponse([text("3")], usage=ChatUsage(20, 1)),
        ]
    )
    reply = await agent_for(model)("add")
    usage = reply.metadata["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (30, 6)
    assert reply.metadata["time"] > 0
    json.dumps(reply.to_dict())


async def test_malformed_json_arguments_are_answered_not_run():
    rec = Recorder()
    bad = {"type": "tool_use", "id": "bad", "name": "add", "input": {}, "raw_input": '{"a": 1,'}
    model = ScriptedModel([[bad, tool_use("add", "ok", a=1, b=1)], "fixed"])
    agent = agent_for(model, rec)
    await agent("go")
    results = results_of(await checked_memory(agent))
    assert results["bad"][1] is True and "not a valid JSON object" in results["bad"][0]
    assert results["ok"] == ("2", False)
    assert rec.calls == {"add1+1": 1}


async def test_input_forms_and_observe():
    model = ScriptedModel(["one", "two", "three"])
    agent = agent_for(model)
    await agent(Msg("alice", "hi", "user"))
    await agent([Msg("alice", "a", "user"), Msg("bob", "b", "user")])
    await agent.observe(Msg("carol", "fyi", "user"))
    await agent()  # continue from memory
    memory = await checked_memory(agent)
    assert [(m.name, m.get_text()) for m in memory] == [
        ("alice", "hi"),
        ("bot", "one"),
        ("alice", "a"),
        ("bob", "b"),
        ("bot", "two"),
        ("carol", "fyi"),
        ("bot", "three"),
    ]
    with pytest.raises(TypeError):
        await agent([42])  # type: ignore[list-item]


async def test_second_concurrent_reply_raises_busy():
    agent = agent_for(ScriptedModel(["slow answer"], delay=0.2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "first")
        await anyio.sleep(0.02)
        assert agent.is_replying
        with pytest.raises(AgentBusyError):
            await agent("second")
    assert not agent.is_replying
    await checked_memory(agent)


async def test_model_error_propagates_with_memory_repaired():
    rec = Recorder()
    model = ScriptedModel(
        [[tool_use("add", "c1", a=1, b=1)], ModelAPIError("server exploded", status_code=500)]
    )
    agent = agent_for(model, rec)
    with pytest.raises(ModelAPIError):
        await agent("go")
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:go"]),
        ("assistant", ["use:c1"]),
        ("user", ["result:c1"]),
    ]
    assert not agent.is_replying


async def test_error_in_a_hook_answers_open_calls_and_propagates():
    def broken(agent, kwargs, output):
        raise RuntimeError("post_reasoning bug")

    model = ScriptedModel([[tool_use("add", "c1", a=1, b=1)]])
    agent = agent_for(model)
    agent.register_hook("post_reasoning", "broken", broken)
    with pytest.raises(RuntimeError, match="post_reasoning bug"):
        await agent("go")
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:go"]),
        ("assistant", ["use:c1"]),
        ("user", ["result:c1!"]),
    ]
    assert memory[1].metadata == {"interrupted": True}
    assert results_of(memory)["c1"][0] == (
        "Tool call cancelled before it finished because the reply failed (RuntimeError)."
    )


async def test_unknown_tool_and_no_toolkit():
    agent = ReActAgent(
        "bot", "sys", ScriptedModel([[tool_use("nope", "c1")], "ok"]), print_hint=False
    )
    await agent("go")
    results = results_of(await checked_memory(agent))
    assert results["c1"][1] is True
    unknown = agent_for(ScriptedModel([[tool_use("nope", "c2")], "ok"]))
    await unknown("go")
    assert "nope" in results_of(await checked_memory(unknown))["c2"][0]


async def test_print_hint_writes_the_reply(capsys):
    model = ScriptedModel([[text("Let me add."), tool_use("add", "c1", a=1, b=2)], "It is 3."])
    agent = agent_for(model, print_hint=True)
    await agent("add")
    out = capsys.readouterr().out
    assert "bot: Let me add." in out
    assert "-> add(" in out and "<- add [ok]: 3" in out
    assert "bot: It is 3." in out


def test_construction_is_cheap():
    # What makes construction cheap, checked structurally; its time is measured in
    # benchmarks/scenarios/startup.py ("ReActAgent(...) time"), not asserted here.
    import sys

    model = ScriptedModel([])
    before = set(sys.modules)
    agents = [ReActAgent("bot", "sys", model) for _ in range(100)]
    assert set(sys.modules) == before  # nothing imported lazily on construction
    assert model.calls == 0 and all(not a.is_replying for a in agents)
    assert all(a.conversation.pending == [] and a.conversation.deferred == [] for a in agents)
    assert not hasattr(agents[0], "__dict__")  # __slots__: no per-instance dict


async def test_call_ids_reused_across_turns_stay_valid():
    model = ScriptedModel(
        [[tool_use("add", "call_0", a=1, b=1)], [tool_use("add", "call_0", a=2, b=2)], "done"]
    )
    agent = agent_for(model)
    await agent("go")
    memory = await checked_memory(agent)
    outputs = [b["output"] for m in memory for b in m.get_blocks("tool_result")]
    assert outputs == ["2", "4"]
    other = agent_for(ScriptedModel([]))
    other.load_state_dict(json.loads(json.dumps(agent.state_dict())))

"""``UsageLimits``: each limit tripped by a scripted model; the result and memory checked."""

from __future__ import annotations

import dataclasses

import pytest

from agentkit import ReActAgent, UsageError, UsageLimitExceeded, UsageLimits
from agentkit.memory import check_memory_invariant
from agentkit.messages import ContentBlock
from agentkit.models._base import ChatResponse, ChatUsage
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, agent_for, results_of

LIMIT_TEXT = "Tool call not run: the run reached its usage limit ({})."


@dataclasses.dataclass
class PricedUsage(ChatUsage):
    """A usage that reports a cost, as adapters with a price table do."""

    cost: float = 0.0


def turn(
    *blocks: ContentBlock, inp: int = 10, out: int = 10, cost: float | None = None
) -> ChatResponse:
    usage = ChatUsage(inp, out) if cost is None else PricedUsage(inp, out, cost=cost)
    return ChatResponse(content=list(blocks), usage=usage)


def adds(n: int, start: int = 0) -> list[ContentBlock]:
    return [tool_use("add", f"c{start + i}", a=i, b=1) for i in range(n)]


async def _memory_ok(agent: ReActAgent) -> list:
    messages = await agent.memory.get_memory()
    check_memory_invariant(messages, [c["id"] for c in agent.pending_tool_calls])
    return messages


async def test_max_requests_stops_before_the_next_request() -> None:
    model = ScriptedModel([turn(text("one"), *adds(1)), turn(*adds(1, 1)), "never"])
    agent = agent_for(model, usage_limits=UsageLimits(max_requests=2))
    result = await agent.run("go")
    assert result.stop_reason == "usage_limit" and result.usage_limit == "max_requests"
    assert model.calls == 2 and result.usage.requests == 2
    assert result.usage.tool_calls == 2
    assert (
        result.reply.metadata is not None and result.reply.metadata["usage_limit"] == "max_requests"
    )
    memory = await _memory_ok(agent)
    assert memory[-1].role == "user" and memory[-1].get_blocks("tool_result")  # all answered
    # The agent's limits stay; the next run starts its own count.
    model.responses.append("again")
    assert (await agent.run("more", usage_limits=UsageLimits(max_requests=5))).output == "never"


@pytest.mark.parametrize(
    ("limits", "name"),
    [
        (UsageLimits(max_input_tokens=150), "max_input_tokens"),
        (UsageLimits(max_output_tokens=15), "max_output_tokens"),
        (UsageLimits(max_total_tokens=160), "max_total_tokens"),
    ],
)
async def test_token_limits_refuse_the_calls_of_the_turn_that_passed_them(
    limits: UsageLimits, name: str
) -> None:
    rec = Recorder()
    model = ScriptedModel(
        [turn(*adds(1), inp=100, out=10), turn(text("more"), *adds(2, 1), inp=100, out=10), "no"]
    )
    agent = agent_for(model, rec, usage_limits=limits)
    result = await agent.run("go")
    assert result.stop_reason == "usage_limit" and result.usage_limit == name
    assert model.calls == 2
    assert rec.calls == {"add0+1": 1}  # the second turn's calls never ran
    results = results_of(result.new_messages)
    assert results["c1"] == (LIMIT_TEXT.format(name), True)
    assert results["c2"] == (LIMIT_TEXT.format(name), True)
    assert result.output == "more"
    assert result.usage.input_tokens == 200 and result.usage.output_tokens == 20
    await _memory_ok(agent)


async def test_max_tool_calls_is_projected_before_the_calls_run() -> None:
    rec = Recorder()
    model = ScriptedModel([turn(*adds(2)), turn(*adds(2, 2)), "no"])
    agent = agent_for(model, rec)
    result = await agent.run("go", usage_limits=UsageLimits(max_tool_calls=3))
    assert result.usage_limit == "max_tool_calls"
    assert result.usage.tool_calls == 2  # the two of the second turn would make 4 > 3
    assert sorted(rec.calls) == ["add0+1", "add1+1"]
    results = results_of(result.new_messages)
    assert results["c2"][1] and results["c3"][1]
    await _memory_ok(agent)


async def test_max_cost_uses_reported_costs() -> None:
    model = ScriptedModel([turn(*adds(1), cost=0.02), turn(*adds(1, 1), cost=0.02), "no"])
    agent = agent_for(model, usage_limits=UsageLimits(max_cost=0.03))
    result = await agent.run("go")
    assert result.usage_limit == "max_cost"
    assert result.usage.cost == pytest.approx(0.04)
    assert results_of(result.new_messages)["c1"] == (LIMIT_TEXT.format("max_cost"), True)
    await _memory_ok(agent)


async def test_max_cost_is_not_enforced_on_unknown_cost() -> None:
    model = ScriptedModel([turn(*adds(1), cost=0.02), turn(*adds(1, 1)), "done"])
    agent = agent_for(model, usage_limits=UsageLimits(max_cost=0.01))
    result = await agent.run("go")
    # The first answer already cost more than the bound: its calls are refused.
    assert result.usage_limit == "max_cost" and model.calls == 1
    model2 = ScriptedModel([turn(*adds(1)), turn(*adds(1, 1), cost=1.0), "done"])
    result2 = await agent_for(model2, usage_limits=UsageLimits(max_cost=0.01)).run("go")
    assert result2.stop_reason == "final" and result2.usage.cost is None  # unknown: no sum


async def test_a_final_answer_is_never_thrown_away() -> None:
    model = ScriptedModel([turn(text("The answer."), inp=1000, out=1000)])
    result = await agent_for(model, usage_limits=UsageLimits(max_total_tokens=10)).run("go")
    assert result.stop_reason == "final" and result.output == "The answer."


async def test_raise_on_limit_raises_after_repairing_memory() -> None:
    model = ScriptedModel([turn(*adds(2)), "no"])
    agent = agent_for(model, usage_limits=UsageLimits(max_tool_calls=1, raise_on_limit=True))
    with pytest.raises(UsageLimitExceeded, match="max_tool_calls=1") as info:
        await agent.run("go")
    assert info.value.limit == "max_tool_calls"
    assert info.value.result is not None
    assert info.value.result.stop_reason == "usage_limit"
    await _memory_ok(agent)
    assert not agent.is_replying
    # await agent(...) raises too (no RunResult there), and the metadata says why otherwise.
    agent2 = agent_for(ScriptedModel([turn(*adds(1))]), usage_limits=UsageLimits(max_requests=0))
    reply = await agent2("go")
    assert reply.metadata is not None and reply.metadata["usage_limit"] == "max_requests"
    agent2.usage_limits = UsageLimits(max_requests=0, raise_on_limit=True)
    with pytest.raises(UsageLimitExceeded) as info2:
        await agent2("go")
    assert info2.value.result is None


async def test_limits_apply_to_resumed_approvals() -> None:
    rec = Recorder()
    model = ScriptedModel(
        [[tool_use("guarded", "g1", label="a"), tool_use("guarded", "g2", label="b")]]
    )
    agent = agent_for(model, rec)
    await agent.run("go")
    result = await agent.run(
        approvals={"g1": True, "g2": True}, usage_limits=UsageLimits(max_tool_calls=1)
    )
    assert result.usage_limit == "max_tool_calls" and rec.calls == {}
    assert result.pending == []
    await _memory_ok(agent)


def test_limits_are_validated() -> None:
    with pytest.raises(UsageError, match="max_requests"):
        UsageLimits(max_requests=-1)


async def test_a_valid_structured_answer_past_a_token_limit_is_kept() -> None:
    """The structured answer is a tool call: a token limit must not refuse it (it is final)."""
    from pydantic import BaseModel

    from agentkit.agent._structured import RESPONSE_TOOL

    class Answer(BaseModel):
        x: int

    rec = Recorder()
    model = ScriptedModel(
        [turn(tool_use(RESPONSE_TOOL, "r1", x=3), *adds(1), inp=1000, out=1000), "never"]
    )
    agent = agent_for(model, rec, usage_limits=UsageLimits(max_total_tokens=10))
    result = await agent.run("go", output_type=Answer)
    assert result.output == Answer(x=3) and model.calls == 1
    assert result.stop_reason == "final" and result.usage_limit is None
    assert rec.calls == {}  # the other call of the turn is answered, not run
    results = results_of(result.new_messages)
    assert results["c0"] == (LIMIT_TEXT.format("max_total_tokens"), True)
    assert not results["r1"][1]
    await _memory_ok(agent)
    # The same when the limit is the tool calls the turn would run.
    rec2 = Recorder()
    model3 = ScriptedModel([[tool_use(RESPONSE_TOOL, "r1", x=4), *adds(1)], "never"])
    agent3 = agent_for(model3, rec2, usage_limits=UsageLimits(max_tool_calls=0))
    result3 = await agent3.run("go", output_type=Answer)
    assert result3.stop_reason == "final" and result3.output == Answer(x=4)
    assert rec2.calls == {} and model3.calls == 1
    await _memory_ok(agent3)
    # An invalid structured answer is not an answer: the limit stops the run.
    model2 = ScriptedModel([turn(tool_use(RESPONSE_TOOL, "r1", x="no"), inp=1000, out=1000)])
    agent2 = agent_for(model2, usage_limits=UsageLimits(max_total_tokens=10))
    result2 = await agent2.run("go", output_type=Answer)
    assert result2.stop_reason == "usage_limit" and result2.usage_limit == "max_total_tokens"
    await _memory_ok(agent2)


async def test_a_run_paused_for_approval_resumes_under_its_own_limits() -> None:
    """The limits given to ``run()`` bound the task, not only its part before a pause."""
    rec = Recorder()
    model = ScriptedModel(
        [[tool_use("guarded", "g1", label="a"), tool_use("guarded", "g2", label="b")], "no"]
    )
    agent = agent_for(model, rec)
    paused = await agent.run("go", usage_limits=UsageLimits(max_tool_calls=1))
    assert paused.stop_reason == "pending_approval"
    result = await agent.run(approvals={"g1": True, "g2": True})
    assert result.usage_limit == "max_tool_calls" and rec.calls == {}
    await _memory_ok(agent)
    # ``resume()`` keeps them too; new limits given to a resume replace them.
    model2 = ScriptedModel([[tool_use("guarded", "g3", label="c")], "never"])
    agent2 = agent_for(model2, rec)
    await agent2.run("again", usage_limits=UsageLimits(max_tool_calls=0))
    reply = await agent2.resume({"g3": True})
    assert rec.calls == {} and model2.calls == 1
    assert reply.metadata is not None and reply.metadata["usage_limit"] == "max_tool_calls"
    model3 = ScriptedModel([[tool_use("guarded", "g4", label="d")], "fine"])
    agent3 = agent_for(model3, rec)
    await agent3.run("more", usage_limits=UsageLimits(max_tool_calls=0))
    final = await agent3.run(approvals={"g4": True}, usage_limits=UsageLimits(max_tool_calls=5))
    assert final.stop_reason == "final" and final.output == "fine" and rec.calls == {"d": 1}
    await _memory_ok(agent3)

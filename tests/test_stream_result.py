"""``agent.stream(...)`` gives the run's typed ``RunResult`` once the reply has ended.

Real ``ScriptedModel`` runs through the whole loop: a final answer, a structured one, an
interrupted stream, one paused for approval, deps and usage limits passed through.
"""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from agentkit import RunResult, ToolContext, Toolkit, UsageError, UsageLimits
from agentkit.agent import ReActAgent
from agentkit.events import ReplyFinished
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, agent_for, checked_memory, results_of


class City(BaseModel):
    name: str
    country: str


@dataclasses.dataclass
class Deps:
    user: str


async def test_stream_result_after_the_events_is_the_run_result() -> None:
    model = ScriptedModel([[text("Adding."), tool_use("add", "c1", a=1, b=2)], "The sum is 3."])
    agent = agent_for(model)
    async with agent.stream("what is 1+2?") as events:
        with pytest.raises(UsageError, match="not ready"):
            _ = events.result
        kinds = [event.type async for event in events]
        result = events.result  # ready as soon as the events ended, inside the block
    assert isinstance(result, RunResult)
    assert result.output == "The sum is 3."
    assert result.stop_reason == "final" and not result.interrupted
    assert result.reply is events.reply
    assert result.usage.requests == 2 and result.usage.tool_calls == 1
    assert [m.role for m in result.new_messages] == ["user", "assistant", "user", "assistant"]
    assert result.new_messages == (await checked_memory(agent))
    assert kinds[0] == "reply_started" and kinds[-1] == "reply_finished"


async def test_stream_with_output_type_gives_the_validated_model() -> None:
    model = ScriptedModel(
        [tool_use("generate_response", "r1", name="Rome", country="Italy")], stream=True
    )
    agent = agent_for(model)
    async with agent.stream("capital of Italy?", output_type=City) as events:
        finished = [e async for e in events if isinstance(e, ReplyFinished)]
    city: City = events.result.output
    assert city == City(name="Rome", country="Italy")
    assert finished[0].reply is events.result.reply
    assert events.result.reply.metadata is not None
    assert events.result.reply.metadata["structured_output"] == {
        "name": "Rome",
        "country": "Italy",
    }


async def test_stream_takes_the_output_type_by_keyword_only() -> None:
    agent = agent_for(ScriptedModel([tool_use("generate_response", "r1", name="X", country="Y")]))
    async with agent.stream("go", output_type=City) as events:
        async for _ in events:
            pass
    assert events.result.output == City(name="X", country="Y")
    with pytest.raises(TypeError):
        agent.stream("go", City)  # type: ignore[call-overload]


async def test_interrupted_stream_has_an_interrupted_result() -> None:
    rec = Recorder()
    model = ScriptedModel(
        [[text("Working."), tool_use("sleep", "s", label="s", seconds=10)]], stream=True
    )
    agent = agent_for(model, rec)
    async with agent.stream("go") as events:
        async for event in events:
            if event.type == "tool_call_started":
                break
        with pytest.raises(UsageError, match="not ready"):
            _ = events.result  # still being interrupted: the block has not been left
    result = events.result
    assert result.stop_reason == "interrupted" and result.interrupted
    assert result.reply.metadata is not None and result.reply.metadata["interrupted"] is True
    assert result.pending == []
    assert results_of(await checked_memory(agent))["s"][1] is True  # an error result
    assert result.new_messages[-1].role == "user"  # the repaired call's result is stored


async def test_interrupted_structured_stream_has_no_output() -> None:
    model = ScriptedModel([[tool_use("sleep", "s", label="s", seconds=10)]])
    agent = agent_for(model)
    async with agent.stream("go", output_type=City) as events:
        async for event in events:
            if event.type == "tool_call_started":
                break
    assert events.result.stop_reason == "interrupted"
    with pytest.raises(Exception, match="no output"):
        _ = events.result.output


async def test_stream_paused_for_approval_then_resumed_with_run() -> None:
    rec = Recorder()
    model = ScriptedModel([[text("Checking."), tool_use("guarded", "g1", label="x")], "Done."])
    agent = agent_for(model, rec)
    async with agent.stream("go") as events:
        kinds = [event.type async for event in events]
    paused = events.result
    assert paused.stop_reason == "pending_approval"
    assert [(p.id, p.name, p.input) for p in paused.pending] == [("g1", "guarded", {"label": "x"})]
    assert "approval_required" in kinds
    assert rec.calls == {}
    done = await agent.run(approvals={"g1": True})
    assert done.output == "Done." and rec.calls == {"x": 1}


async def test_stream_passes_deps_and_usage_limits() -> None:
    toolkit = Toolkit()
    seen: list[str] = []

    @toolkit.tool
    def whoami(ctx: ToolContext[Deps]) -> str:
        """Say who asks."""
        seen.append(ctx.deps.user)
        return ctx.deps.user

    model = ScriptedModel([tool_use("whoami", "w1"), tool_use("whoami", "w2"), "never"])
    agent = ReActAgent("bot", "sys", model, toolkit)
    limits = UsageLimits(max_requests=2)
    async with agent.stream("who?", deps=Deps("ada"), usage_limits=limits) as events:
        async for _ in events:
            pass
    assert seen == ["ada", "ada"]
    assert events.result.stop_reason == "usage_limit"
    assert events.result.usage_limit == "max_requests"
    assert events.result.usage.requests == 2


async def test_plain_iteration_gives_the_result_too() -> None:
    agent = agent_for(ScriptedModel(["Hello."]))
    events = agent.stream("hi")
    kinds = [event.type async for event in events]
    assert kinds[-1] == "reply_finished"
    assert events.result.output == "Hello."


async def test_a_failed_run_has_no_result() -> None:
    agent = agent_for(ScriptedModel([RuntimeError("model down")]))
    events = agent.stream("hi")

    async def consume() -> None:
        async with events:
            async for _ in events:
                pass

    with pytest.raises(RuntimeError, match="model down"):
        await consume()
    with pytest.raises(UsageError, match="failed"):
        _ = events.result

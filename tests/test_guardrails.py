"""Guardrails are capabilities: a tripped input guardrail stops the run before any model
request, tool call or assistant text (also when raced with the first request, whose usage
still counts); output guardrails refuse the final answer, text or structured; tool
guardrails block a call or stop the run. A trip is a value on the result
(``stop_reason="guardrail"``), and memory stays valid after every one."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from agentkit import (
    GuardrailResult,
    GuardrailTripped,
    InputGuardrail,
    ReActAgent,
    RunContext,
    RunResult,
    ToolContext,
    ToolGuardrail,
    Toolkit,
    ToolResponse,
    ToolUseBlock,
    check_memory_invariant,
    input_guardrail,
    output_guardrail,
    tool_guardrail,
)
from agentkit.events import AgentEvent, TextDelta, ToolCallStarted
from agentkit.exceptions import StateError, UsageError
from agentkit.messages import Msg
from agentkit.testing import FunctionModel, RequestInfo, ScriptedModel, text, tool_use


class Ticket(BaseModel):
    title: str


def adder(ran: list[int]) -> Toolkit:
    toolkit = Toolkit()

    @toolkit.tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first.
            b: The second.
        """
        ran.append(a + b)
        return a + b

    return toolkit


@input_guardrail
def no_homework(ctx: RunContext[Any], messages: list[Msg]) -> GuardrailResult:
    if any("homework" in m.get_text() for m in messages):
        return GuardrailResult.trip("homework is not our business", info={"score": 0.9})
    return GuardrailResult.passed()


async def memory_is_valid(agent: ReActAgent[Any, Any]) -> list[Msg]:
    msgs = await agent.memory.get_memory()
    check_memory_invariant(msgs)
    return msgs


async def collect(agent: ReActAgent[Any, Any], prompt: str) -> tuple[list[AgentEvent], Any]:
    events: list[AgentEvent] = []
    async with agent.stream(prompt) as stream:
        async for event in stream:
            events.append(event)
    return events, stream.result


# -- input ---------------------------------------------------------------------------------
async def test_tripped_input_guardrail_stops_before_any_request_tool_or_text() -> None:
    ran: list[int] = []
    model = ScriptedModel([[text("On it."), tool_use("add", a=1, b=2)], "3"])
    agent = ReActAgent("a", "sys", model, adder(ran), capabilities=[no_homework])
    events, result = await collect(agent, "do my homework: 1 + 2")
    assert result.stop_reason == "guardrail"
    assert result.guardrail == GuardrailTripped(
        "no_homework", "input", "homework is not our business", {"score": 0.9}
    )
    assert model.requests == [] and ran == [] and result.usage.tool_calls == 0
    assert not [e for e in events if isinstance(e, TextDelta | ToolCallStarted)]
    assert result.reply.metadata["guardrail"]["name"] == "no_homework"
    with pytest.raises(StateError, match="guardrail"):
        _ = result.output
    msgs = await memory_is_valid(agent)
    assert [m.role for m in msgs] == ["user"]
    # The conversation goes on: the next message is checked anew and answered.
    agent.model = ScriptedModel(["Hello!"])
    again = await agent.run("hi")
    assert (again.stop_reason, again.output, again.guardrail) == ("final", "Hello!", None)


async def test_passing_input_guardrail_sees_the_input_and_lets_the_run_go_on() -> None:
    seen: list[list[str]] = []

    async def record(ctx: RunContext[Any], messages: list[Msg]) -> GuardrailResult:
        seen.append([m.get_text() for m in messages])
        return GuardrailResult.passed()

    ran: list[int] = []
    model = ScriptedModel([[tool_use("add", a=1, b=2)], "3"])
    agent = ReActAgent("a", "sys", model, adder(ran), capabilities=[InputGuardrail(record)])
    result = await agent.run("1 + 2?")
    assert (result.stop_reason, result.output, ran) == ("final", "3", [3])
    assert seen == [["1 + 2?"]]  # once per run: not before the second request


def raced_model(answered: anyio.Event, stream: bool = True) -> FunctionModel:
    # Sync and unstreamed, the answer is complete at the first checkpoint after
    # ``answered`` is set: the guardrail, woken by it, trips on a held, complete answer.
    def answer(messages: list[Msg], info: RequestInfo) -> Any:
        answered.set()
        if messages[-1].role == "user" and isinstance(messages[-1].content, list):
            return "3"  # after the tool result
        return [text("Let me add."), tool_use("add", a=1, b=2)]

    return FunctionModel(answer, stream=stream)


async def test_parallel_input_guardrail_trip_drops_the_raced_answer_but_counts_its_usage() -> None:
    answered = anyio.Event()

    @input_guardrail(run_in_parallel=True)
    async def slow_check(ctx: RunContext[Any], messages: list[Msg]) -> GuardrailResult:
        with anyio.fail_after(10):
            await answered.wait()  # the raced request has answered: now trip
        return GuardrailResult.trip("nope")

    ran: list[int] = []
    model = raced_model(answered, stream=False)
    agent = ReActAgent("a", "sys", model, adder(ran), capabilities=[slow_check])
    events, result = await collect(agent, "1 + 2?")
    assert result.stop_reason == "guardrail"
    assert result.guardrail is not None and result.guardrail.name == "slow_check"
    assert len(model.requests) == 1 and result.usage.requests == 1
    assert result.usage.output_tokens > 0  # the raced answer was paid for
    assert ran == [] and not [e for e in events if isinstance(e, TextDelta | ToolCallStarted)]
    msgs = await memory_is_valid(agent)
    assert [m.role for m in msgs] == ["user"]  # the raced answer was never stored


async def test_parallel_input_guardrail_that_passes_releases_the_held_answer() -> None:
    answered = anyio.Event()

    @input_guardrail(run_in_parallel=True)
    async def slow_ok(ctx: RunContext[Any], messages: list[Msg]) -> GuardrailResult:
        with anyio.fail_after(10):
            await answered.wait()
        return GuardrailResult.passed()

    ran: list[int] = []
    agent = ReActAgent("a", "sys", raced_model(answered), adder(ran), capabilities=[slow_ok])
    events, result = await collect(agent, "1 + 2?")
    assert (result.stop_reason, result.output, ran) == ("final", "3", [3])
    deltas = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert deltas.startswith("Let me add.")  # held, then delivered in order
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    first_call = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    assert first_text < first_call
    await memory_is_valid(agent)


async def test_a_blocking_guardrail_runs_before_a_parallel_one_races_the_request() -> None:
    calls: list[str] = []

    @input_guardrail(run_in_parallel=True)
    def fast(ctx: RunContext[Any], messages: list[Msg]) -> GuardrailResult:
        calls.append("parallel")
        return GuardrailResult.passed()

    model = ScriptedModel(["hi"])
    agent = ReActAgent("a", "sys", model, capabilities=[fast, no_homework])
    result = await agent.run("homework")
    assert result.guardrail is not None and result.guardrail.name == "no_homework"
    assert calls == [] and model.requests == []


# -- output --------------------------------------------------------------------------------
@output_guardrail
def no_secrets(ctx: RunContext[Any], output: Any) -> GuardrailResult:
    value = output if isinstance(output, str) else output.title
    return GuardrailResult.trip("leak") if "secret" in value else GuardrailResult.passed()


async def test_output_guardrail_refuses_a_text_answer() -> None:
    agent = ReActAgent("a", "sys", ScriptedModel(["the secret is 42"]), capabilities=[no_secrets])
    result = await agent.run("tell me")
    assert result.stop_reason == "guardrail"
    assert result.guardrail == GuardrailTripped("no_secrets", "output", "leak")
    assert result.text == ""  # the refused answer is not returned
    with pytest.raises(StateError):
        _ = result.output
    await memory_is_valid(agent)


async def test_output_guardrail_checks_the_structured_instance() -> None:
    model = ScriptedModel([[tool_use("generate_response", title="secret plan")]])
    agent = ReActAgent("a", "sys", model, output_type=Ticket, capabilities=[no_secrets])
    result = await agent.run("file it")
    assert result.stop_reason == "guardrail"
    assert result.guardrail is not None and result.guardrail.kind == "output"
    await memory_is_valid(agent)
    agent.model = ScriptedModel([[tool_use("generate_response", title="public plan")]])
    ok: RunResult[Ticket] = await agent.run("again")
    assert (ok.stop_reason, ok.output) == ("final", Ticket(title="public plan"))


# -- tools ---------------------------------------------------------------------------------
def big_numbers(ctx: ToolContext[Any], call: ToolUseBlock) -> GuardrailResult:
    if call["input"].get("a", 0) > 100:
        return GuardrailResult.trip("numbers too big")
    return GuardrailResult.passed()


async def test_tool_guardrail_blocks_a_call_and_the_model_goes_on() -> None:
    ran: list[int] = []
    model = ScriptedModel([[tool_use("add", a=500, b=1)], [tool_use("add", a=5, b=1)], "6"])
    guard = ToolGuardrail(big_numbers)
    agent = ReActAgent("a", "sys", model, adder(ran), capabilities=[guard])
    result = await agent.run("add")
    assert (result.stop_reason, result.output, ran) == ("final", "6", [6])
    blocked = model.requests[1].messages[-1].get_blocks("tool_result")[0]
    assert "blocked by guardrail 'big_numbers': numbers too big" in blocked["output"]
    assert blocked.get("is_error") is True
    await memory_is_valid(agent)


async def test_tool_guardrail_with_stop_run_ends_the_run_after_answering_every_call() -> None:
    ran: list[int] = []
    model = ScriptedModel([[tool_use("add", a=500, b=1), tool_use("add", a=1, b=1)], "never"])
    guard = tool_guardrail(action="stop_run")(big_numbers)
    agent = ReActAgent(
        "a", "sys", model, adder(ran), parallel_tool_calls=False, capabilities=[guard]
    )
    result = await agent.run("add")
    assert result.stop_reason == "guardrail"
    assert result.guardrail == GuardrailTripped("big_numbers", "tool", "numbers too big")
    assert ran == [] and len(model.requests) == 1  # the later call was vetoed too
    msgs = await memory_is_valid(agent)
    outputs = [b["output"] for b in msgs[-1].get_blocks("tool_result")]
    assert "numbers too big" in outputs[0] and "stopped the run" in outputs[1]


async def test_tool_guardrail_after_the_call_withholds_its_result() -> None:
    def no_big_results(ctx: ToolContext[Any], result: ToolResponse) -> GuardrailResult:
        texts = [str(b.get("text", "")) for b in result.content]
        big = any(t.isdigit() and int(t) > 5 for t in texts)
        return GuardrailResult.trip("result too big") if big else GuardrailResult.passed()

    ran: list[int] = []
    guard = ToolGuardrail(no_big_results, when="after", action="stop_run", tools=["add"])
    model = ScriptedModel([[tool_use("add", a=5, b=5)], "never"])
    agent = ReActAgent("a", "sys", model, adder(ran), capabilities=[guard])
    result = await agent.run("add")
    assert result.stop_reason == "guardrail" and ran == [10]  # it ran; its result is withheld
    msgs = await memory_is_valid(agent)
    assert "withheld" in msgs[-1].get_blocks("tool_result")[0]["output"]


async def test_tool_guardrail_checks_only_the_tools_it_names() -> None:
    ran: list[int] = []
    guard = ToolGuardrail(big_numbers, tools=["other"], action="stop_run")
    model = ScriptedModel([[tool_use("add", a=500, b=1)], "501"])
    agent = ReActAgent("a", "sys", model, adder(ran), capabilities=[guard])
    result = await agent.run("add")
    assert (result.stop_reason, ran) == ("final", [501])


# -- misuse --------------------------------------------------------------------------------
async def test_a_guardrail_that_returns_no_verdict_is_a_clear_error() -> None:
    bad: InputGuardrail[Any] = InputGuardrail(lambda ctx, messages: True, name="bad")  # type: ignore[arg-type, return-value]
    agent = ReActAgent("a", "sys", ScriptedModel(["hi"]), capabilities=[bad])
    with pytest.raises(UsageError, match="guardrail 'bad' must return a GuardrailResult"):
        await agent.run("hi")
    await memory_is_valid(agent)
    with pytest.raises(UsageError, match="when="):
        ToolGuardrail(big_numbers, when="during")  # type: ignore[arg-type]

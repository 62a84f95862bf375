"""Output validators check the final answer (structured or text): a ``ToolRetry`` makes the
model answer again with the message in view, within the structured-output retry budget;
copies keep them. Union output types offer one response tool per member: the member the
model chose is the output, and a member's invalid arguments are retried."""

from __future__ import annotations

from typing import Any, Union

import pytest
from pydantic import BaseModel

from agentkit import ReActAgent, RunContext, RunResult, ToolRetry, check_memory_invariant
from agentkit.exceptions import StructuredOutputError, UsageError
from agentkit.testing import ScriptedModel, ScriptItem, tool_use


class Ticket(BaseModel):
    """A support ticket."""

    title: str
    priority: int


class Refund(BaseModel):
    """A refund to pay."""

    amount: float


async def memory_is_valid(agent: ReActAgent[Any, Any]) -> None:
    check_memory_invariant(await agent.memory.get_memory())


# -- validators ----------------------------------------------------------------------------
async def test_validator_retry_shows_the_model_the_message_and_it_corrects_itself() -> None:
    model = ScriptedModel(
        [
            [tool_use("generate_response", title="Broken", priority=9)],
            [tool_use("generate_response", title="Broken", priority=2)],
        ]
    )
    agent: ReActAgent[None, Ticket] = ReActAgent("a", "sys", model, output_type=Ticket)

    @agent.output_validator
    async def in_range(ctx: RunContext[None], out: Ticket) -> Ticket:
        if out.priority > 5:
            raise ToolRetry("priority must be between 1 and 5")
        return out

    result = await agent.run("file a ticket")
    assert result.output == Ticket(title="Broken", priority=2)
    answered = model.requests[1].messages[-1].get_blocks("tool_result")[0]
    assert "priority must be between 1 and 5" in answered["output"]
    assert answered.get("is_error") is True
    await memory_is_valid(agent)


async def test_validator_retries_are_bounded() -> None:
    always: list[ScriptItem] = [[tool_use("generate_response", title="x", priority=9)]] * 10
    model = ScriptedModel(always)
    agent = ReActAgent("a", "sys", model, output_type=Ticket)

    @agent.output_validator
    def never(ctx: RunContext[None], out: Ticket) -> Ticket:
        raise ToolRetry("no")

    with pytest.raises(StructuredOutputError):
        await agent.run("file a ticket")
    assert len(model.requests) == 4  # the answer, then 3 retries
    await memory_is_valid(agent)


async def test_validator_of_a_text_run_retries_and_may_replace_the_answer() -> None:
    model = ScriptedModel(["I guess", "Paris"])
    agent = ReActAgent("a", "sys", model)

    @agent.output_validator
    def sure(ctx: RunContext[None], out: str) -> str:
        if "guess" in out:
            raise ToolRetry("do not guess")
        return out.upper()

    result = await agent.run("capital of France?")
    assert (result.stop_reason, result.output, result.text) == ("final", "PARIS", "PARIS")
    last = model.requests[1].messages[-1]
    assert last.role == "user" and "do not guess" in last.get_text()
    await memory_is_valid(agent)


async def test_text_validator_retries_are_bounded() -> None:
    model = ScriptedModel(["no"] * 10)
    agent = ReActAgent("a", "sys", model)
    agent.output_validator(lambda ctx, out: (_ for _ in ()).throw(ToolRetry("again")))
    with pytest.raises(StructuredOutputError, match="again"):
        await agent.run("?")
    assert len(model.requests) == 4
    await memory_is_valid(agent)


async def test_copies_keep_validators_and_validators_run_in_order() -> None:
    agent = ReActAgent("a", "sys", ScriptedModel([]))
    agent.output_validator(lambda ctx, out: out + "1")
    agent.output_validator(lambda ctx, out: out + "2")
    clone = agent.copy()
    clone.model = ScriptedModel(["x"])
    assert clone.output_validators == agent.output_validators
    assert (await clone.run("?")).output == "x12"


async def test_a_validator_that_returns_the_wrong_type_is_a_clear_error() -> None:
    model = ScriptedModel([[tool_use("generate_response", title="t", priority=1)]])
    agent = ReActAgent("a", "sys", model, output_type=Ticket)
    agent.output_validator(lambda ctx, out: None)
    with pytest.raises(UsageError, match="must return the output"):
        await agent.run("?")
    await memory_is_valid(agent)


# -- unions --------------------------------------------------------------------------------
@pytest.mark.parametrize("union", [Ticket | Refund, Union[Ticket, Refund]])  # noqa: UP007
async def test_union_output_offers_one_tool_per_member_and_returns_the_chosen_one(
    union: Any,
) -> None:
    model = ScriptedModel(
        [
            [tool_use("generate_response_Refund", amount=12.5)],
            [tool_use("generate_response_Ticket", title="t", priority=1)],
        ]
    )
    agent = ReActAgent("a", "sys", model, output_type=union)
    refund = await agent.run("refund me")
    assert refund.output == Refund(amount=12.5)
    assert model.requests[0].tool_names == ["generate_response_Ticket", "generate_response_Refund"]
    assert model.requests[0].settings.get("tool_choice") == "required"
    ticket = await agent.run("file a ticket")
    assert ticket.output == Ticket(title="t", priority=1)
    await memory_is_valid(agent)


async def test_a_wrong_members_arguments_are_retried() -> None:
    model = ScriptedModel(
        [
            [tool_use("generate_response_Ticket", amount=3.0)],  # a Refund's fields
            [tool_use("generate_response_Refund", amount=3.0)],
        ]
    )
    agent = ReActAgent("a", "sys", model)
    result: RunResult[Ticket | Refund] = await agent.run("refund", output_type=Ticket | Refund)
    assert result.output == Refund(amount=3.0)
    answered = model.requests[1].messages[-1].get_blocks("tool_result")[0]
    assert "do not match" in answered["output"] and "generate_response_Ticket" in answered["output"]
    await memory_is_valid(agent)


async def test_validators_see_the_union_member() -> None:
    model = ScriptedModel([[tool_use("generate_response_Refund", amount=3.0)]])
    agent = ReActAgent("a", "sys", model, output_type=Ticket | Refund)
    seen: list[object] = []

    def record(ctx: RunContext[None], out: object) -> object:
        seen.append(out)
        return out

    agent.output_validator(record)
    await agent.run("refund")
    assert seen == [Refund(amount=3.0)]


def test_a_union_with_a_member_that_is_no_model_is_refused() -> None:
    with pytest.raises(UsageError, match="every member"):
        ReActAgent("a", "sys", ScriptedModel([]), output_type=Ticket | int)

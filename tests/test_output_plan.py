"""The structured answer a run asks for is one immutable value (``OutputPlan``).

Built from the ``output_type`` once, held by the run and passed along: nothing is
generated or registered at module level, so output types built at runtime are freed with
the runs that used them.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import pytest
from pydantic import BaseModel, create_model

import agentkit.agent._structured as structured
from agentkit import Capability, NativeOutput, PromptedOutput, ReActAgent, ToolOutput
from agentkit.agent._structured import RESPONSE_TOOL, OutputPlan, output_plan
from agentkit.models._base import ModelRequest
from agentkit.testing import ScriptedModel, text, tool_use
from agentkit.tools._context import RunContext


class Refund(BaseModel):
    """Money back."""

    amount: int


class Escalation(BaseModel):
    """A human takes over."""

    reason: str


def test_a_plan_is_an_immutable_value_built_from_the_output_type() -> None:
    plan = output_plan(Refund | Escalation)
    assert plan is not None
    assert plan.tools == (
        ("generate_response_Refund", Refund),
        ("generate_response_Escalation", Escalation),
    )
    assert (plan.mode, plan.name, plan.forced_choice()) == (
        "tool",
        "Refund | Escalation",
        "required",
    )
    assert plan == output_plan(Refund | Escalation)  # a value: equal for the same input
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mode = "native"  # type: ignore[misc]

    native = output_plan(NativeOutput(Refund, fallback="prompted"))
    assert native == OutputPlan(
        NativeOutput(Refund, fallback="prompted"), ((RESPONSE_TOOL, Refund),), "native", "prompted"
    )
    assert output_plan(ToolOutput(Refund)) == OutputPlan(
        ToolOutput(Refund), ((RESPONSE_TOOL, Refund),)
    )
    assert output_plan(PromptedOutput(Refund)).mode == "prompted"  # type: ignore[union-attr]
    assert output_plan(str) is None and output_plan(None) is None


def test_the_structured_module_keeps_no_registry() -> None:
    mutable = {
        name: type(value).__name__
        for name, value in vars(structured).items()
        if isinstance(value, dict | list | set) and not name.startswith("__")
    }
    assert mutable == {}


def _pair(i: int) -> tuple[type[BaseModel], type[BaseModel]]:
    first = create_model(f"First{i}", value=(int, ...))
    second = create_model(f"Second{i}", label=(str, ...))
    return first, second


async def test_unions_built_at_runtime_leave_nothing_behind() -> None:
    alive: list[weakref.ref[type[BaseModel]]] = []
    for i in range(25):
        first, second = _pair(i)
        alive += [weakref.ref(first), weakref.ref(second)]
        answers: list[Any] = [
            [tool_use(f"generate_response_First{i}", f"r{i}", value=i)],
            [tool_use(f"generate_response_Second{i}", f"s{i}", label="x")],
        ]
        agent = ReActAgent("a", "sys", ScriptedModel(answers), output_type=first | second)
        result = await agent.run("go")
        assert isinstance(result.output, first)
        # A per-run union too, on the same agent.
        other = await agent.run("again", output_type=second | first)
        assert isinstance(other.output, second)
        del first, second, agent, result, other, answers
    gc.collect()
    assert [ref for ref in alive if ref() is not None] == []


async def test_a_pre_reply_hook_sees_the_output_type_as_given_and_may_replace_it() -> None:
    seen: list[Any] = []

    def pre_reply(agent: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        seen.append(kwargs["output_type"])
        return {**kwargs, "output_type": Escalation}

    answer: list[Any] = [tool_use(RESPONSE_TOOL, "r1", reason="angry")]
    agent: ReActAgent[None, Any] = ReActAgent(
        "a", "sys", ScriptedModel([answer]), output_type=Refund | Escalation
    )
    agent.register_hook("pre_reply", "swap", pre_reply)
    result = await agent.run("help")
    assert seen == [Refund | Escalation]
    assert result.output == Escalation(reason="angry")


class Requests(Capability[None]):
    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def before_model(self, ctx: RunContext[None], request: ModelRequest) -> ModelRequest:
        self.requests.append(request)
        return request


async def test_a_request_names_every_member_of_a_union_it_asks_for() -> None:
    requests = Requests()
    answer: list[Any] = [tool_use("generate_response_Escalation", "r1", reason="late")]
    agent: ReActAgent[None, Any] = ReActAgent(
        "a",
        "sys",
        ScriptedModel([answer]),
        output_type=Refund | Escalation,
        capabilities=[requests],
    )
    result = await agent.run("help")
    assert result.output == Escalation(reason="late")
    [request] = requests.requests
    assert request.output is not None
    assert (request.output.mode, request.output.members) == ("tool", (Refund, Escalation))
    names = [t.name for t in request.tools]
    assert names[-2:] == ["generate_response_Refund", "generate_response_Escalation"]


async def test_a_text_mode_request_asks_for_the_model_itself() -> None:
    requests = Requests()
    agent = ReActAgent(
        "a",
        "sys",
        ScriptedModel([[text('{"amount": 3}')]]),
        output_type=PromptedOutput(Refund),
        capabilities=[requests],
    )
    result = await agent.run("refund?")
    assert result.output == Refund(amount=3)
    [request] = requests.requests
    assert request.output is not None
    assert (request.output.model, request.output.mode, request.output.members) == (
        Refund,
        "prompted",
        (),
    )

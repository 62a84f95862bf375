"""Structured output through the per-reply ``generate_response`` tool."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from agentkit.exceptions import StructuredOutputError
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import agent_for, checked_memory, results_of, shape


class Weather(BaseModel):
    """A weather report."""

    city: str
    celsius: float = Field(ge=-90, le=60)


async def test_structured_output_success_without_touching_the_toolkit():
    model = ScriptedModel(
        [
            [tool_use("add", "c1", a=1, b=2)],
            [text("Here it is."), tool_use("generate_response", "r1", city="Oslo", celsius=4.5)],
        ]
    )
    agent = agent_for(model)
    before = agent.toolkit.get_tool_definitions()
    reply = await agent("weather?", output_type=Weather)
    assert reply.metadata["structured_output"] == {"city": "Oslo", "celsius": 4.5}
    assert Weather.model_validate(reply.metadata["structured_output"]).city == "Oslo"
    assert reply.get_text() == "Here it is."
    json.dumps(reply.to_dict())
    assert agent.toolkit.get_tool_definitions() == before
    request = model.requests[0]
    assert request.settings.get("tool_choice") == "required"
    assert "generate_response" in request.tool_names and "add" in request.tool_names
    schema = request.tools[-1].parameters
    assert schema["properties"]["celsius"]["maximum"] == 60
    memory = await checked_memory(agent)
    assert results_of(memory)["r1"][1] is False
    # The next plain reply does not offer generate_response any more.
    agent.model = ScriptedModel(["plain"])
    await agent("thanks")
    assert "generate_response" not in agent.model.requests[0].tool_names


async def test_structured_output_retry_then_success():
    model = ScriptedModel(
        [
            [tool_use("generate_response", "r1", city="Oslo", celsius=999)],
            "I think it is cold.",  # prose instead of the tool: insisted upon
            [tool_use("generate_response", "r2", city="Oslo", celsius=-3)],
        ]
    )
    agent = agent_for(model)
    reply = await agent("weather?", output_type=Weather)
    assert reply.metadata["structured_output"] == {"city": "Oslo", "celsius": -3.0}
    memory = await checked_memory(agent)
    error, is_error = results_of(memory)["r1"]
    assert is_error and "less than or equal to 60" in error
    assert model.requests[2].settings.get("tool_choice") == "generate_response"
    assert reply.get_text() == json.dumps({"city": "Oslo", "celsius": -3.0})


async def test_structured_output_gives_up_after_bounded_retries():
    bad = [[tool_use("generate_response", f"r{i}", city="X")] for i in range(4)]
    agent = agent_for(ScriptedModel(bad))
    with pytest.raises(StructuredOutputError, match="Weather"):
        await agent("weather?", output_type=Weather)
    memory = await checked_memory(agent)
    assert all(is_error for _, is_error in results_of(memory).values())
    assert len(results_of(memory)) == 4


async def test_structured_output_at_max_iters_forces_the_response_tool():
    model = ScriptedModel(
        [
            [tool_use("add", "c1", a=1, b=1)],
            [tool_use("generate_response", "r1", city="Rome", celsius=20)],
        ]
    )
    agent = agent_for(model, max_iters=1)
    reply = await agent("go", output_type=Weather)
    assert reply.metadata["max_iters_reached"] is True
    assert reply.metadata["structured_output"]["city"] == "Rome"
    assert model.requests[-1].tool_names == ["generate_response"]
    assert model.requests[-1].settings.get("tool_choice") == "generate_response"
    assert shape(await checked_memory(agent))[-1] == ("user", ["result:r1"])


async def test_paused_structured_reply_needs_its_model_again_after_a_reload():
    from agentkit.exceptions import StateError

    turn = [tool_use("guarded", "g1", label="g1")]
    answer = [tool_use("generate_response", "r1", city="Oslo", celsius=4.5)]
    agent = agent_for(ScriptedModel([turn]))
    paused = await agent("weather?", output_type=Weather)
    assert [c["id"] for c in paused.metadata["pending_tool_calls"]] == ["g1"]
    state = json.loads(json.dumps(agent.state_dict()))
    assert state["structured_model"].endswith("test_agent_structured.Weather")

    fresh = agent_for(ScriptedModel([answer]))
    fresh.load_state_dict(state)
    with pytest.raises(StateError, match=r"output_type="):
        await fresh.resume({"g1": True})
    assert fresh.pending_tool_calls  # the refusal changed nothing
    reply = await fresh.resume({"g1": True}, output_type=Weather)
    assert reply.metadata["structured_output"] == {"city": "Oslo", "celsius": 4.5}
    assert fresh.state_dict()["structured_model"] is None
    await checked_memory(fresh)

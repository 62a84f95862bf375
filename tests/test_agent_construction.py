"""What ``ReActAgent(...)`` takes, keeps, and hands on to its copies."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from agentkit import ReActAgent, ToolContext, Toolkit, UsageError, UsageLimits, handoff
from agentkit.agent import Compactor
from agentkit.testing import ScriptedModel, text, tool_use


class Ticket(BaseModel):
    id: int
    title: str


class Note(BaseModel):
    body: str


async def test_output_type_at_construction_types_every_run() -> None:
    model = ScriptedModel(
        [
            tool_use("generate_response", "r1", id=7, title="printer on fire"),
            tool_use("generate_response", "r2", body="per call"),
        ]
    )
    agent = ReActAgent("triage", "Open tickets.", model, output_type=Ticket)
    result = await agent.run("the printer is on fire")
    assert result.output == Ticket(id=7, title="printer on fire")
    # A per-call output_type overrides the agent's for that run only.
    other = await agent.run("note it", output_type=Note)
    assert other.output == Note(body="per call")
    assert agent.output_type is Ticket


async def test_output_type_str_is_the_final_text() -> None:
    agent = ReActAgent("a", "sys", ScriptedModel([text("plain")]), output_type=str)
    assert agent.output_type is None
    assert (await agent.run("hi")).output == "plain"


def test_output_type_must_be_a_pydantic_model_or_str() -> None:
    with pytest.raises(UsageError, match="output_type"):
        ReActAgent("a", "sys", ScriptedModel([]), output_type=int)


@dataclass
class Deps:
    user_id: int


async def test_deps_reach_tools_of_a_typed_agent() -> None:
    toolkit = Toolkit()

    @toolkit.tool
    def whoami(ctx: ToolContext[Deps]) -> str:
        """Who is asking."""
        return f"user {ctx.deps.user_id}"

    model = ScriptedModel([tool_use("whoami", "c1"), text("done")])
    agent = ReActAgent("a", "sys", model, toolkit, deps_type=Deps)
    assert agent.deps_type is Deps
    result = await agent.run("who?", deps=Deps(user_id=7))
    tool_results = [
        block
        for msg in result.new_messages
        for block in msg.get_content_blocks()
        if block["type"] == "tool_result"
    ]
    assert "user 7" in str(tool_results[0]["output"])


def _non_default(name: str) -> Any:
    """A value for every constructor parameter that differs from its default."""
    values: dict[str, Any] = {
        "name": "agent",
        "sys_prompt": "You are careful.",
        "model": ScriptedModel([]),
        "toolkit": Toolkit(),
        "deps_type": dict,
        "output_type": Ticket,
        "max_iters": 4,
        "parallel_tool_calls": False,
        "print_hint": True,
        "max_concurrency": 3,
        "approval_policy": lambda call: True,
        "usage_limits": UsageLimits(max_requests=5),
        "max_tool_retries": 1,
        "capabilities": (Compactor(8000),),
        "handoffs": (handoff(ReActAgent("billing", "Bills.", ScriptedModel([]))),),
    }
    return values[name]


def test_copy_keeps_every_constructor_setting() -> None:
    """A setting added to the constructor and dropped by ``copy()`` fails here.

    This is the class of bug where a served copy of a template lost its usage limits,
    its compactor or its retry budget: the test walks the signature, so a new parameter
    needs no new test to be covered (it does need a value in ``_non_default``).
    """
    params = [
        p
        for p in inspect.signature(ReActAgent.__init__).parameters.values()
        if p.name not in {"self", "memory"}  # a copy gets a conversation of its own
    ]
    kwargs = {p.name: _non_default(p.name) for p in params if p.kind is p.KEYWORD_ONLY}
    positional = [_non_default(p.name) for p in params if p.kind is not p.KEYWORD_ONLY]
    template = ReActAgent(*positional, **kwargs)
    clone = template.copy()
    for p in params:
        expected = getattr(template, p.name)
        assert getattr(clone, p.name) == expected, p.name
        if p.name not in {"deps_type"}:
            assert expected != inspect.Parameter.empty
    assert clone.memory is not template.memory

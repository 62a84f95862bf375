"""Capabilities take part in every run at typed points: each fires in order, a
``before_tool`` answer vetoes the call, instructions reach only the run they were made for,
``for_run`` gives concurrent runs instances of their own, copies and served copies keep
them, and a run without capabilities calls none."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit import (
    Capability,
    ModelRequest,
    ReActAgent,
    RunContext,
    RunResult,
    ToolContext,
    Toolkit,
    ToolResponse,
    ToolUseBlock,
    check_memory_invariant,
)
from agentkit.exceptions import UsageError
from agentkit.messages import Msg
from agentkit.models import ChatResponse
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import FunctionModel, ScriptedModel, text, tool_use
from tests._agent_helpers import refuse_capability_points
from tests._serve_helpers import run_input, running, sse_events, user


@dataclass
class Deps:
    customer: str


def adder(ran: list[int] | None = None) -> Toolkit:
    toolkit = Toolkit()

    @toolkit.tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first.
            b: The second.
        """
        if ran is not None:
            ran.append(a + b)
        return a + b

    return toolkit


class Tracer(Capability[Deps]):
    """Logs every point it is called at, as ``"<name>:<point>"``."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        self.result: RunResult[Any] | None = None

    def _at(self, point: str) -> None:
        self.log.append(f"{self.name}:{point}")

    def for_run(self, ctx: RunContext[Deps]) -> Capability[Deps]:
        self._at("for_run")
        return self

    async def before_run(self, ctx: RunContext[Deps]) -> None:
        self._at("before_run")

    async def instructions(self, ctx: RunContext[Deps]) -> str | None:
        self._at("instructions")
        return None

    async def before_model(self, ctx: RunContext[Deps], request: ModelRequest) -> ModelRequest:
        self._at("before_model")
        return request

    async def after_model(self, ctx: RunContext[Deps], response: ChatResponse) -> ChatResponse:
        self._at("after_model")
        return response

    async def before_tool(
        self, ctx: ToolContext[Deps], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        self._at(f"before_tool({ctx.tool_name})")
        return call

    async def after_tool(self, ctx: ToolContext[Deps], result: ToolResponse) -> ToolResponse:
        self._at("after_tool")
        return result

    async def after_run(self, ctx: RunContext[Deps], result: RunResult[Any]) -> None:
        self._at("after_run")
        self.result = result

    async def on_error(self, ctx: RunContext[Deps], error: BaseException) -> None:
        self._at(f"on_error({type(error).__name__})")


async def test_every_point_fires_in_order_for_each_capability() -> None:
    log: list[str] = []
    first, second = Tracer("a", log), Tracer("b", log)
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "Three."])
    agent = ReActAgent("bot", "sys", model, adder(), deps_type=Deps, capabilities=[first, second])
    result = await agent.run("1+2?", deps=Deps("ann"))
    points = [
        "for_run",
        "before_run",
        "instructions",
        "before_model",
        "after_model",
        "before_tool(add)",
        "after_tool",
        "instructions",
        "before_model",
        "after_model",
        "after_run",
    ]
    assert log == [f"{who}:{point}" for point in points for who in "ab"]
    assert first.result is not None and first.result.stop_reason == "final"
    assert first.result.output == result.output == "Three."
    assert first.result.usage.requests == 2 and first.result.usage.tool_calls == 1


async def test_the_context_names_the_run_and_sees_its_usage_and_memory() -> None:
    seen: list[tuple[str, str, str, int, int, str]] = []

    class Look(Capability[Deps]):
        async def before_model(self, ctx: RunContext[Deps], request: ModelRequest) -> ModelRequest:
            memory = await ctx.memory.get_memory()
            model = ctx.model.model_name if ctx.model is not None else ""
            seen.append(
                (
                    ctx.deps.customer,
                    ctx.agent_name,
                    ctx.run_id,
                    ctx.usage.requests,
                    len(memory),
                    model,
                )
            )
            return request

    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "Three."])
    agent = ReActAgent("bot", "sys", model, adder(), deps_type=Deps, capabilities=[Look()])
    await agent.run("1+2?", deps=Deps("ann"))
    (d1, n1, id1, r1, m1, mod), (_, _, id2, r2, m2, _) = seen
    assert (d1, n1, mod) == ("ann", "bot", model.model_name)
    assert id1 == id2 and len(id1) == 32  # one run, one id
    assert (r1, r2) == (0, 1)  # the live usage of the run so far
    assert (m1, m2) == (1, 3)  # question; question, call, result


async def test_before_model_and_after_model_replace_the_request_and_the_answer() -> None:
    class Edit(Capability[Any]):
        async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
            assert [t.name for t in request.tools] == ["add"]
            return dataclasses.replace(request, tools=[])

        async def after_model(self, ctx: RunContext[Any], response: ChatResponse) -> ChatResponse:
            return ChatResponse([text(response.get_text().upper())], response.usage)

    model = ScriptedModel(["quiet answer"])
    agent = ReActAgent("bot", "sys", model, adder(), capabilities=[Edit()])
    result = await agent.run("hi")
    assert not model.requests[0].tools  # no tools were offered
    assert result.output == "QUIET ANSWER"
    assert (await agent.memory.get_memory())[-1].get_text() == "QUIET ANSWER"  # stored so


async def test_a_before_tool_response_skips_the_call_and_is_its_result() -> None:
    ran: list[int] = []
    log: list[str] = []

    class Guard(Capability[Any]):
        async def before_tool(
            self, ctx: ToolContext[Any], call: ToolUseBlock
        ) -> ToolUseBlock | ToolResponse:
            return ToolResponse.error(f"{call['name']} is not allowed here")

    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "I may not add."])
    agent = ReActAgent("bot", "sys", model, adder(ran), capabilities=[Guard(), Tracer("t", log)])
    result = await agent.run("1+2?")
    assert ran == []  # the tool function never ran
    assert "t:before_tool(add)" not in log  # the veto ends the before_tool chain
    assert "t:after_tool" in log  # and its answer is the call's result
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    results = [b for m in memory for b in m.get_content_blocks() if b["type"] == "tool_result"]
    assert results[0]["id"] == "c1" and results[0].get("is_error") is True
    assert "add is not allowed here" in str(results[0]["output"])
    assert result.output == "I may not add."
    assert result.usage.tool_calls == 1  # answered, not run: counted as the call it replaces


async def test_a_before_tool_call_replaces_the_call_and_parallel_calls_pair_up() -> None:
    """A changed ``tool_use`` block is what runs; under parallel calls each call's
    ``before_tool`` precedes its ``after_tool``, once per call (ported from ``AgentHooks``)."""
    ran: list[int] = []
    log: list[str] = []

    class Rewrite(Capability[Any]):
        async def before_tool(
            self, ctx: ToolContext[Any], call: ToolUseBlock
        ) -> ToolUseBlock | ToolResponse:
            log.append(f"tool:{ctx.call_id}")
            if call["id"] == "c1":  # sanitized arguments
                return {**call, "input": {"a": 40, "b": 2}}
            return call

        async def after_tool(self, ctx: ToolContext[Any], result: ToolResponse) -> ToolResponse:
            log.append(f"done:{ctx.call_id}")
            return result

    calls = [tool_use("add", "c1", a=1, b=1), tool_use("add", "c2", a=2, b=2)]
    agent = ReActAgent(
        "bot", "sys", ScriptedModel([calls, "ok"]), adder(ran), capabilities=[Rewrite()]
    )
    await agent.run("add")
    assert sorted(ran) == [4, 42]
    assert sorted(log) == ["done:c1", "done:c2", "tool:c1", "tool:c2"]
    assert log.index("tool:c1") < log.index("done:c1")
    assert log.index("tool:c2") < log.index("done:c2")
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    outputs = {
        b["id"]: b["output"]
        for m in memory
        for b in m.get_content_blocks()
        if b["type"] == "tool_result"
    }
    assert outputs == {"c1": "42", "c2": "4"}


async def test_instructions_reach_the_system_prompt_of_their_run_only() -> None:
    class Customer(Capability[Deps]):
        async def instructions(self, ctx: RunContext[Deps]) -> str | None:
            return f"The customer is {ctx.deps.customer}."

    model = ScriptedModel(["Hi Ann.", "Hi Bob."])
    agent = ReActAgent("bot", "Be kind.", model, deps_type=Deps, capabilities=[Customer()])
    await agent.run("hello", deps=Deps("Ann"))
    await agent.run("hello again", deps=Deps("Bob"))
    first, second = (r.messages[0] for r in model.requests)
    assert first.role == second.role == "system"
    assert first.content == "Be kind.\n\nThe customer is Ann."
    assert second.content == "Be kind.\n\nThe customer is Bob."
    assert agent.sys_prompt == "Be kind."
    stored = " ".join(m.get_text() for m in await agent.memory.get_memory())
    assert "customer" not in stored  # never stored in the conversation


class Counting(Capability[Any]):
    """A template whose runs each get a fresh instance with state of their own."""

    def __init__(self, both: anyio.Event, started: list[PerRun]) -> None:
        self.both, self.started = both, started

    def for_run(self, ctx: RunContext[Any]) -> Capability[Any]:
        return PerRun(self, ctx.run_id)


class PerRun(Capability[Any]):
    def __init__(self, template: Counting, run_id: str) -> None:
        self.template, self.run_id = template, run_id
        self.requests: list[str] = []

    async def before_run(self, ctx: RunContext[Any]) -> None:
        self.template.started.append(self)
        if len(self.template.started) == 2:
            self.template.both.set()
        with anyio.fail_after(10):
            await self.template.both.wait()  # both runs are live at once

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        assert ctx.run_id == self.run_id
        self.requests.append(request.messages[-1].get_text())
        return request


async def test_for_run_gives_concurrent_runs_of_copies_instances_of_their_own() -> None:
    started: list[PerRun] = []
    template_cap = Counting(anyio.Event(), started)
    model = FunctionModel(lambda messages, info: f"echo {messages[-1].get_text()}")
    template = ReActAgent("bot", "sys", model, capabilities=[template_cap])
    one, two = template.copy(), template.copy()
    async with anyio.create_task_group() as tg:
        tg.start_soon(one.run, "first")
        tg.start_soon(two.run, "second")
    assert len(started) == 2 and started[0] is not started[1]
    assert started[0].run_id != started[1].run_id
    assert sorted(r for s in started for r in s.requests) == ["first", "second"]
    assert all(len(s.requests) == 1 for s in started)  # nothing shared
    assert one.capabilities == two.capabilities == (template_cap,)


async def test_a_served_copy_keeps_the_templates_capabilities(tmp_path: Path) -> None:
    class Served(Capability[Any]):
        async def instructions(self, ctx: RunContext[Any]) -> str | None:
            return "Answer in French."

    capability = Served()
    model = ScriptedModel(["Bonjour."])
    template = ReActAgent("helper", "You help.", model, Toolkit(), capabilities=[capability])
    assert template.copy().capabilities == (capability,)
    app = create_app(template, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        body = run_input("t1", user("hello"))
        async with client.stream("POST", "/agui", json=body) as response:
            assert response.status_code == 200
            events = [e async for e in sse_events(response)]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert model.requests[0].messages[0].content == "You help.\n\nAnswer in French."


async def test_a_run_without_capabilities_makes_no_capability_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refuse_capability_points(monkeypatch)
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "Three."])
    agent = ReActAgent("bot", "sys", model, adder())
    assert agent.capabilities == ()
    assert (await agent.run("1+2?")).output == "Three."


async def test_only_the_methods_a_capability_overrides_are_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class OnlyInstructions(Capability[Any]):
        async def instructions(self, ctx: RunContext[Any]) -> str | None:
            return "Be brief."

    agent = ReActAgent(
        "bot", "sys", ScriptedModel(["ok"]), adder(), capabilities=[OnlyInstructions()]
    )

    async def refuse(*args: object) -> Any:
        raise AssertionError("a method that was not overridden was called")

    for name in ("before_run", "before_model", "after_model", "after_run", "on_error"):
        monkeypatch.setattr(Capability, name, refuse)
    assert (await agent.run("hi")).output == "ok"


async def test_an_error_in_a_run_reaches_on_error_and_memory_stays_valid() -> None:
    log: list[str] = []

    def broken(messages: list[Msg], info: Any) -> str:
        raise RuntimeError("provider down")

    agent = ReActAgent("bot", "sys", FunctionModel(broken), capabilities=[Tracer("t", log)])
    with pytest.raises(RuntimeError, match="provider down"):
        await agent.run("hi")
    assert log[-1] == "t:on_error(RuntimeError)"
    assert "t:after_run" not in log
    check_memory_invariant(await agent.memory.get_memory())
    assert not agent.is_replying


def test_capabilities_must_be_capability_instances() -> None:
    with pytest.raises(UsageError, match="Capability"):
        ReActAgent("bot", "sys", ScriptedModel([]), capabilities=[object()])  # type: ignore[list-item]

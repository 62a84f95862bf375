"""``agent.run()`` -> ``RunResult[T]``: output, usage, new messages, deps, ToolRetry,
ApprovalRequired raised by a tool, run_sync and the constructor's checks."""

from __future__ import annotations

import dataclasses

import anyio
import pytest
from pydantic import BaseModel

from agentkit import (
    ApprovalRequired,
    ReActAgent,
    RunResult,
    ToolContext,
    Toolkit,
    ToolRetry,
    UsageError,
)
from agentkit.exceptions import StateError
from agentkit.memory import check_memory_invariant
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, agent_for, checked_memory, results_of


class Trip(BaseModel):
    city: str
    days: int


@dataclasses.dataclass
class Deps:
    user_id: int
    seen: list[str] = dataclasses.field(default_factory=list)


async def test_run_returns_text_output_usage_and_new_messages() -> None:
    model = ScriptedModel([[text("Adding."), tool_use("add", "c1", a=1, b=2)], "The sum is 3."])
    agent = agent_for(model)
    await agent.observe("earlier message")
    result = await agent.run("what is 1+2?")
    assert isinstance(result, RunResult)
    assert result.output == "The sum is 3."
    assert result.stop_reason == "final"
    assert not result.interrupted and result.pending == []
    assert result.reply.get_text() == "The sum is 3."
    assert [m.role for m in result.new_messages] == ["user", "assistant", "user", "assistant"]
    assert result.new_messages[0].get_text() == "what is 1+2?"
    memory = await checked_memory(agent)
    assert memory[1:] == result.new_messages  # the earlier message is not new
    assert result.usage.requests == 2
    assert result.usage.tool_calls == 1
    assert result.usage.output_tokens > 0
    assert result.usage.input_tokens == 0  # the scripted model reports none
    assert result.usage.cost is None  # no response reported a cost: unknown, not 0.0
    assert result.usage.duration > 0


async def test_run_with_output_type_returns_the_validated_instance() -> None:
    model = ScriptedModel(
        [
            tool_use("generate_response", "r1", city="Rome", days="x"),
            tool_use("generate_response", "r2", city="Rome", days=3),
        ]
    )
    agent = agent_for(model)
    result = await agent.run("plan", output_type=Trip)
    assert result.output == Trip(city="Rome", days=3)
    assert isinstance(result.output, Trip)
    assert result.stop_reason == "final"
    assert result.reply.metadata is not None
    assert result.reply.metadata["structured_output"] == {"city": "Rome", "days": 3}


async def test_structured_run_paused_for_approval_has_no_output_then_resumes() -> None:
    model = ScriptedModel(
        [
            [text("Checking."), tool_use("guarded", "g1", label="x")],
            tool_use("generate_response", "r1", city="Oslo", days=2),
        ]
    )
    rec = Recorder()
    agent = agent_for(model, rec)
    paused = await agent.run("plan", output_type=Trip)
    assert paused.stop_reason == "pending_approval"
    assert [(p.id, p.name, p.input) for p in paused.pending] == [("g1", "guarded", {"label": "x"})]
    with pytest.raises(StateError, match="pending_approval"):
        _ = paused.output
    with pytest.raises(UsageError, match="input= to start"):
        await agent.run("again", approvals={"g1": True})
    done = await agent.run(approvals={"g1": True}, output_type=Trip)
    assert done.output == Trip(city="Oslo", days=2)
    assert done.stop_reason == "final" and done.pending == []
    assert rec.calls == {"x": 1}
    assert done.usage.requests == 1 and done.usage.tool_calls == 1
    await checked_memory(agent)


async def test_interrupted_run_reports_it() -> None:
    model = ScriptedModel([[text("Working."), tool_use("sleep", "s1", label="s", seconds=30)]])
    agent = agent_for(model)
    results: list[RunResult] = []

    async def go() -> None:
        results.append(await agent.run("start"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        while not agent.is_replying or model.calls == 0:
            await anyio.sleep(0.005)
        await anyio.sleep(0.02)
        assert await agent.interrupt("stop")
    (result,) = results
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.output == "Working."
    assert [m.get_text() for m in result.new_messages][-1] == "stop"
    memory = await checked_memory(agent)
    assert memory == result.new_messages
    assert results_of(memory)["s1"][1] is True


async def test_deps_reach_tools_typed_and_hidden_from_the_schema() -> None:
    toolkit = Toolkit()

    async def lookup(ctx: ToolContext[Deps], q: str) -> str:
        """Look something up for the current user.

        Args:
            q: The query.
        """
        ctx.deps.seen.append(ctx.call_id)
        assert ctx.tool_name == "lookup"
        assert isinstance(ctx.agent, ReActAgent)
        return f"{ctx.deps.user_id}:{q}"

    toolkit.register_tool_function(lookup)
    (definition,) = toolkit.get_tool_definitions()
    assert set(definition.parameters["properties"]) == {"q"}  # type: ignore[call-overload]
    model = ScriptedModel([tool_use("lookup", "l1", q="tea"), "done"])
    agent = ReActAgent("bot", "sys", model, toolkit)
    deps = Deps(user_id=7)
    result = await agent.run("go", deps=deps)
    assert deps.seen == ["l1"]
    assert results_of(result.new_messages)["l1"] == ("7:tea", False)
    assert "deps" not in str(agent.state_dict())  # never serialized
    # Without deps=, ctx.deps is None.
    model2 = ScriptedModel([tool_use("lookup", "l2", q="x"), "done"])
    agent2 = ReActAgent("bot", "sys", model2, toolkit)
    result2 = await agent2.run("go")
    output, is_error = results_of(result2.new_messages)["l2"]
    assert is_error and "AttributeError" in output


def _retry_toolkit(calls: list[str]) -> Toolkit:
    toolkit = Toolkit()

    def book(date: str) -> str:
        """Book a day.

        Args:
            date: The day.
        """
        calls.append(date)
        if "-" not in date:
            raise ToolRetry("use an ISO date like 2026-01-31")
        return f"booked {date}"

    toolkit.register_tool_function(book)
    return toolkit


async def test_tool_retry_is_shown_to_the_model_which_retries() -> None:
    calls: list[str] = []
    model = ScriptedModel(
        [tool_use("book", "b1", date="tomorrow"), tool_use("book", "b2", date="2026-01-31"), "ok"]
    )
    agent = ReActAgent("bot", "sys", model, _retry_toolkit(calls))
    result = await agent.run("book")
    results = results_of(result.new_messages)
    assert results["b1"] == ("use an ISO date like 2026-01-31", True)
    assert results["b2"] == ("booked 2026-01-31", False)
    assert calls == ["tomorrow", "2026-01-31"]
    # The second request showed the model the retry message.
    second = model.requests[1].messages[-1]
    assert second.get_blocks("tool_result")[0]["output"] == "use an ISO date like 2026-01-31"


async def test_tool_retry_is_bounded_per_tool() -> None:
    calls: list[str] = []
    script = [tool_use("book", f"b{i}", date="soon") for i in range(3)] + ["gave up"]
    agent = ReActAgent(
        "bot", "sys", ScriptedModel(script), _retry_toolkit(calls), max_tool_retries=1
    )
    result = await agent.run("book")
    results = results_of(result.new_messages)
    assert results["b0"] == ("use an ISO date like 2026-01-31", True)
    text1, err1 = results["b1"]
    assert err1 and "more than the 1 allowed" in text1 and "ISO date" in text1
    assert results["b2"][1] and "more than the 1 allowed" in results["b2"][0]
    assert result.output == "gave up"


def _approval_toolkit(effects: list[str]) -> Toolkit:
    toolkit = Toolkit()

    def transfer(ctx: ToolContext, amount: int) -> str:
        """Move money.

        Args:
            amount: How much.
        """
        if amount > 100 and not ctx.tool_call_approved:
            raise ApprovalRequired("large transfer")  # before any side effect
        effects.append(f"sent {amount}")
        return f"sent {amount}"

    toolkit.register_tool_function(transfer)
    return toolkit


async def test_approval_required_raised_by_a_tool_pauses_then_reinvokes() -> None:
    effects: list[str] = []
    model = ScriptedModel(
        [[tool_use("transfer", "t1", amount=5), tool_use("transfer", "t2", amount=500)], "Done."]
    )
    agent = ReActAgent("bot", "sys", model, _approval_toolkit(effects))
    paused = await agent.run("pay")
    assert paused.stop_reason == "pending_approval"
    assert [p.id for p in paused.pending] == ["t2"]
    assert effects == ["sent 5"]  # the small one ran; the large one did nothing yet
    check_memory_invariant(await agent.memory.get_memory(), ["t2"])
    # Survives a save/load, like any pending approval.
    state = agent.state_dict()
    fresh = ReActAgent("bot", "sys", model, _approval_toolkit(effects))
    fresh.load_state_dict(state)
    done = await fresh.run(approvals={"t2": True})
    assert effects == ["sent 5", "sent 500"]
    assert results_of(done.new_messages)["t2"] == ("sent 500", False)
    assert done.output == "Done." and done.stop_reason == "final"


async def test_approval_required_denied_never_runs_the_effect() -> None:
    effects: list[str] = []
    model = ScriptedModel([tool_use("transfer", "t1", amount=500), "Fine."])
    agent = ReActAgent("bot", "sys", model, _approval_toolkit(effects))
    await agent.run("pay")
    done = await agent.run(approvals={"t1": "too much"})
    assert effects == []
    assert results_of(done.new_messages)["t1"] == (
        "The user denied this tool call: too much",
        True,
    )


async def test_approval_required_outside_an_agent_is_an_error_result() -> None:
    effects: list[str] = []
    toolkit = _approval_toolkit(effects)
    response = await toolkit.execute(tool_use("transfer", "t1", amount=500))
    assert response.is_error and response.metadata is not None
    assert response.metadata["error"] == "approval_required"
    assert effects == []


def test_run_sync_and_its_guard() -> None:
    agent = agent_for(ScriptedModel(["hello"]))
    result = agent.run_sync("hi")
    assert result.output == "hello"

    async def inside() -> None:
        with pytest.raises(UsageError, match=r"await agent\.run"):
            agent.run_sync("again")

    anyio.run(inside)


def test_constructor_checks_the_model_and_keyword_arguments() -> None:
    with pytest.raises(UsageError, match=r"ChatModel .* or a 'provider:model' string") as info:
        ReActAgent("bot", "sys", object())  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    agent = ReActAgent("bot", "sys", "ollama:qwen3")
    assert agent.model.model_name == "qwen3"
    assert agent.print_hint is False  # a library does not print by default
    with pytest.raises(TypeError):  # everything after toolkit is keyword-only
        ReActAgent("bot", "sys", ScriptedModel([]), None, None, 3)  # type: ignore[arg-type, call-arg]
    with pytest.raises(UsageError, match="max_iters"):
        ReActAgent("bot", "sys", ScriptedModel([]), max_iters=0)


def test_event_classes_live_in_agentkit_events_only() -> None:
    import agentkit
    import agentkit.agent

    # The round-1 homes (agentkit.TextDelta, agentkit.agent.TextDelta) are gone.
    assert not hasattr(agentkit, "TextDelta")
    assert not hasattr(agentkit.agent, "TextDelta")
    # The top-level name means the exception a tool raises.
    assert issubclass(agentkit.ApprovalRequired, Exception)
    with pytest.raises(AttributeError):
        _ = agentkit.agent.NoSuchThing  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = agentkit.NoSuchThing  # type: ignore[attr-defined]


async def test_deps_travel_into_an_agent_used_as_a_tool() -> None:
    inner_tools = Toolkit()

    async def whoami(ctx: ToolContext[Deps]) -> str:
        """Who is asking."""
        return f"user {ctx.deps.user_id}"

    inner_tools.register_tool_function(whoami)
    inner = ReActAgent(
        "helper", "sys", ScriptedModel([tool_use("whoami", "w1"), "it is 7"]), inner_tools
    )
    outer_tools = Toolkit()
    outer_tools.register_tool(inner.as_tool(description="Asks the helper."))
    (tool_name,) = outer_tools.tools
    outer_model = ScriptedModel([tool_use(tool_name, "h1", task="who?"), "done"])
    outer = ReActAgent("boss", "sys", outer_model, outer_tools)
    result = await outer.run("go", deps=Deps(user_id=7))
    assert result.output == "done"
    inner_results = results_of(await inner.memory.get_memory())
    assert inner_results["w1"] == ("user 7", False)

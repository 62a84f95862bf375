"""Time budgets: ``UsageLimits(max_wall_time=..., model_call_timeout=...)``.

A budget that runs out cuts the run through the interrupt's machinery (cancel scopes): the
hanging tool or model stream is cancelled, memory is repaired (every call answered), and the
run ends like at any other usage limit. The tests hang forever on purpose (events that never
fire) and assert outcomes, never durations: only the budget can end them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

import anyio
import pytest

from agentkit import (
    ReActAgent,
    UsageError,
    UsageLimitExceeded,
    UsageLimits,
    check_memory_invariant,
)
from agentkit.messages import Msg
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest
from agentkit.models._openai import OpenAIChatModel
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._wire_server import Stream, WireServer, openai_chunks

CUT = "Tool call cancelled before it finished: the run reached its usage limit ({})."
BUDGET = 0.2  # seconds: small, since every test here waits for a budget to run out


class Hang:
    """A toolkit whose ``wait`` tool never returns, and which records what it saw."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled: list[str] = []
        self.never = anyio.Event()  # never set
        self.toolkit = Toolkit()

        @self.toolkit.tool
        async def wait(label: str) -> str:
            """Wait for something that never happens.

            Args:
                label: A name for this call.
            """
            self.started.set()
            try:
                await self.never.wait()
            finally:
                self.cancelled.append(label)
            return "unreachable"

        @self.toolkit.tool
        def quick(label: str) -> str:
            """Answer at once.

            Args:
                label: A name for this call.
            """
            return f"quick {label}"


class HangingStream(ChatModel):
    """A streaming model whose answer stops after its first chunk and never ends."""

    def __init__(self) -> None:
        super().__init__("hanging", stream=True)
        self.closed = anyio.Event()
        self.calls = 0

    async def _request(self, request: ModelRequest) -> ChatResponse:
        raise AssertionError("the agent streams from this model")

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        self.calls += 1
        try:
            yield ChatResponse(content=[{"type": "text", "text": "Half an ans"}])
            await anyio.Event().wait()  # the rest never comes
            yield ChatResponse(content=[{"type": "text", "text": "unreachable"}])
        finally:
            self.closed.set()


def _other_tasks(before: set[asyncio.Task[object]]) -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t not in before and not t.done()}


async def _memory(agent: ReActAgent) -> list[Msg]:
    messages = await agent.memory.get_memory()
    check_memory_invariant(messages, [c["id"] for c in agent.pending_tool_calls])
    return messages


def _results(messages: Sequence[Msg]) -> dict[str, object]:
    return {b["id"]: b["output"] for m in messages for b in m.get_blocks("tool_result")}


async def test_wall_time_cuts_a_hanging_tool_and_answers_its_call() -> None:
    hang = Hang()
    model = ScriptedModel([[tool_use("wait", "w1", label="forever")], "next run"])
    agent = ReActAgent("bot", "sys", model, hang.toolkit, print_hint=False)
    before = set(asyncio.all_tasks())
    with anyio.fail_after(10):  # a safety net only: the budget is what ends the run
        result = await agent.run("go", usage_limits=UsageLimits(max_wall_time=BUDGET))
    assert result.stop_reason == "usage_limit" and result.usage_limit == "max_wall_time"
    assert result.reply.metadata is not None
    assert result.reply.metadata["usage_limit"] == "max_wall_time"
    assert "interrupted" not in result.reply.metadata
    assert hang.cancelled == ["forever"]  # the tool was cancelled, not abandoned
    assert _other_tasks(before) == set()
    memory = await _memory(agent)
    assert _results(memory) == {"w1": CUT.format("max_wall_time")}
    assert result.usage.requests == 1 and result.usage.tool_calls == 1
    # The repaired conversation is valid for the next run, which has no budget left over.
    again = await agent.run("again")
    assert again.stop_reason == "final" and again.output == "next run"
    sent = model.requests[1].messages
    assert any(b["id"] == "w1" for m in sent for b in m.get_blocks("tool_result"))


async def test_wall_time_keeps_the_calls_that_finished_before_the_cut() -> None:
    hang = Hang()
    turn = [tool_use("quick", "q1", label="a"), tool_use("wait", "w1", label="b")]
    agent = ReActAgent("bot", "sys", ScriptedModel([turn]), hang.toolkit, print_hint=False)
    with anyio.fail_after(10):
        agent.usage_limits = UsageLimits(max_wall_time=BUDGET)
        reply = await agent("go")  # the AgentScope form: the reply's metadata says it
    assert reply.metadata is not None and reply.metadata["usage_limit"] == "max_wall_time"
    memory = await _memory(agent)
    assert _results(memory) == {"q1": "quick a", "w1": CUT.format("max_wall_time")}


async def test_model_call_timeout_cuts_a_hanging_stream_and_keeps_its_text() -> None:
    model = HangingStream()
    agent = ReActAgent("bot", "sys", model, Toolkit(), print_hint=False)
    before = set(asyncio.all_tasks())
    with anyio.fail_after(10):
        result = await agent.run("talk", usage_limits=UsageLimits(model_call_timeout=BUDGET))
    assert result.stop_reason == "usage_limit" and result.usage_limit == "model_call_timeout"
    assert result.output == "Half an ans"  # what the model said before the cut
    assert model.closed.is_set() and model.calls == 1  # closed, and not retried
    assert _other_tasks(before) == set()
    memory = await _memory(agent)
    assert [(m.role, m.get_text()) for m in memory] == [
        ("user", "talk"),
        ("assistant", "Half an ans"),
    ]
    assert memory[-1].metadata == {"usage_limit": "model_call_timeout"}


async def test_wall_time_cuts_a_hanging_stream_too() -> None:
    model = HangingStream()
    agent = ReActAgent("bot", "sys", model, Toolkit(), print_hint=False)
    with anyio.fail_after(10):
        result = await agent.run("talk", usage_limits=UsageLimits(max_wall_time=BUDGET))
    assert result.stop_reason == "usage_limit" and result.usage_limit == "max_wall_time"
    assert model.closed.is_set()
    await _memory(agent)


async def test_model_call_timeout_leaves_tool_calls_alone() -> None:
    """The per-call bound covers model calls only: a slow tool is the wall time's business."""
    hang = Hang()
    model = ScriptedModel([[tool_use("wait", "w1", label="slow")]])
    agent = ReActAgent("bot", "sys", model, hang.toolkit, print_hint=False)
    limits = UsageLimits(model_call_timeout=BUDGET, max_wall_time=4 * BUDGET)
    with anyio.fail_after(10):
        result = await agent.run("go", usage_limits=limits)
    assert result.usage_limit == "max_wall_time"  # the tool outlived a model call's budget
    assert _results(await _memory(agent)) == {"w1": CUT.format("max_wall_time")}


async def test_a_run_within_its_budgets_is_untouched() -> None:
    model = ScriptedModel([[tool_use("quick", "q1", label="x")], "done"], stream=True)
    agent = ReActAgent("bot", "sys", model, Hang().toolkit, print_hint=False)
    limits = UsageLimits(max_wall_time=30.0, model_call_timeout=30.0)
    result = await agent.run("go", usage_limits=limits)
    assert result.stop_reason == "final" and result.output == "done"
    assert result.usage_limit is None


async def test_raise_on_limit_raises_after_the_repair() -> None:
    hang = Hang()
    model = ScriptedModel([[tool_use("wait", "w1", label="x")]])
    agent = ReActAgent("bot", "sys", model, hang.toolkit, print_hint=False)
    limits = UsageLimits(max_wall_time=BUDGET, raise_on_limit=True)
    with anyio.fail_after(10), pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go", usage_limits=limits)
    assert caught.value.limit == "max_wall_time"
    assert caught.value.result is not None and caught.value.result.stop_reason == "usage_limit"
    assert _results(await _memory(agent)) == {"w1": CUT.format("max_wall_time")}


async def test_an_interrupt_under_a_budget_is_still_an_interrupt() -> None:
    hang = Hang()
    model = ScriptedModel([[tool_use("wait", "w1", label="x")]])
    agent = ReActAgent("bot", "sys", model, hang.toolkit, print_hint=False)
    limits = UsageLimits(max_wall_time=60.0, model_call_timeout=60.0)
    results = []

    async def run() -> None:
        results.append(await agent.run("go", usage_limits=limits))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await hang.started.wait()
            assert await agent.interrupt("stop")
    (result,) = results
    assert result.stop_reason == "interrupted" and result.usage_limit is None
    memory = await _memory(agent)
    assert memory[-1].get_text() == "stop"


async def test_a_call_waiting_for_approval_is_refused_when_the_budget_cuts_its_turn() -> None:
    hang = Hang()

    @hang.toolkit.tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return "paid"

    turn = [tool_use("pay", "p1", amount=3), tool_use("wait", "w1", label="x")]
    agent = ReActAgent("bot", "sys", ScriptedModel([turn]), hang.toolkit, print_hint=False)
    with anyio.fail_after(10):
        result = await agent.run("go", usage_limits=UsageLimits(max_wall_time=BUDGET))
    assert result.stop_reason == "usage_limit" and result.pending == []
    results = _results(await _memory(agent))
    assert results == {
        "p1": "Tool call not run: the run reached its usage limit (max_wall_time).",
        "w1": CUT.format("max_wall_time"),
    }


@pytest.mark.parametrize("field", ["max_wall_time", "model_call_timeout"])
def test_a_negative_time_budget_is_refused(field: str) -> None:
    with pytest.raises(UsageError, match=field):
        UsageLimits(**{field: -1.0})  # type: ignore[arg-type]


async def test_over_the_wire_a_stream_that_stops_mid_answer_is_cut_and_closed() -> None:
    async with WireServer() as server:
        hanging = Stream(
            openai_chunks(text="Partial answer", done=False, usage=None)[:-1], then="hang"
        )
        server.script(hanging)
        model = OpenAIChatModel("gpt-test", api_key="k", base_url=server.openai_url, stream=True)
        agent = ReActAgent("bot", "sys", model, Toolkit(), print_hint=False)
        with anyio.fail_after(10):
            result = await agent.run("talk", usage_limits=UsageLimits(model_call_timeout=1.0))
            await hanging.closed.wait()  # the HTTP stream was closed by the cut
        await model.aclose()
        assert len(server.requests) == 1  # a timed-out call is not retried
    assert result.stop_reason == "usage_limit" and result.usage_limit == "model_call_timeout"
    assert result.output == "Partial answer"
    memory = await _memory(agent)
    assert [m.role for m in memory] == ["user", "assistant"]

"""Context compaction: every request under budget over a long conversation with tool calls,
memory whole, and the same request views after an interrupt and a state round trip."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from agentkit import Msg, ReActAgent, Toolkit, check_memory_invariant
from agentkit.agent._compaction import (
    SUMMARY_HEADER,
    Compactor,
    DropOldest,
    Summarize,
    context_window,
)
from agentkit.models import FallbackModel, OpenAIChatModel
from agentkit.models._base import ChatResponse, ChatUsage, ModelRequest
from agentkit.testing import FunctionModel, ScriptedModel, text, tool_use

WINDOW, RESERVE = 3000, 500
BUDGET = WINDOW - RESERVE
_TOKEN = re.compile(r"\w+|[^\w\s]")


def true_tokens(messages: list[Msg]) -> int:
    """The test's 'provider tokenizer': words and punctuation, not 4 characters a token."""
    total = 0
    for m in messages:
        body = m.content if isinstance(m.content, str) else json.dumps(m.content)
        total += 4 + len(_TOKEN.findall(body))
    return total


def view_of(messages: list[Msg]) -> list[tuple[str, str]]:
    return [
        (m.role, m.content if isinstance(m.content, str) else json.dumps(m.content))
        for m in messages
    ]


class Conversation:
    """A scripted user/model pair: each turn asks for one lookup, then answers."""

    def __init__(self, block_at: int | None = None) -> None:
        self.views: list[list[tuple[str, str]]] = []
        self.tokens: list[int] = []
        self.block_at = block_at
        self.blocked = anyio.Event()

    async def answer(self, messages: list[Msg], tools: Any) -> ChatResponse:
        assert messages[0].role == "system"
        check_memory_invariant(messages[1:])  # pairs whole in every request
        self.views.append(view_of(messages))
        self.tokens.append(true_tokens(messages))
        if self.block_at is not None and len(self.views) == self.block_at:
            self.blocked.set()
            await anyio.sleep_forever()
        last = messages[-1]
        usage = ChatUsage(true_tokens(messages), 12)
        if isinstance(last.content, str):
            k = int(last.content.split()[1].rstrip(":"))
            calls = [tool_use("lookup", f"c{k}", key=f"item{k}")]
            if k % 3 == 0:  # every third turn: two calls in parallel
                calls.append(tool_use("lookup", f"d{k}", key=f"extra{k}"))
            return ChatResponse(calls, usage)
        result = last.get_blocks("tool_result")[0]
        return ChatResponse([text(f"Found it: {str(result['output'])[:40]}")], usage)


def make_toolkit() -> Toolkit:
    tk = Toolkit()

    @tk.tool
    def lookup(key: str) -> str:
        """Look an item up.

        Args:
            key: The item.
        """
        return f"{key}: " + " ".join(f"fact{i} about {key} is value{i}" for i in range(12))

    return tk


def summarizer() -> tuple[FunctionModel, list[int]]:
    calls: list[int] = []

    def summarize(messages: list[Msg], tools: Any) -> ChatResponse:
        calls.append(1)
        body = messages[-1].content
        assert isinstance(body, str)
        turns = re.findall(r"turn (\d+):", body)
        prior = re.findall(r"Earlier summary: (.{0,60})", body)
        summary = f"turns {turns[0]}-{turns[-1]} looked up" if turns else "tool results"
        return ChatResponse([text(summary + (f"; before: {prior[0]}" if prior else ""))])

    return FunctionModel(summarize, model_name="cheap"), calls


def make_agent(conv: Conversation, strategy: Any) -> ReActAgent:
    model = FunctionModel(conv.answer, model_name="big")
    compactor = Compactor(WINDOW, strategy=strategy, reserve_output=RESERVE)
    return ReActAgent(
        "helper", "You look things up.", model, make_toolkit(), capabilities=[compactor]
    )


async def _turns(agent: ReActAgent, first: int, last: int) -> None:
    for k in range(first, last + 1):
        await agent(f"turn {k}: please look up item{k}")
        memory = await agent.memory.get_memory()
        check_memory_invariant(memory)
        assert len(memory) == 4 * k  # the full history stays in memory


async def test_500_turns_with_tool_calls_stay_under_budget() -> None:
    conv = Conversation()
    agent = make_agent(conv, DropOldest())
    await _turns(agent, 1, 500)
    assert len(conv.tokens) == 1000
    assert max(conv.tokens) <= BUDGET
    assert sum(conv.tokens) / len(conv.tokens) > BUDGET * 0.3  # the budget is really used
    memory = await agent.memory.get_memory()
    records = [
        m.metadata["compaction"] for m in memory if m.metadata and "compaction" in m.metadata
    ]
    assert len(records) == 1000
    compactions = [r for r in records if "summary" in r]
    assert 10 < len(compactions) < 200  # compacts now and then, not at every request
    json.dumps(agent.state_dict())  # records are JSON-safe


async def test_summaries_join_the_system_prompt_and_stay_under_budget() -> None:
    conv = Conversation()
    model, calls = summarizer()
    agent = make_agent(conv, Summarize(model, summary_tokens=150))
    await _turns(agent, 1, 150)
    assert max(conv.tokens) <= BUDGET
    assert calls
    last_view = conv.views[-1]
    assert last_view[0][0] == "system" and SUMMARY_HEADER in last_view[0][1]
    assert "looked up" in last_view[0][1]


@pytest.mark.parametrize("strategy", ["drop", "summarize"])
async def test_interrupted_then_resumed_run_sends_the_same_views(strategy: str) -> None:
    def make_strategy() -> Any:
        return DropOldest() if strategy == "drop" else Summarize(summarizer()[0], 150)

    turns, block_at = 90, 117  # request 117: turn 59's first request
    reference = Conversation()
    await _turns(make_agent(reference, make_strategy()), 1, turns)

    first = Conversation(block_at=block_at)
    agent = make_agent(first, make_strategy())
    await _turns(agent, 1, 58)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "turn 59: please look up item59")
        await first.blocked.wait()
        assert await agent.interrupt()
    state = json.loads(json.dumps(agent.state_dict()))  # a saved session

    resumed = Conversation()
    agent2 = make_agent(resumed, make_strategy())  # a new process: new compactor, no caches
    agent2.load_state_dict(state)
    await agent2()  # continue turn 59 from memory
    for k in range(60, turns + 1):
        await agent2(f"turn {k}: please look up item{k}")
    assert first.views == reference.views[:block_at]
    assert resumed.views == reference.views[block_at - 1 :]
    check_memory_invariant(await agent2.memory.get_memory())


async def test_recorded_summary_is_reused_after_a_state_round_trip() -> None:
    conv = Conversation()
    model, calls = summarizer()
    agent = make_agent(conv, Summarize(model, summary_tokens=150))
    states: dict[int, dict[str, Any]] = {}
    turn = 0
    while True:  # find a turn, after some compactions, that needs no new one
        turn += 1
        states[turn] = agent.state_dict()
        await agent(f"turn {turn}: please look up item{turn}")
        answers = (await agent.memory.get_memory())[-3::2]
        compacted = any("summary" in m.metadata["compaction"] for m in answers)  # type: ignore[index]
        if turn > 20 and calls and not compacted:
            break
    assert SUMMARY_HEADER in conv.views[-1][0][1]
    model2, calls2 = summarizer()
    conv2 = Conversation()
    agent2 = make_agent(conv2, Summarize(model2, summary_tokens=150))
    agent2.load_state_dict(states[turn])
    await agent2(f"turn {turn}: please look up item{turn}")
    assert conv2.views == conv.views[-2:]  # the recorded summary, in the same place
    assert calls2 == []  # read from the saved state: the summarizer is not asked again


async def test_without_a_compactor_the_prompt_is_untouched() -> None:
    model = ScriptedModel(["hi"])
    agent = ReActAgent("a", "s", model, print_hint=False)
    assert agent.capabilities == ()
    await agent("hello")
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]
    assert "compaction" not in ((await agent.memory.get_memory())[-1].metadata or {})


def test_context_window_lookup_and_errors() -> None:
    gpt = OpenAIChatModel("gpt-4o-2024-08-06", api_key="k")
    assert context_window(gpt) == 128_000
    assert context_window(OpenAIChatModel("my-llama", api_key="k")) is None
    both = FallbackModel([gpt, OpenAIChatModel("gpt-4.1", api_key="k")])
    assert context_window(both) == 128_000
    with pytest.raises(ValueError, match="context window"):
        Compactor().budget(OpenAIChatModel("my-llama", api_key="k"))
    assert Compactor().budget(gpt) == 128_000 - 4096
    with pytest.raises(ValueError):
        Compactor(100, reserve_output=200)


async def test_compaction_is_an_event_on_the_reply_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentkit.observability import instrument, uninstrument

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    conv = Conversation()
    agent = make_agent(conv, DropOldest())
    instrument(tracer_provider=provider)
    try:
        await _turns(agent, 1, 30)
    finally:
        uninstrument()
    events = [
        e
        for s in exporter.get_finished_spans()
        if s.name == "invoke_agent helper"
        for e in s.events
    ]
    assert events and all(e.name == "agentkit.compaction" for e in events)
    first = events[0].attributes or {}
    assert first["agentkit.compaction.left_out"] > 0
    assert first["agentkit.compaction.summarized"] is False


async def test_memory_edited_under_the_records_still_compacts() -> None:
    conv = Conversation()
    agent = make_agent(conv, DropOldest())
    await _turns(agent, 1, 40)
    await agent.memory.delete(list(range(120)))  # the recorded cut points are gone
    await agent("turn 41: please look up item41")
    assert max(conv.tokens) <= BUDGET
    check_memory_invariant(await agent.memory.get_memory())


async def test_images_count_as_images_not_as_their_base64_text() -> None:
    """A screenshot is about a thousand tokens to a provider, whatever its size in base64.

    Counted as text (4 characters a token) a 300 KB image looked like 100k tokens: the view
    left the whole conversation out after one screenshot, while a URL image counted as a
    few tokens.
    """
    import base64
    import os

    from agentkit.agent._compaction import estimate_tokens
    from agentkit.messages import image_block

    png = base64.b64encode(os.urandom(300_000)).decode()
    inline = Msg("user", [text("look"), image_block(base64.b64decode(png), "image/png")], "user")
    by_url = Msg("user", [text("look"), image_block("https://example.com/a.png")], "user")
    for msg in (inline, by_url):
        assert 500 <= estimate_tokens(msg) <= 3000
    # In a tool result too (a browser screenshot).
    shot = Msg(
        "user",
        [{"type": "tool_result", "id": "c1", "name": "shot", "output": inline.content}],
        "user",
    )
    assert estimate_tokens(shot) <= 3000

    sizes: list[int] = []

    def answer(messages: list[Msg], tools: Any) -> ChatResponse:
        sizes.append(len(messages))
        return ChatResponse([text("ok")], ChatUsage(sum(map(estimate_tokens, messages)), 2))

    compactor = Compactor(20_000, reserve_output=1000)
    agent = ReActAgent("a", "s", FunctionModel(answer, model_name="m"), capabilities=[compactor])
    for k in range(3):
        await agent(f"question {k}")
    await agent(inline)
    await agent("and the first question?")
    assert sizes == [2, 4, 6, 8, 10]  # nothing needed leaving out


async def test_a_failing_summarizer_leaves_out_without_failing_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The summarizer's outage must not stop the agent (every later request would fail)."""
    from agentkit.exceptions import RateLimitError

    inner, calls = summarizer()
    failures: list[int] = []

    async def flaky(messages: list[Msg], tools: Any) -> ChatResponse:
        if len(calls) >= 1 and len(failures) < 2:  # the second and third summaries fail
            failures.append(1)
            raise RateLimitError("summarizer rate limited", provider="cheap")
        return await inner.request(ModelRequest(messages))

    conv = Conversation()
    agent = make_agent(conv, Summarize(FunctionModel(flaky, model_name="cheap"), 150))
    with caplog.at_level("INFO", logger="agentkit"):
        await _turns(agent, 1, 150)
    assert len(failures) == 2 and len(calls) > 1  # summaries resumed after the outage
    assert max(conv.tokens) <= BUDGET
    # Through the outage, the summary made before it stayed in the system prompt.
    first = next(i for i, view in enumerate(conv.views) if SUMMARY_HEADER in view[0][1])
    assert all(SUMMARY_HEADER in view[0][1] for view in conv.views[first:])
    assert "summarizer rate limited" in caplog.text
    json.dumps(agent.state_dict())


async def test_a_system_prompt_over_the_budget_is_a_clear_error_before_any_request() -> None:
    from agentkit.exceptions import ContextWindowError

    model = ScriptedModel(["never"])
    agent = ReActAgent(
        "a", "word " * 5000, model, capabilities=[Compactor(2000, reserve_output=500)]
    )
    for _ in range(2):
        with pytest.raises(ContextWindowError, match="system prompt"):
            await agent("hi")
    assert model.calls == 0
    check_memory_invariant(await agent.memory.get_memory())
    assert not agent.is_replying


async def test_the_summarizers_tokens_and_cost_are_the_runs() -> None:
    """What the summaries cost is part of what the run cost (and of its limits)."""
    summaries: list[int] = []
    answers: list[ChatUsage] = []

    def summarize(messages: list[Msg], tools: Any) -> ChatResponse:
        summaries.append(1)
        return ChatResponse([text("a summary")], ChatUsage(100, 10, cost=0.5))

    conv = Conversation()

    async def answer(messages: list[Msg], tools: Any) -> ChatResponse:
        out = await conv.answer(messages, tools)
        assert out.usage is not None
        out.usage.cost = 0.001
        answers.append(out.usage)
        return out

    model = FunctionModel(answer, model_name="big")
    cheap = FunctionModel(summarize, model_name="cheap")
    compactor = Compactor(WINDOW, strategy=Summarize(cheap, 150), reserve_output=RESERVE)
    agent = ReActAgent(
        "helper", "You look things up.", model, make_toolkit(), capabilities=[compactor]
    )
    checked = 0
    for k in range(1, 80):
        before_s, before_a = len(summaries), len(answers)
        result = await agent.run(f"turn {k}: please look up item{k}")
        made = len(summaries) - before_s
        mine = answers[before_a:]
        assert result.usage.input_tokens == sum(u.input_tokens for u in mine) + 100 * made
        assert result.usage.output_tokens == sum(u.output_tokens for u in mine) + 10 * made
        assert result.usage.cost == pytest.approx(0.001 * len(mine) + 0.5 * made)
        assert result.usage.requests == len(mine)  # the agent's own requests
        assert result.usage.models == {"big": len(mine)}
        checked += made
    assert checked > 0


async def test_a_turn_too_big_for_the_budget_keeps_its_question() -> None:
    """When even the latest turn alone is over budget, cutting inside it only loses the
    user's question (the request stays over budget): the view keeps the whole turn."""
    views: list[list[Msg]] = []

    def answer(messages: list[Msg], tools: Any) -> ChatResponse:
        views.append(messages)
        if isinstance(messages[-1].content, str) and "read" in messages[-1].content:
            return ChatResponse([tool_use("read", "r1")], ChatUsage(100, 5))
        return ChatResponse([text("ok")], ChatUsage(100, 5))

    tk = Toolkit()

    @tk.tool
    def read() -> str:
        """Read the big file."""
        return "data " * 4000

    compactor = Compactor(WINDOW, reserve_output=RESERVE)
    agent = ReActAgent(
        "a", "s", FunctionModel(answer, model_name="m"), tk, capabilities=[compactor]
    )
    await agent("hello")
    await agent("please read the file")
    last = views[-1]
    assert [m.role for m in last] == ["system", "user", "assistant", "user"]
    assert last[1].content == "please read the file"  # the question, not a placeholder
    check_memory_invariant(await agent.memory.get_memory())
    # Also when the view already starts with that turn (recorded by an earlier request).
    await agent("please read the file again")
    assert views[-1][1].content == "please read the file again"
    assert [m.role for m in views[-1]] == ["system", "user", "assistant", "user"]

"""Adversarial QA of the model adapters: conversations that move between providers."""

from __future__ import annotations

import re

from _agent_helpers import agent_for, checked_memory
from _wire_server import Reply, Stream, WireServer, anthropic_message, openai_chunks

from agentkit.models._anthropic import AnthropicChatModel
from agentkit.models._openai import OpenAIChatModel
from agentkit.testing import ScriptedModel, tool_use

_ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]+")


async def test_foreign_call_ids_are_made_valid_for_anthropic_and_stay_paired() -> None:
    # Some OpenAI-compatible servers issue ids like "functions.add:0"; Anthropic rejects any
    # id outside [A-Za-z0-9_-] with a 400 on every later request of the conversation.
    odd = ["functions.add:0", "functions.add_0", "call 1", "toolu_ok-1"]
    calls = [tool_use("add", i, a=n, b=1) for n, i in enumerate(odd)]
    agent = agent_for(ScriptedModel([calls, "done"]))
    await agent("add")
    await checked_memory(agent)
    async with WireServer() as server:
        server.script(Reply(json=anthropic_message([{"type": "text", "text": "ok"}])))
        model = AnthropicChatModel(
            "claude", api_key="k", base_url=server.anthropic_url, stream=False, max_retries=0
        )
        agent.model = model
        try:
            assert (await agent("and now?")).get_text() == "ok"
        finally:
            await model.aclose()
        turns = server.requests[0].json["messages"]
    uses = [b["id"] for t in turns for b in t["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for t in turns for b in t["content"] if b["type"] == "tool_result"]
    assert all(_ANTHROPIC_ID.fullmatch(i) for i in uses)
    assert len(set(uses)) == len(odd)  # "functions.add:0" and "functions.add_0" stay apart
    assert results == uses  # each result still names its call
    assert "toolu_ok-1" in uses  # a valid id is sent unchanged


async def test_truncated_answer_is_visible_and_cut_arguments_say_why() -> None:
    # finish_reason "length": the answer was cut at max_tokens. The reply says so, and a
    # tool call whose arguments were cut tells the model to make them shorter, not to
    # resend the same thing (which would be cut again).
    cut_call = openai_chunks(tool_calls=[("c1", "add", '{"a": 1, "b"')], finish_reason="length")
    async with WireServer() as server:
        server.script(
            Stream(cut_call),
            Stream(openai_chunks(text="a long answer that was cu", finish_reason="length")),
        )
        model = OpenAIChatModel(
            "gpt", api_key="k", base_url=server.openai_url, stream=True, max_retries=0
        )
        agent = agent_for(model)
        try:
            reply = await agent("go")
        finally:
            await model.aclose()
        sent = server.requests[1].json["messages"]
    assert reply.metadata["finish_reason"] == "length"
    assert "output token limit" in sent[-1]["content"]
    assert sent[-1]["tool_call_id"] == "c1"
    await checked_memory(agent)


async def test_normal_answer_reports_its_finish_reason() -> None:
    async with WireServer() as server:
        server.script(Reply(json=anthropic_message([{"type": "text", "text": "hi"}])))
        model = AnthropicChatModel(
            "claude", api_key="k", base_url=server.anthropic_url, stream=False, max_retries=0
        )
        agent = agent_for(model)
        try:
            reply = await agent("hello")
        finally:
            await model.aclose()
    assert reply.metadata["finish_reason"] == "end_turn"

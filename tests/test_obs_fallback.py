"""FallbackModel over the wire test server with the real SDKs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _model_calls import ask
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_error,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import Msg, ReActAgent
from agentkit.exceptions import AuthenticationError, RateLimitError
from agentkit.models import AnthropicChatModel, FallbackModel, OpenAIChatModel, RetryPolicy
from agentkit.observability import instrument, uninstrument

FAST = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.001)


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


def _pair(server: WireServer, stream: bool = False) -> FallbackModel:
    primary = OpenAIChatModel(
        "gpt-primary", api_key="k", base_url=server.openai_url, stream=stream, retry=FAST
    )
    secondary = AnthropicChatModel(
        "claude-secondary", api_key="k", base_url=server.anthropic_url, stream=stream, retry=FAST
    )
    return FallbackModel([primary, secondary])


async def test_429_on_primary_then_the_secondary_answers(server: WireServer) -> None:
    server.script(
        openai_error(429, "rate limited", "rate_limit_exceeded"),
        openai_error(429, "rate limited", "rate_limit_exceeded"),  # the primary's retry
        Reply(json=anthropic_message([{"type": "text", "text": "from the secondary"}])),
    )
    model = _pair(server)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(tracer_provider=provider)
    try:
        reply = await ReActAgent("a", "s", model, print_hint=False)("hello")
    finally:
        uninstrument()
        await model.aclose()
    assert reply.get_text() == "from the secondary"
    paths = [r.path for r in server.requests]
    assert paths == ["/v1/chat/completions", "/v1/chat/completions", "/v1/messages"]
    assert model.last_model is model.models[1]
    chat = next(s for s in exporter.get_finished_spans() if s.name == "chat gpt-primary")
    assert chat.attributes["gen_ai.response.model"] == "claude-secondary"  # type: ignore[index]
    [event] = chat.events
    assert event.name == "agentkit.fallback"
    assert event.attributes == {
        "gen_ai.request.model": "gpt-primary",
        "error.type": "RateLimitError",
    }


async def test_direct_call_marks_the_model_on_the_response(server: WireServer) -> None:
    server.script(
        openai_error(429, "slow down"),
        openai_error(429, "slow down"),
        Reply(json=anthropic_message([{"type": "text", "text": "ok"}])),
        Reply(json=openai_completion(text="primary again")),
    )
    model = _pair(server)
    try:
        response = await ask(model, [Msg("user", "hi", "user")])
        assert response.metadata == {  # type: ignore[union-attr]
            "finish_reason": "end_turn",
            "model": "claude-secondary",
            "fallback_from": ["gpt-primary"],
        }
        again = await ask(model, [Msg("user", "hi", "user")])  # the primary is asked first again
        assert again.metadata["model"] == "gpt-primary"  # type: ignore[union-attr,index]
        assert "fallback_from" not in again.metadata  # type: ignore[union-attr,operator]
    finally:
        await model.aclose()


async def test_streaming_falls_back_before_the_first_chunk(server: WireServer) -> None:
    server.script(
        openai_error(429, "slow down"),
        openai_error(429, "slow down"),
        Stream(anthropic_stream([{"type": "text", "text": "streamed"}])),
    )
    model = _pair(server, stream=True)
    try:
        reply = await ReActAgent("a", "s", model, print_hint=False)("hello")
    finally:
        await model.aclose()
    assert reply.get_text() == "streamed"


async def test_errors_outside_on_propagate_at_once(server: WireServer) -> None:
    server.script(openai_error(401, "bad key"))
    primary = OpenAIChatModel("p", api_key="k", base_url=server.openai_url, retry=FAST)
    secondary = OpenAIChatModel("s", api_key="k", base_url=server.openai_url, retry=FAST)
    model = FallbackModel([primary, secondary], on=(RateLimitError,))
    try:
        with pytest.raises(AuthenticationError):
            await ask(model, [Msg("user", "hi", "user")])
    finally:
        await model.aclose()
    assert len(server.requests) == 1


async def test_all_failing_raises_the_last_error(server: WireServer) -> None:
    server.script(*[openai_error(429, f"no {i}") for i in range(4)])
    primary = OpenAIChatModel("p", api_key="k", base_url=server.openai_url, retry=FAST)
    secondary = OpenAIChatModel("s", api_key="k", base_url=server.openai_url, retry=FAST)
    model = FallbackModel([primary, secondary])
    try:
        with pytest.raises(RateLimitError, match="no 3"):
            await ask(model, [Msg("user", "hi", "user")])
    finally:
        await model.aclose()
    assert len(server.requests) == 4


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one"):
        FallbackModel([])
    with pytest.raises(TypeError):
        FallbackModel([OpenAIChatModel("p", api_key="k")], on=())


async def test_the_model_that_answered_is_on_the_result_and_the_agent_span(
    server: WireServer,
) -> None:
    server.script(
        openai_error(429, "rate limited", "rate_limit_exceeded"),
        openai_error(429, "rate limited", "rate_limit_exceeded"),
        Reply(json=anthropic_message([{"type": "text", "text": "from the secondary"}])),
        Reply(json=openai_completion(text="the primary is back")),
    )
    model = _pair(server)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(tracer_provider=provider)
    agent = ReActAgent("a", "s", model, print_hint=False)
    try:
        first = await agent.run("hello")
        second = await agent.run("again")
    finally:
        uninstrument()
        await model.aclose()
    assert first.model_name == "claude-secondary"
    assert first.usage.models == {"claude-secondary": 1}
    assert first.reply.metadata is not None and first.reply.metadata["model"] == "claude-secondary"
    assert second.model_name == "gpt-primary" and second.usage.models == {"gpt-primary": 1}
    runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent a"]
    assert [s.attributes["gen_ai.response.model"] for s in runs] == [  # type: ignore[index]
        "claude-secondary",
        "gpt-primary",
    ]
    assert runs[0].attributes["agentkit.models"] == ("claude-secondary",)  # type: ignore[index]


async def test_a_plain_model_is_named_too() -> None:
    from agentkit.testing import ScriptedModel, tool_use

    model = ScriptedModel([[tool_use("nothing", "c1")], "done"])
    result = await ReActAgent("a", "s", model, print_hint=False).run("go")
    assert result.model_name == "scripted" and result.usage.models == {"scripted": 2}
    assert result.usage.copy().models == {"scripted": 2}

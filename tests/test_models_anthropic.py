"""AnthropicChatModel against a local wire-compatible server, through the real anthropic SDK."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _model_calls import ask
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    sse,
)
from pydantic import BaseModel

from agentkit.exceptions import (
    AuthenticationError,
    ContextWindowError,
    ModelAPIError,
    ModelConnectionError,
    RateLimitError,
)
from agentkit.messages import Msg
from agentkit.models import AnthropicChatModel, ChatResponse, RetryPolicy

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)
USER = [Msg("user", "hello", "user")]


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


@pytest.fixture
async def model(server: WireServer) -> AsyncIterator[AnthropicChatModel]:
    m = AnthropicChatModel(
        "claude-test",
        api_key="sk-ant",
        base_url=server.anthropic_url,
        stream=False,
        max_tokens=512,
        retry=FAST,
    )
    yield m
    await m.aclose()


async def collect(output: Any, into: list[ChatResponse] | None = None) -> list[ChatResponse]:
    chunks = [] if into is None else into
    async for chunk in output:
        chunks.append(chunk)
    return chunks


async def test_text_non_streaming(model: AnthropicChatModel, server: WireServer) -> None:
    server.script(Reply(json=anthropic_message([{"type": "text", "text": "Hi!"}], usage=(20, 2))))
    response = await ask(model, [Msg("sys", "Be brief.", "system"), *USER])
    assert response.content == [{"type": "text", "text": "Hi!"}]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 2)
    assert response.metadata == {"finish_reason": "end_turn"}
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert "anthropic-version" in request.headers
    assert request.json == {
        "model": "claude-test",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
    }


async def test_streaming_thinking_text_and_parallel_tools(
    model: AnthropicChatModel, server: WireServer
) -> None:
    model.stream = True
    blocks = [
        {"type": "thinking", "thinking": "I should call two tools.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "Let me check."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "weather",
            "input": {"city": "Oslo", "days": 3},
        },
        {"type": "tool_use", "id": "toolu_2", "name": "ping", "raw": ""},
    ]
    server.script(Stream(anthropic_stream(blocks, parts=8, usage=(30, 17))))
    chunks = await collect(await ask(model, USER))
    final = chunks[-1]
    assert final.content == [
        {"type": "thinking", "thinking": "I should call two tools.", "signature": "sig-1"},
        {"type": "thinking", "thinking": "", "redacted_data": "opaque=="},
        {"type": "text", "text": "Let me check."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "weather",
            "input": {"city": "Oslo", "days": 3},
        },
        {"type": "tool_use", "id": "toolu_2", "name": "ping", "input": {}},
    ]
    assert final.usage is not None and (final.usage.input_tokens, final.usage.output_tokens) == (
        30,
        17,
    )
    assert final.metadata == {"finish_reason": "tool_use"}
    assert final.id == "msg_1"
    thoughts = [
        c.content[0]["thinking"] for c in chunks if c.content and c.content[0]["type"] == "thinking"
    ]
    assert len(set(thoughts)) >= 4 and all(b.startswith(a) for a, b in itertools.pairwise(thoughts))
    # an empty-input tool is "not yet complete" until its block stops
    ping = [b for c in chunks[:-1] for b in c.tool_calls if b["name"] == "ping"]
    assert ping[0].get("raw_input") == "" and ping[-1] == {
        "type": "tool_use",
        "id": "toolu_2",
        "name": "ping",
        "input": {},
    }


async def test_tool_arguments_split_over_many_chunks(
    model: AnthropicChatModel, server: WireServer
) -> None:
    model.stream = True
    args = {"query": "ß" * 40, "filters": {"a": [1, 2], "b": "}{"}}
    raw = json.dumps(args)
    server.script(
        Stream(
            anthropic_stream(
                [{"type": "tool_use", "id": "t1", "name": "search", "raw": raw}], parts=len(raw)
            )
        )
    )
    chunks = await collect(await ask(model, USER))
    raws = [
        c.tool_calls[0]["raw_input"]
        for c in chunks
        if c.tool_calls and "raw_input" in c.tool_calls[0]
    ]
    assert len(raws) > 40 and all(b.startswith(a) for a, b in itertools.pairwise(raws))
    assert chunks[-1].tool_calls == [
        {"type": "tool_use", "id": "t1", "name": "search", "input": args}
    ]


async def test_malformed_tool_json_kept_raw(model: AnthropicChatModel, server: WireServer) -> None:
    model.stream = True
    server.script(
        Stream(
            anthropic_stream([{"type": "tool_use", "id": "t1", "name": "f", "raw": '{"a": tru'}])
        )
    )
    chunks = await collect(await ask(model, USER))
    assert chunks[-1].tool_calls == [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}, "raw_input": '{"a": tru'}
    ]


async def test_429_then_success_honours_retry_after(
    model: AnthropicChatModel, server: WireServer
) -> None:
    server.script(
        anthropic_error(429, "Number of requests exceeded", "rate_limit_error", retry_after="0.15"),
        Reply(json=anthropic_message([{"type": "text", "text": "ok"}])),
    )
    started = time.perf_counter()
    response = await ask(model, USER)
    assert time.perf_counter() - started >= 0.14
    assert response.get_text() == "ok" and len(server.requests) == 2


async def test_overloaded_529_retried_then_rate_limit_error(
    model: AnthropicChatModel, server: WireServer
) -> None:
    server.script(*[anthropic_error(529, "Overloaded", "overloaded_error") for _ in range(3)])
    with pytest.raises(RateLimitError, match="Overloaded") as info:
        await ask(model, USER)
    assert info.value.status_code == 529 and len(server.requests) == 3


async def test_500_gives_up(model: AnthropicChatModel, server: WireServer) -> None:
    server.script(*[anthropic_error(500, "Internal server error", "api_error") for _ in range(3)])
    with pytest.raises(ModelAPIError, match="Internal server error"):
        await ask(model, USER)
    assert len(server.requests) == 3


async def test_401_not_retried_and_context_window(
    model: AnthropicChatModel, server: WireServer
) -> None:
    server.script(
        anthropic_error(401, "invalid x-api-key", "authentication_error"),
        anthropic_error(400, "prompt is too long: 210000 tokens > 200000 maximum"),
    )
    with pytest.raises(AuthenticationError, match="invalid x-api-key"):
        await ask(model, USER)
    assert len(server.requests) == 1
    with pytest.raises(ContextWindowError, match="prompt is too long"):
        await ask(model, USER)


async def test_error_event_mid_stream(model: AnthropicChatModel, server: WireServer) -> None:
    model.stream = True
    events = anthropic_stream([{"type": "text", "text": "partial answer"}], stop=False)[:4]
    events.append(
        sse(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        )
    )
    server.script(Stream(events))
    with pytest.raises(RateLimitError, match="Overloaded"):
        await collect(await ask(model, USER))


async def test_stream_cut_midway(model: AnthropicChatModel, server: WireServer) -> None:
    model.stream = True
    server.script(
        Stream(
            anthropic_stream([{"type": "text", "text": "cut here please"}], parts=5)[:5], then="cut"
        )
    )
    received: list[ChatResponse] = []
    with pytest.raises(ModelConnectionError):
        await collect(await ask(model, USER), into=received)
    assert received and len(server.requests) == 1


async def test_cancellation_mid_stream_releases_connection(
    model: AnthropicChatModel, server: WireServer
) -> None:
    model.stream = True
    stream = Stream(
        anthropic_stream([{"type": "text", "text": "endless"}], stop=False)[:4], then="hang"
    )
    server.script(stream)
    got_chunk = asyncio.Event()

    async def consume() -> None:
        async for _ in await ask(model, USER):
            got_chunk.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_chunk.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The server never ends this body: only the client giving the connection up closes it.
    await asyncio.wait_for(stream.closed.wait(), 10)
    assert stream.closed_at is not None


async def test_consecutive_streams_reuse_one_connection(
    model: AnthropicChatModel, server: WireServer
) -> None:
    # The chunked terminator comes after ``message_stop`` in a separate write: the adapter
    # must read it so that the keep-alive connection goes back to the pool.
    model.stream = True
    for text in ("one", "two", "three"):
        server.script(Stream(anthropic_stream([{"type": "text", "text": text}])))
    for text in ("one", "two", "three"):
        chunks = await collect(await ask(model, USER))
        assert chunks[-1].get_text() == text
    assert len(server.requests) == 3
    assert server.connections == 1


async def test_multi_turn_request_body_is_exact(
    model: AnthropicChatModel, server: WireServer
) -> None:
    server.script(Reply(json=anthropic_message([{"type": "text", "text": "ok"}])))
    history = [
        Msg("system", "You are terse.", "system"),
        Msg(
            "user",
            [
                {"type": "text", "text": "Weather?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
            "user",
        ),
        Msg(
            "assistant",
            [
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "thinking", "thinking": "", "redacted_data": "xyz"},
                {"type": "thinking", "thinking": "unsigned, from another provider"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "t2", "name": "bad", "input": {}, "raw_input": "{oops"},
            ],
            "assistant",
        ),
        Msg(
            "tools",
            [
                {
                    "type": "tool_result",
                    "id": "t1",
                    "name": "weather",
                    "output": [
                        {"type": "text", "text": "-3 C"},
                        {"type": "image", "source": {"type": "url", "url": "https://x/map.png"}},
                    ],
                }
            ],
            "user",
        ),
        Msg(
            "tools",
            [
                {
                    "type": "tool_result",
                    "id": "t2",
                    "name": "bad",
                    "output": "invalid JSON",
                    "is_error": True,
                }
            ],
            "assistant",
        ),
        Msg("user", "Thanks", "user"),
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Get weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    await ask(model, history, tools=tools, tool_choice="required", parallel_tool_calls=False)
    assert server.requests[0].json == {
        "model": "claude-test",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xyz"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
                    {"type": "tool_use", "id": "t2", "name": "bad", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "-3 C"},
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "https://x/map.png"},
                            },
                        ],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": "invalid JSON",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Thanks"},
                ],
            },
        ],
        "tools": [
            {
                "name": "weather",
                "description": "Get weather",
                "input_schema": tools[0]["function"]["parameters"],
            }
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    }


class Answer(BaseModel):
    city: str
    temperature: float


async def test_structured_output_via_output_config_json_schema(
    model: AnthropicChatModel, server: WireServer
) -> None:
    model.stream = True
    answer = {"type": "text", "text": '{"city": "Oslo", "temperature": -3}'}
    server.script(Stream(anthropic_stream([answer])))
    chunks = await collect(await ask(model, USER, output=Answer))
    final = chunks[-1]
    assert final.metadata["structured_output"] == {"city": "Oslo", "temperature": -3.0}
    assert final.tool_calls == []
    body = server.requests[0].json
    schema = {**Answer.model_json_schema(), "additionalProperties": False}
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert "tools" not in body and "tool_choice" not in body


async def test_thinking_config_is_sent(server: WireServer) -> None:
    model = AnthropicChatModel(
        "c",
        api_key="k",
        base_url=server.anthropic_url,
        stream=False,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    server.script(Reply(json=anthropic_message([{"type": "text", "text": "ok"}])))
    await ask(model, USER, output=Answer)
    body = server.requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    # Structured outputs work with thinking (no forced tool, which thinking forbids).
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert "tool_choice" not in body
    await model.aclose()


async def test_missing_credentials_is_authentication_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_IDENTITY_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    model = AnthropicChatModel("c", base_url="http://127.0.0.1:9")
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        await ask(model, USER)

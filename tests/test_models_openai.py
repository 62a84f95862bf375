"""OpenAIChatModel against a local wire-compatible server, through the real openai SDK."""

from __future__ import annotations

import asyncio
import contextlib
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
    openai_chunks,
    openai_completion,
    openai_error,
)
from pydantic import BaseModel

from agentkit.exceptions import (
    AuthenticationError,
    BadRequestError,
    ContextWindowError,
    ModelAPIError,
    ModelConnectionError,
    RateLimitError,
)
from agentkit.messages import Msg
from agentkit.models import ChatResponse, OpenAIChatModel, RetryPolicy

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


@pytest.fixture
async def model(server: WireServer) -> AsyncIterator[OpenAIChatModel]:
    m = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=server.openai_url, stream=False, retry=FAST
    )
    yield m
    await m.aclose()


async def collect(output: Any, into: list[ChatResponse] | None = None) -> list[ChatResponse]:
    chunks = [] if into is None else into
    async for chunk in output:
        chunks.append(chunk)
    return chunks


USER = [Msg("user", "hello", "user")]


async def test_text_non_streaming(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(Reply(json=openai_completion(text="Hi there", usage=(12, 3))))
    response = await ask(model, USER)
    assert isinstance(response, ChatResponse)
    assert response.content == [{"type": "text", "text": "Hi there"}]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.time > 0
    assert response.metadata == {"finish_reason": "stop"}
    assert response.id == "chatcmpl-1"
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json == {"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}]}


async def test_text_streaming_is_cumulative(model: OpenAIChatModel, server: WireServer) -> None:
    model.stream = True
    server.script(Stream(openai_chunks(text="Hello streaming world", parts=5, usage=(7, 4))))
    chunks = await collect(await ask(model, USER))
    texts = [c.get_text() for c in chunks]
    assert len(chunks) >= 5
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    assert texts[-1] == "Hello streaming world"
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage is not None and chunks[-1].usage.output_tokens == 4
    assert chunks[-1].metadata == {"finish_reason": "stop"}
    body = server.requests[0].json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_parallel_tool_calls_interleaved(model: OpenAIChatModel, server: WireServer) -> None:
    model.stream = True
    calls = [
        ("call_a", "get_weather", json.dumps({"city": "Paris", "unit": "celsius"})),
        ("call_b", "get_time", json.dumps({"tz": "Europe/Paris"})),
        ("call_c", "ping", ""),
    ]
    server.script(Stream(openai_chunks(tool_calls=calls, parts=6, interleave=True)))
    chunks = await collect(await ask(model, USER))
    final = chunks[-1]
    assert final.content == [
        {
            "type": "tool_use",
            "id": "call_a",
            "name": "get_weather",
            "input": {"city": "Paris", "unit": "celsius"},
        },
        {"type": "tool_use", "id": "call_b", "name": "get_time", "input": {"tz": "Europe/Paris"}},
        {"type": "tool_use", "id": "call_c", "name": "ping", "input": {}},
    ]
    assert final.metadata == {"finish_reason": "tool_calls"}
    # While arguments stream, blocks carry raw_input and are not executable.
    partial = [b for c in chunks[:-1] for b in c.tool_calls if "raw_input" in b]
    assert partial and all(b["input"] == {} for b in partial)


async def test_tool_arguments_split_over_many_chunks(
    model: OpenAIChatModel, server: WireServer
) -> None:
    model.stream = True
    args = json.dumps({"text": "ünïcødé " * 20, "n": [1, 2, 3], "nested": {"k": "}"}})
    server.script(Stream(openai_chunks(tool_calls=[("c1", "echo", args)], parts=len(args))))
    chunks = await collect(await ask(model, USER))
    raws = [
        c.tool_calls[0]["raw_input"]
        for c in chunks
        if c.tool_calls and "raw_input" in c.tool_calls[0]
    ]
    assert len(raws) > 50
    assert all(b.startswith(a) for a, b in itertools.pairwise(raws))
    assert chunks[-1].tool_calls[0]["input"] == json.loads(args)
    assert "raw_input" not in chunks[-1].tool_calls[0]


async def test_malformed_arguments_kept_raw(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(
        Reply(json=openai_completion(tool_calls=[("c1", "f", '{"a": 1,'), ("c2", "g", "[1]")]))
    )
    response = await ask(model, USER)
    assert response.tool_calls == [
        {"type": "tool_use", "id": "c1", "name": "f", "input": {}, "raw_input": '{"a": 1,'},
        {"type": "tool_use", "id": "c2", "name": "g", "input": {}, "raw_input": "[1]"},
    ]


async def test_unknown_finish_reason_does_not_crash(
    model: OpenAIChatModel, server: WireServer
) -> None:
    model.stream = True
    server.script(Stream(openai_chunks(text="ok", finish_reason="brand_new_reason")))
    chunks = await collect(await ask(model, USER))
    assert chunks[-1].metadata == {
        "finish_reason": "other",
        "provider_finish_reason": "brand_new_reason",
    }


async def test_reasoning_content_becomes_thinking(
    model: OpenAIChatModel, server: WireServer
) -> None:
    model.stream = True
    server.script(
        Stream(openai_chunks(text="42", reasoning="Let me think.", parts=4)),
        Reply(json=openai_completion(text="42", reasoning="Because.")),
    )
    chunks = await collect(await ask(model, USER))
    assert chunks[-1].content == [
        {"type": "thinking", "thinking": "Let me think."},
        {"type": "text", "text": "42"},
    ]
    response = await ask(model, USER, stream=False)
    assert response.content[0] == {"type": "thinking", "thinking": "Because."}


async def test_429_then_success_honours_retry_after(
    model: OpenAIChatModel, server: WireServer
) -> None:
    server.script(
        openai_error(429, "Rate limit reached", retry_after_ms="150"),
        Reply(json=openai_completion(text="finally")),
    )
    started = time.perf_counter()
    response = await ask(model, USER)
    assert time.perf_counter() - started >= 0.14
    assert response.get_text() == "finally"
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


async def test_500_gives_up_after_max_retries(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(*[openai_error(500, "The server had an error") for _ in range(3)])
    with pytest.raises(ModelAPIError) as info:
        await ask(model, USER)
    assert len(server.requests) == 3  # first try + max_retries=2
    assert info.value.status_code == 500
    assert "The server had an error" in str(info.value)
    assert server.remaining == 0


async def test_401_is_not_retried(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(openai_error(401, "Incorrect API key provided"))
    with pytest.raises(AuthenticationError, match="Incorrect API key provided") as info:
        await ask(model, USER)
    assert info.value.status_code == 401 and info.value.provider == "openai"
    assert len(server.requests) == 1


async def test_400_mapping_and_context_window(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(
        openai_error(400, "Invalid value for 'tool_choice'"),
        openai_error(
            400,
            "This model's maximum context length is 128000 tokens.",
            code="context_length_exceeded",
        ),
        openai_error(429, "Too many", retry_after="3600"),
    )
    with pytest.raises(BadRequestError) as info:
        await ask(model, USER)
    assert not isinstance(info.value, ContextWindowError)
    with pytest.raises(ContextWindowError, match="maximum context length"):
        await ask(model, USER)
    started = time.perf_counter()
    with pytest.raises(RateLimitError):  # Retry-After beyond the policy: raised at once
        await ask(model, USER)
    assert time.perf_counter() - started < 5
    assert len(server.requests) == 3


async def test_connection_refused_is_retried_then_mapped() -> None:
    async with WireServer() as srv:
        url = srv.openai_url
    model = OpenAIChatModel("m", api_key="k", base_url=url, stream=False, retry=FAST)
    with pytest.raises(ModelConnectionError):
        await ask(model, USER)
    await model.aclose()


async def test_stream_cut_midway(model: OpenAIChatModel, server: WireServer) -> None:
    model.stream = True
    events = openai_chunks(text="this answer is cut", parts=6)
    server.script(Stream(events[:4], then="cut"))
    received: list[ChatResponse] = []
    with pytest.raises(ModelConnectionError):
        await collect(await ask(model, USER), into=received)
    assert received and received[-1].get_text()  # partial text reached the consumer first
    assert len(server.requests) == 1  # a started stream is never retried


async def test_stream_ending_without_done_is_an_error(
    model: OpenAIChatModel, server: WireServer
) -> None:
    model.stream = True
    server.script(Stream(openai_chunks(text="abc")[:2]))  # clean end, no finish, no [DONE]
    with pytest.raises(ModelConnectionError, match="ended before"):
        await collect(await ask(model, USER))


async def test_cancellation_mid_stream_releases_connection(
    model: OpenAIChatModel, server: WireServer
) -> None:
    model.stream = True
    stream = Stream(
        openai_chunks(text="never ending", parts=3, done=False, usage=None)[:3], then="hang"
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
    model: OpenAIChatModel, server: WireServer
) -> None:
    # The body's end (the chunked terminator) comes after ``[DONE]``, in a separate write:
    # a client that closes the response at ``[DONE]`` loses its keep-alive connection.
    model.stream = True
    for text in ("first answer", "second answer", "third answer"):
        server.script(Stream(openai_chunks(text=text)))
    for text in ("first answer", "second answer", "third answer"):
        chunks = await collect(await ask(model, USER))
        assert chunks[-1].get_text() == text
    assert len(server.requests) == 3
    assert server.connections == 1


async def test_stream_body_that_does_not_end_is_not_waited_for(
    model: OpenAIChatModel, server: WireServer
) -> None:
    # ``[DONE]`` then a body that never ends: the answer is complete, the stream ends at once
    # (bounded drain) and the connection is given up.
    model.stream = True
    stream = Stream(openai_chunks(text="done early"), then="hang")
    server.script(stream)
    chunks = await asyncio.wait_for(collect(await ask(model, USER)), 10)  # the body never ends
    assert chunks[-1].get_text() == "done early"
    await asyncio.wait_for(stream.closed.wait(), 10)


MULTI_TURN = [
    Msg("system", "You are terse.", "system"),
    Msg(
        "user",
        [
            {"type": "text", "text": "Weather and a chart?"},
            {"type": "image", "source": {"type": "url", "url": "https://x/img.png"}},
        ],
        "user",
    ),
    Msg(
        "assistant",
        [
            {"type": "thinking", "thinking": "plan", "signature": "s"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "c2", "name": "chart", "input": {}},
            {"type": "tool_use", "id": "c3", "name": "bad", "input": {}, "raw_input": "{oops"},
        ],
        "assistant",
    ),
    Msg(
        "system",
        [
            {"type": "tool_result", "id": "c1", "name": "weather", "output": "-3 C"},
            {
                "type": "tool_result",
                "id": "c2",
                "name": "chart",
                "output": [
                    {"type": "text", "text": "chart attached"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                ],
            },
            {
                "type": "tool_result",
                "id": "c3",
                "name": "bad",
                "output": "invalid JSON arguments",
                "is_error": True,
            },
        ],
        "user",
    ),
    Msg("user", "Thanks!", "user"),
]


async def test_multi_turn_request_body_is_exact(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(Reply(json=openai_completion(text="ok")))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "W",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    await ask(
        model,
        MULTI_TURN,
        tools=tools,
        tool_choice="weather",
        parallel_tool_calls=False,
        temperature=0.2,
    )
    assert server.requests[0].json == {
        "model": "gpt-test",
        "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather and a chart?"},
                    {"type": "image_url", "image_url": {"url": "https://x/img.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "chart", "arguments": "{}"},
                    },
                    {
                        "id": "c3",
                        "type": "function",
                        "function": {"name": "bad", "arguments": "{oops"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
            {"role": "tool", "tool_call_id": "c2", "content": "chart attached"},
            {"role": "tool", "tool_call_id": "c3", "content": "invalid JSON arguments"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Images returned by tool 'chart' (call c2):"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": tools,
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "parallel_tool_calls": False,
    }


async def test_reasoning_content_round_trip_option(server: WireServer) -> None:
    model = OpenAIChatModel(
        "ds", api_key="k", base_url=server.openai_url, stream=False, reasoning_content=True
    )
    server.script(Reply(json=openai_completion(text="ok")))
    await ask(model, MULTI_TURN[2:3])
    assert server.requests[0].json["messages"][0]["reasoning_content"] == "plan"
    await model.aclose()


class Answer(BaseModel):
    city: str
    temperature: float


class Loose(BaseModel):
    city: str
    note: str = ""


async def test_structured_output(model: OpenAIChatModel, server: WireServer) -> None:
    server.script(
        Reply(json=openai_completion(text='{"city": "Oslo", "temperature": -3}')),
        Reply(json=openai_completion(text='{"city": 5}')),
        Reply(json=openai_completion(text='{"city": "Oslo"}')),
    )
    response = await ask(model, USER, output=Answer)
    assert response.metadata["structured_output"] == {"city": "Oslo", "temperature": -3.0}
    fmt = server.requests[0].json["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    bad = await ask(model, USER, output=Answer)
    assert "structured_output" not in bad.metadata and "structured_output_error" in bad.metadata
    loose = await ask(model, USER, output=Loose)
    assert loose.metadata["structured_output"] == {"city": "Oslo", "note": ""}
    assert server.requests[2].json["response_format"]["json_schema"]["strict"] is False


async def test_error_event_in_stream(model: OpenAIChatModel, server: WireServer) -> None:
    model.stream = True
    from _wire_server import sse

    failed = Stream([sse({"error": {"message": "upstream overloaded", "code": "server_error"}})])
    server.script(failed, failed, failed)
    with pytest.raises(ModelAPIError, match="upstream overloaded"):
        await collect(await ask(model, USER))
    # Before any content: retried by its status (a 5xx without one), like an HTTP 500.
    assert len(server.requests) == 1 + FAST.max_retries


async def test_missing_api_key_is_authentication_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(AuthenticationError):
        await ask(model, USER)


async def test_closing_the_stream_early_releases_connection(
    model: OpenAIChatModel, server: WireServer
) -> None:
    model.stream = True
    stream = Stream(
        openai_chunks(text="a long answer", parts=5, done=False, usage=None)[:4], then="hang"
    )
    server.script(stream)
    output = await ask(model, USER)
    async with contextlib.aclosing(output):  # type: ignore[type-var]
        async for chunk in output:
            assert chunk.get_text()
            break
    closed_at = time.perf_counter()
    await asyncio.wait_for(stream.closed.wait(), 1)
    assert stream.closed_at is not None and stream.closed_at - closed_at < 0.1


async def test_malformed_shapes_raise_model_response_error(
    model: OpenAIChatModel, server: WireServer
) -> None:
    from _wire_server import sse

    from agentkit.exceptions import ModelResponseError

    server.script(
        Reply(json={"choices": [{"message": {"tool_calls": ["not a dict"]}}]}),
        Reply(body=b"<html>proxy error</html>"),
    )
    with pytest.raises(ModelResponseError, match="unexpected answer shape"):
        await ask(model, USER)
    with pytest.raises(ModelResponseError, match="not valid JSON"):
        await ask(model, USER)
    model.stream = True
    server.script(Stream([sse({"choices": [{"delta": {"tool_calls": [7]}}]})]))
    with pytest.raises(ModelResponseError, match="unexpected answer shape"):
        await collect(await ask(model, USER))

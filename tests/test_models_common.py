"""Shared adapter machinery: retry policy, Retry-After, error mapping, SSE parsing, registry."""

from __future__ import annotations

import asyncio
import email.utils
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio.lowlevel
import pytest
from _model_calls import ask
from _wire_server import Reply, WireServer, openai_completion, openai_error
from pydantic import BaseModel

from agentkit.exceptions import (
    AuthenticationError,
    BadRequestError,
    ContextWindowError,
    ModelAPIError,
    RateLimitError,
)
from agentkit.messages import Msg
from agentkit.models import AnthropicChatModel, OpenAIChatModel, RetryPolicy, from_string
from agentkit.models._common import parse_arguments, strict_schema, tool_use_block
from agentkit.models._http import iter_sse, map_status_error, parse_retry_after

USER = [Msg("user", "hi", "user")]


# -- retry policy ------------------------------------------------------------------------
def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=5.0, jitter=0.25)
    for retry, base in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (50, 5.0)]:
        delays = {policy.backoff(retry) for _ in range(50)}
        assert all(0.75 * base <= d <= base for d in delays)
        assert len(delays) > 1  # jitter varies
    assert RetryPolicy(jitter=0).backoff(0) == 0.5


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2)


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5", "retry-after-ms": "junk"}) == 1.5
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < parse_retry_after({"retry-after": future}) <= 30  # type: ignore[operator]
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


def fast_model(server: WireServer, retries: int = 3) -> OpenAIChatModel:
    policy = RetryPolicy(max_retries=retries, initial_delay=0.001, max_delay=0.002)
    return OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False, retry=policy)


async def test_408_409_and_x_should_retry(server: WireServer) -> None:
    model = fast_model(server)
    ok = Reply(json=openai_completion(text="ok"))
    server.script(openai_error(408, "timeout"), openai_error(409, "conflict"), ok)
    assert (await ask(model, USER)).get_text() == "ok"
    assert len(server.requests) == 3
    server.script(openai_error(503, "down", x_should_retry="false"))
    with pytest.raises(ModelAPIError, match="down"):
        await ask(model, USER)
    assert len(server.requests) == 4
    server.script(openai_error(400, "odd but retryable", x_should_retry="true"), ok)
    assert (await ask(model, USER)).get_text() == "ok"
    await model.aclose()


async def test_http_date_retry_after_and_max_retries_shortcut(server: WireServer) -> None:
    model = OpenAIChatModel(
        "m", api_key="k", base_url=server.openai_url, stream=False, max_retries=0
    )
    assert model.retry.max_retries == 0 and model.retry.initial_delay == RetryPolicy().initial_delay
    server.script(openai_error(429, "slow down"))
    with pytest.raises(RateLimitError, match="slow down"):
        await ask(model, USER)
    assert len(server.requests) == 1
    await model.aclose()
    model = fast_model(server)
    date = email.utils.formatdate(time.time() - 5, usegmt=True)  # already passed: retry now
    server.script(
        openai_error(429, "slow down", retry_after=date), Reply(json=openai_completion(text="ok"))
    )
    assert (await ask(model, USER)).get_text() == "ok"
    await model.aclose()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, {"error": {"message": "m"}}, RateLimitError),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "m"}},
            RateLimitError,
        ),
        (401, {"error": {"message": "m"}}, AuthenticationError),
        (403, {"error": {"message": "m"}}, AuthenticationError),
        (404, {"error": {"message": "model not found"}}, BadRequestError),
        (422, "unprocessable", BadRequestError),
        (400, {"error": {"message": "x", "code": "context_length_exceeded"}}, ContextWindowError),
        (400, {"error": {"message": "Input is too long for requested model."}}, ContextWindowError),
        (413, {"error": {"message": "prompt is too long"}}, ContextWindowError),
        (500, None, ModelAPIError),
        (418, {"detail": "teapot"}, ModelAPIError),
    ],
)
def test_map_status_error(status: int, body: Any, expected: type[Exception]) -> None:
    err = map_status_error("p", status, body, "fallback")
    assert type(err) is expected
    assert err.status_code == status and err.provider == "p"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        assert body["error"]["message"] in str(err)


# -- SSE ---------------------------------------------------------------------------------
async def feed(*chunks: bytes) -> list[tuple[str, bytes]]:
    async def gen() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [item async for batch in iter_sse(gen()) for item in batch]


async def test_sse_parsing_edge_cases() -> None:
    text = "é€😀".encode()
    events = await feed(
        b': comment\r\nevent: a\r\ndata: {"x":',
        b" 1}\r\n\r\ndata: line1\ndata: line2\nid: 7\nretry: 5\n\n",
        b"data:no-space\n\ndata: " + text[:3],
        text[3:] + b"\n\n\n\ndata: tail-without-blank-line",
    )
    assert events == [
        ("a", b'{"x": 1}'),
        ("", b"line1\nline2"),
        ("", b"no-space"),
        ("", text),
        ("", b"tail-without-blank-line"),
    ]


async def test_sse_events_come_one_batch_per_network_chunk() -> None:
    async def gen() -> AsyncIterator[bytes]:
        yield b"data: 1\n\ndata: 2\n\ndata: 3"  # two events complete, one cut
        yield b"\n\n: a comment only\n"  # completes the third
        yield b"event: x\n"  # completes none: no empty batch
        yield b"data: 4\n\n"

    batches = [batch async for batch in iter_sse(gen())]
    assert batches == [[("", b"1"), ("", b"2")], [("", b"3")], [("x", b"4")]]


# -- tool arguments / schema -------------------------------------------------------------
def test_parse_arguments() -> None:
    assert parse_arguments("") == {}
    assert parse_arguments('  {"a": 1} ') == {"a": 1}
    assert parse_arguments('{"a": "}') is None
    assert parse_arguments("[1]") is None
    assert parse_arguments('{"a": 1') is None
    streaming = tool_use_block("c", "f", "", final=False)
    assert streaming["raw_input"] == "" and streaming["input"] == {}
    assert tool_use_block(None, "f", "", final=True)["id"].startswith("call_")


class Inner(BaseModel):
    default: int  # a field *named* default must not be mistaken for a default value


class Strict(BaseModel):
    inner: Inner
    tags: list[str]


class Optional_(BaseModel):
    a: int = 1


class OpenMap(BaseModel):
    scores: dict[str, int]


def test_strict_schema() -> None:
    schema = strict_schema(Strict.model_json_schema())
    assert schema is not None
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Inner"]["additionalProperties"] is False
    assert strict_schema(Optional_.model_json_schema()) is None
    assert strict_schema(OpenMap.model_json_schema()) is None


# -- registry ------------------------------------------------------------------------------
def test_from_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "ds-key")
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    openai_model = from_string("openai:gpt-4.1-mini", stream=False)
    assert isinstance(openai_model, OpenAIChatModel) and openai_model.model_name == "gpt-4.1-mini"
    assert openai_model.stream is False and openai_model.base_url is None
    assert isinstance(from_string("gpt-4o"), OpenAIChatModel)
    claude = from_string("anthropic:claude-sonnet-4-5", max_tokens=100)
    assert isinstance(claude, AnthropicChatModel) and claude.max_tokens == 100
    ollama = from_string("ollama:qwen3")
    assert isinstance(ollama, OpenAIChatModel)
    assert (ollama.base_url, ollama.api_key, ollama.provider) == (
        "http://localhost:11434/v1",
        "ollama",
        "ollama",
    )
    vllm = from_string("vllm:meta/llama", base_url="http://gpu:9000/v1")
    assert (vllm.base_url, vllm.api_key) == ("http://gpu:9000/v1", "EMPTY")  # type: ignore[attr-defined]
    deepseek = from_string("deepseek:deepseek-chat")
    assert deepseek.api_key == "ds-key" and deepseek.reasoning_content is True  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown provider"):
        from_string("nope:model")
    with pytest.raises(ValueError, match="no model name"):
        from_string("openai:")


async def test_base_url_from_environment(
    monkeypatch: pytest.MonkeyPatch, server: WireServer
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    server.script(Reply(json=openai_completion(text="ok")))
    model = from_string("openai:m", stream=False)
    assert (await ask(model, USER)).get_text() == "ok"  # type: ignore[union-attr]
    assert server.requests[0].headers["authorization"] == "Bearer env-key"
    await model.aclose()
    await model.aclose()  # idempotent


def test_sdks_are_imported_when_a_model_is_built_not_before() -> None:
    # Importing the adapter classes stays cheap; building a model imports its own SDK (and
    # builds the client) then, so that the first request does not stall on the import. An
    # OpenAI-compatible model with a plain configuration needs no SDK at all (lean path).
    code = (
        "import sys, json;"
        "sdks = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'anthropic'});"
        "from agentkit.models import OpenAIChatModel, AnthropicChatModel, from_string;"
        "steps = [sdks()];"
        "OpenAIChatModel('m', api_key='k'); steps.append(sdks());"
        "from_string('ollama:q'); steps.append(sdks());"
        "AnthropicChatModel('c', api_key='k'); steps.append(sdks());"
        "print(json.dumps(steps))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[], [], [], ["anthropic"]]


def test_client_is_recreated_for_a_new_event_loop() -> None:
    # A script calling asyncio.run() twice with one model: the second run must not reuse the
    # client (and its pooled connections) of the first, closed loop.
    model = OpenAIChatModel(  # default_query: a setting that keeps the SDK client
        "m", api_key="k", base_url="http://127.0.0.1:9/v1", client_kwargs={"default_query": {}}
    )
    built = model._client
    assert built is not None  # built with the model, outside any event loop

    async def get_client() -> Any:
        return model.client

    first = asyncio.run(get_client())
    assert first is built  # adopted by the first loop that uses it
    second = asyncio.run(get_client())
    assert first is not second

    async def same_loop() -> None:
        client = model.client
        await anyio.lowlevel.checkpoint()  # another task may have run in between
        assert model.client is client  # kept while this loop uses it
        await model.aclose()
        await model.aclose()

    asyncio.run(same_loop())

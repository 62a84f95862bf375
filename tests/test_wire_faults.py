"""The wire fault suite and the error table, over every adapter with its own wire format.

OpenAI Chat Completions, OpenAI Responses and Anthropic Messages speak SSE through their
SDKs; Gemini speaks ``alt=sse`` through google-genai; Bedrock Converse speaks
``application/vnd.amazon.eventstream`` through aiobotocore. Each provider below knows how to
build its own answers (text, tool calls, streamed or not) and its own broken event, so the
same faults run against all five:

- a 200 body that is not JSON, and a stream event that is not JSON: ``ModelResponseError``;
- a stream cut before any content: retried like a connection error; cut after content:
  ``ModelConnectionError``, and the agent's memory stays valid;
- two calls with one id in an answer: the agent gives them distinct ids;
- huge tool arguments (512 KiB), streamed in pieces or whole: parsed intact.

Then the error table: the refusal, content-filter, overloaded (529 / 503) and 500 answers of
each provider, with the bodies of their API references, map to named errors or stop
reasons; ``Retry-After`` on 429/503 is read by every adapter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    anthropic_stream,
    openai_chunks,
    openai_completion,
    responses_body,
    responses_call,
    responses_message,
    responses_stream,
    sse,
)
from test_models_bedrock_converse import converse, event, event_stream, exception, frame
from test_models_bedrock_converse import model_for as bedrock_for
from test_models_google import answer, sse_events, usage
from test_models_google import model_for as google_for

from agentkit import ReActAgent, Toolkit
from agentkit.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    RateLimitError,
)
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicChatModel,
    ChatModel,
    ChatResponse,
    ModelRequest,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
    from_string,
)

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.002)
USER = [Msg("user", "hello", "user")]
TEXT = "Hello wonderful world"
Call = tuple[str, str, str]  # (id, name, JSON arguments)
BEDROCK_USAGE = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}


def _pieces(value: str, parts: int) -> list[str]:
    step = max(1, -(-len(value) // parts))
    return [value[i : i + step] for i in range(0, len(value), step)]


@dataclass(frozen=True)
class Provider:
    """How one adapter's provider answers (its wire format) and how to reach it."""

    name: str
    make: Callable[[WireServer, bool], ChatModel]
    text_body: Callable[[str], dict[str, Any]]
    text_events: Callable[[str], list[bytes]]
    calls_body: Callable[[list[Call]], dict[str, Any]]
    calls_events: Callable[[list[Call]], list[bytes]]
    bad_event: bytes  # one event of the provider's framing whose payload is not JSON
    event_stream: bool = False  # AWS event-stream framing instead of SSE

    def stream(self, events: list[bytes], then: str = "end") -> Stream:
        if self.event_stream:
            return event_stream(events, then=then)
        return Stream(events=events, then=then)  # type: ignore[arg-type]

    def reply(self, body: dict[str, Any]) -> Reply:
        return Reply(json=body, headers={"x-amzn-requestid": "r-1"})


# -- each provider's wire --------------------------------------------------------------------
def _chat(server: WireServer, stream: bool) -> ChatModel:
    return OpenAIChatModel(
        "gpt", api_key="k", base_url=server.openai_url, stream=stream, retry=FAST
    )


def _responses(server: WireServer, stream: bool) -> ChatModel:
    return OpenAIResponsesModel(
        "gpt", api_key="k", base_url=server.openai_url, stream=stream, retry=FAST
    )


def _anthropic(server: WireServer, stream: bool) -> ChatModel:
    return AnthropicChatModel(
        "claude", api_key="k", base_url=server.anthropic_url, stream=stream, retry=FAST
    )


def _anthropic_calls(calls: list[Call]) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": i, "name": n, "input": json.loads(a), "raw": a}
        for i, n, a in calls
    ]


def _gemini_calls(calls: list[Call]) -> list[dict[str, Any]]:
    return [{"functionCall": {"id": i, "name": n, "args": json.loads(a)}} for i, n, a in calls]


def _gemini_text_events(text: str) -> list[bytes]:
    chunks = [answer([{"text": p}], finish=None) for p in _pieces(text, 3)]
    return sse_events(*chunks, answer([{"text": ""}], usageMetadata=usage()))


def _converse_text_events(text: str) -> list[bytes]:
    deltas = [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}})
        for p in _pieces(text, 3)
    ]
    return [
        event("messageStart", {"role": "assistant"}),
        *deltas,
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
        event("metadata", {"usage": BEDROCK_USAGE, "metrics": {"latencyMs": 3}}),
    ]


def _converse_calls_events(calls: list[Call]) -> list[bytes]:
    frames = [event("messageStart", {"role": "assistant"})]
    for index, (i, n, a) in enumerate(calls):
        start = {"toolUse": {"toolUseId": i, "name": n}}
        frames.append(event("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        frames += [
            event(
                "contentBlockDelta",
                {"contentBlockIndex": index, "delta": {"toolUse": {"input": p}}},
            )
            for p in _pieces(a, 8)
        ]
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
    frames.append(event("messageStop", {"stopReason": "tool_use"}))
    frames.append(event("metadata", {"usage": BEDROCK_USAGE, "metrics": {"latencyMs": 3}}))
    return frames


def _converse_body(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    body: dict[str, Any] = converse(content, stop).json
    return body


_BAD_AWS = frame(
    {
        ":event-type": "contentBlockDelta",
        ":content-type": "application/json",
        ":message-type": "event",
    },
    b'{"contentBlockIndex": 0, "delta": {"text": "x"',
)

PROVIDERS = [
    Provider(
        "openai-chat",
        _chat,
        lambda t: openai_completion(t),
        lambda t: openai_chunks(t),
        lambda calls: openai_completion(tool_calls=calls),
        lambda calls: openai_chunks(tool_calls=calls, parts=8),
        b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "x"\n\n',
    ),
    Provider(
        "openai-responses",
        _responses,
        lambda t: responses_body([responses_message(t)]),
        lambda t: responses_stream([responses_message(t)]),
        lambda calls: responses_body([responses_call(i, n, a) for i, n, a in calls]),
        lambda calls: responses_stream([responses_call(i, n, a) for i, n, a in calls], parts=8),
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta"\n\n',
    ),
    Provider(
        "anthropic",
        _anthropic,
        lambda t: anthropic_message([{"type": "text", "text": t}]),
        lambda t: anthropic_stream([{"type": "text", "text": t}]),
        lambda calls: anthropic_message(_anthropic_calls(calls)),
        lambda calls: anthropic_stream(_anthropic_calls(calls), parts=8),
        b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0\n\n',
    ),
    Provider(
        "google",
        lambda server, stream: google_for(server, stream=stream),
        lambda t: answer([{"text": t}], usageMetadata=usage()),
        _gemini_text_events,
        lambda calls: answer(_gemini_calls(calls), usageMetadata=usage()),
        lambda calls: sse_events(answer(_gemini_calls(calls), usageMetadata=usage())),
        b'data: {"candidates": [{"content": {"parts": [{"text": "x"}\r\n\r\n',
    ),
    Provider(
        "bedrock",
        lambda server, stream: bedrock_for(server, stream=stream),
        lambda t: _converse_body([{"text": t}], "end_turn"),
        _converse_text_events,
        lambda calls: _converse_body(
            [{"toolUse": {"toolUseId": i, "name": n, "input": json.loads(a)}} for i, n, a in calls],
            "tool_use",
        ),
        _converse_calls_events,
        _BAD_AWS,
        event_stream=True,
    ),
]
BY_NAME = {p.name: p for p in PROVIDERS}
each_provider = pytest.mark.parametrize("provider", PROVIDERS, ids=[p.name for p in PROVIDERS])


def _first_content(events: list[bytes]) -> int:
    """The index of the first event that carries some of ``TEXT``."""
    return next(i for i, e in enumerate(events) if TEXT[:3].encode() in e)


async def _final(model: ChatModel, stream: bool, tools: Any = None) -> ChatResponse:
    if not stream:
        return await model.request(ModelRequest(USER, list(tools or [])))
    last: ChatResponse | None = None
    async for chunk in model.request_stream(ModelRequest(USER, list(tools or []))):
        last = chunk
    assert last is not None
    return last


# -- malformed JSON ----------------------------------------------------------------------
@each_provider
async def test_a_body_that_is_not_json_is_a_model_response_error(provider: Provider) -> None:
    async with WireServer() as server:
        bad = Reply(body=b'{"id": "x", "choices": [', headers={"content-type": "application/json"})
        server.script(bad, bad, bad)
        model = provider.make(server, False)
        with pytest.raises(ModelResponseError) as caught:
            await model.request(ModelRequest(USER))
        await model.aclose()
    assert caught.value.provider == model.provider


@each_provider
async def test_a_stream_event_that_is_not_json_is_a_model_response_error(
    provider: Provider,
) -> None:
    events = provider.text_events(TEXT)
    cut = _first_content(events) + 1
    broken = [*events[:cut], provider.bad_event, *events[cut:]]
    async with WireServer() as server:
        server.script(provider.stream(broken))
        model = provider.make(server, True)
        with pytest.raises(ModelResponseError) as caught:
            await _final(model, True)
        await model.aclose()
    assert len(server.requests) == 1  # content had reached the caller: not retried
    assert caught.value.provider == model.provider


# -- cut streams -------------------------------------------------------------------------
@each_provider
async def test_a_stream_cut_before_any_content_is_retried(provider: Provider) -> None:
    events = provider.text_events(TEXT)
    async with WireServer() as server:
        server.script(
            provider.stream(events[: _first_content(events)], then="cut"),
            provider.stream(events),
        )
        model = provider.make(server, True)
        final = await _final(model, True)
        await model.aclose()
    assert final.get_text() == TEXT
    assert len(server.requests) == 2


@each_provider
async def test_a_stream_cut_after_content_is_a_connection_error_and_memory_stays_valid(
    provider: Provider,
) -> None:
    events = provider.text_events(TEXT)
    async with WireServer() as server:
        server.script(provider.stream(events[: _first_content(events) + 1], then="cut"))
        model = provider.make(server, True)
        agent = ReActAgent("bot", "sys", model, print_hint=False)
        with pytest.raises(ModelConnectionError):
            await agent.run("hello")
        await model.aclose()
    assert len(server.requests) == 1
    check_memory_invariant(await agent.memory.get_memory())


# -- duplicate ids and huge arguments ----------------------------------------------------
def _echo_toolkit(seen: list[int]) -> Toolkit:
    toolkit = Toolkit()

    def echo(text: str) -> str:
        """Echo the text's length.

        Args:
            text: Anything.
        """
        seen.append(len(text))
        return str(len(text))

    toolkit.register_tool_function(echo)
    return toolkit


@each_provider
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_two_calls_with_one_id_get_distinct_ids(provider: Provider, stream: bool) -> None:
    calls = [("dup", "echo", '{"text": "a"}'), ("dup", "echo", '{"text": "bb"}')]
    first = provider.calls_events(calls) if stream else provider.calls_body(calls)
    done = provider.text_events("done") if stream else provider.text_body("done")
    seen: list[int] = []
    async with WireServer() as server:
        if stream:
            server.script(provider.stream(first), provider.stream(done))  # type: ignore[arg-type]
        else:
            server.script(provider.reply(first), provider.reply(done))  # type: ignore[arg-type]
        model = provider.make(server, stream)
        agent = ReActAgent("bot", "sys", model, _echo_toolkit(seen), print_hint=False)
        result = await agent.run("echo twice")
        await model.aclose()
    assert result.output == "done" and sorted(seen) == [1, 2]
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    ids = [b["id"] for m in memory for b in m.get_content_blocks() if b["type"] == "tool_use"]
    assert len(ids) == 2 and len(set(ids)) == 2


@each_provider
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_huge_tool_arguments_arrive_intact(provider: Provider, stream: bool) -> None:
    big = "x" * (512 * 1024)
    calls = [("c1", "echo", json.dumps({"text": big}))]
    async with WireServer() as server:
        if stream:
            server.script(provider.stream(provider.calls_events(calls)))
        else:
            server.script(provider.reply(provider.calls_body(calls)))
        model = provider.make(server, stream)
        final = await _final(model, stream)
        await model.aclose()
    assert len(final.tool_calls) == 1
    assert final.tool_calls[0]["input"] == {"text": big}


# -- the error table -----------------------------------------------------------------------
def _openai_error(status: int, message: str, kind: str, **headers: str) -> Reply:
    error = {"message": message, "type": kind, "param": None, "code": None}
    return Reply(status, json={"error": error}, headers=headers)


def _anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, json=body, headers=headers)


def _google_error(status: int, name: str, message: str, **headers: str) -> Reply:
    return Reply(
        status,
        json={"error": {"code": status, "message": message, "status": name}},
        headers=headers,
    )


def _aws_error(status: int, code: str, message: str, **headers: str) -> Reply:
    return Reply(status, json={"message": message}, headers={"x-amzn-errortype": code, **headers})


# (provider, the error answer, the class raised, its status): each retried to the end.
ERRORS = [
    (
        "openai-chat",
        _openai_error(
            500,
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        ),
        ModelAPIError,
        500,
    ),
    (
        "openai-chat",
        _openai_error(
            503, "The engine is currently overloaded, please try again later.", "server_error"
        ),
        ModelAPIError,
        503,
    ),
    (
        "openai-responses",
        _openai_error(500, "The server had an error processing your request.", "server_error"),
        ModelAPIError,
        500,
    ),
    ("anthropic", _anthropic_error(529, "overloaded_error", "Overloaded"), RateLimitError, 529),
    ("anthropic", _anthropic_error(500, "api_error", "Internal server error"), ModelAPIError, 500),
    (
        "google",
        _google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        ModelAPIError,
        503,
    ),
    (
        "google",
        _google_error(500, "INTERNAL", "An internal error has occurred."),
        ModelAPIError,
        500,
    ),
    (
        "bedrock",
        _aws_error(500, "InternalServerException", "An internal server error occurred."),
        ModelAPIError,
        500,
    ),
    (
        "bedrock",
        _aws_error(503, "ServiceUnavailableException", "The service is unavailable."),
        ModelAPIError,
        503,
    ),
    (
        "bedrock",
        _aws_error(424, "ModelErrorException", "The model returned an error."),
        ModelAPIError,
        424,  # the model's own failure: not retried (AWS SDKs do not retry it either)
    ),
]


@pytest.mark.parametrize(
    ("name", "reply", "error", "status"),
    ERRORS,
    ids=[f"{e[0]}-{e[3]}" for e in ERRORS],
)
async def test_server_errors_and_overload_are_named_errors_after_retries(
    name: str, reply: Reply, error: type[ModelAPIError], status: int
) -> None:
    provider = BY_NAME[name]
    async with WireServer() as server:
        server.script(reply, reply, reply)
        model = provider.make(server, False)
        with pytest.raises(error) as caught:
            await model.request(ModelRequest(USER))
        await model.aclose()
    assert caught.value.status_code == status
    assert caught.value.provider is not None and caught.value.provider.startswith(name[:6])
    # The first try and FAST's two retries (5xx); a 424 is answered once.
    assert len(server.requests) == (1 if status == 424 else 3)


def _in_stream_errors() -> list[tuple[str, bytes, type[ModelError]]]:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    failed = {
        "type": "response.failed",
        "response": responses_body(
            [], status="failed", error={"code": "server_error", "message": "The server failed."}
        ),
    }
    return [
        ("anthropic", sse(overloaded, "error"), RateLimitError),
        ("openai-responses", sse(failed, "response.failed"), ModelAPIError),
        ("bedrock", exception("internalServerException", "internal"), ModelAPIError),
        ("bedrock", exception("modelStreamErrorException", "the model broke"), ModelAPIError),
        ("bedrock", exception("serviceUnavailableException", "unavailable"), ModelAPIError),
    ]


@pytest.mark.parametrize(
    ("name", "error_event", "error"),
    _in_stream_errors(),
    ids=[f"{e[0]}-{i}" for i, e in enumerate(_in_stream_errors())],
)
async def test_an_error_event_after_content_is_a_named_error(
    name: str, error_event: bytes, error: type[ModelError]
) -> None:
    provider = BY_NAME[name]
    events = provider.text_events(TEXT)
    cut = _first_content(events) + 1
    async with WireServer() as server:
        server.script(provider.stream([*events[:cut], error_event]))
        model = provider.make(server, True)
        with pytest.raises(error):
            await _final(model, True)
        await model.aclose()
    assert len(server.requests) == 1


# Stop reasons: (provider, a whole answer as the API reference shows it, finish_reason,
# metadata the answer must carry).
def _stop_answers() -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    refusal = openai_completion(None, finish_reason="stop")
    refusal["choices"][0]["message"]["refusal"] = "I'm sorry, I cannot assist with that request."
    filtered = openai_completion("partial", finish_reason="content_filter")
    responses_refusal = responses_body(
        [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}],
            }
        ]
    )
    responses_filtered = responses_body(
        [responses_message("partial")], status="incomplete", incomplete="content_filter"
    )
    anthropic_refusal = anthropic_message([], stop_reason="refusal")
    gemini_safety = answer([], finish="SAFETY")
    gemini_prohibited = answer([], finish="PROHIBITED_CONTENT")
    gemini_blocked = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": usage(9, 0),
    }
    return [
        (
            "openai-chat",
            refusal,
            "stop",
            {"refusal": "I'm sorry, I cannot assist with that request."},
        ),
        ("openai-chat", filtered, "content_filter", {}),
        ("openai-responses", responses_refusal, "stop", {"refusal": "I can't help with that."}),
        ("openai-responses", responses_filtered, "content_filter", {}),
        ("anthropic", anthropic_refusal, "refusal", {}),
        ("google", gemini_safety, "content_filter", {"provider_finish_reason": "SAFETY"}),
        (
            "google",
            gemini_prohibited,
            "content_filter",
            {"provider_finish_reason": "PROHIBITED_CONTENT"},
        ),
        ("google", gemini_blocked, "content_filter", {"block_reason": "PROHIBITED_CONTENT"}),
        ("bedrock", _converse_body([], "content_filtered"), "content_filter", {}),
        ("bedrock", _converse_body([], "guardrail_intervened"), "content_filter", {}),
        (
            "bedrock",
            _converse_body([{"text": "{"}], "malformed_model_output"),
            "error",
            {"provider_finish_reason": "malformed_model_output"},
        ),
        (
            "bedrock",
            _converse_body([], "malformed_tool_use"),
            "malformed_function_call",
            {"provider_finish_reason": "malformed_tool_use"},
        ),
    ]


@pytest.mark.parametrize(
    ("name", "body", "finish", "extra"),
    _stop_answers(),
    ids=[f"{e[0]}-{e[2]}-{i}" for i, e in enumerate(_stop_answers())],
)
async def test_refusals_and_content_filters_are_named_stop_reasons(
    name: str, body: dict[str, Any], finish: str, extra: dict[str, Any]
) -> None:
    provider = BY_NAME[name]
    async with WireServer() as server:
        server.script(provider.reply(body))
        model = provider.make(server, False)
        response = await model.request(ModelRequest(USER))
        await model.aclose()
    assert response.metadata is not None
    assert response.metadata["finish_reason"] == finish
    for key, value in extra.items():
        assert response.metadata[key] == value


# -- Retry-After ---------------------------------------------------------------------------
def _limited(name: str, status: int, wait: str) -> Reply:
    headers = {"retry-after": wait}
    if name.startswith("openai"):
        return _openai_error(status, "Rate limit reached.", "requests", **headers)
    if name == "anthropic":
        return _anthropic_error(status, "rate_limit_error", "Rate limited.", **headers)
    if name == "google":
        return _google_error(status, "RESOURCE_EXHAUSTED", "Quota exceeded.", **headers)
    code = "ThrottlingException" if status == 429 else "ServiceUnavailableException"
    return _aws_error(status, code, "Too many requests.", **headers)


@each_provider
@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_is_read_on_429_and_503(provider: Provider, status: int) -> None:
    # A wait longer than the policy honours ends the retries at once; a short one is
    # waited out and retried: both show that the header was read (no timing involved).
    patient = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.002, max_retry_after=5)
    async with WireServer() as server:
        server.script(_limited(provider.name, status, "3600"))
        model = provider.make(server, False)
        model.retry = patient  # type: ignore[attr-defined]
        with pytest.raises(ModelAPIError) as caught:
            await model.request(ModelRequest(USER))
        assert caught.value.status_code == status
        assert len(server.requests) == 1
        server.script(
            _limited(provider.name, status, "0"), provider.reply(provider.text_body("back"))
        )
        response = await model.request(ModelRequest(USER))
        await model.aclose()
    assert response.get_text() == "back" and len(server.requests) == 3


# -- service_tier on the OpenAI and Anthropic wire ----------------------------------------
@pytest.mark.parametrize(
    ("name", "tier"),
    [("openai-chat", "flex"), ("openai-responses", "priority"), ("anthropic", "standard_only")],
)
async def test_service_tier_is_sent_as_the_provider_names_it(name: str, tier: str) -> None:
    provider = BY_NAME[name]
    async with WireServer() as server:
        server.script(provider.reply(provider.text_body("ok")))
        model = provider.make(server, False)
        await model.request(ModelRequest(USER, settings={"service_tier": tier}))
        await model.aclose()
    assert server.requests[0].json["service_tier"] == tier


# -- presets whose error shapes differ from OpenAI's --------------------------------------
def _preset(server: WireServer, name: str, stream: bool) -> ChatModel:
    return from_string(
        f"{name}:m", api_key="k", base_url=server.openai_url, stream=stream, retry=FAST
    )


@pytest.mark.parametrize(
    ("preset", "reply", "error", "status", "tries"),
    [
        # OpenRouter: the upstream provider failed; ``code`` is the HTTP status (an int).
        (
            "openrouter",
            Reply(
                502,
                json={
                    "error": {
                        "code": 502,
                        "message": "Provider returned error",
                        "metadata": {"provider_name": "OpenAI", "raw": "upstream"},
                    }
                },
            ),
            ModelAPIError,
            502,
            3,
        ),
        # Mistral: the error object at the top level, no "error" wrapper.
        (
            "mistral",
            Reply(
                429,
                json={
                    "object": "error",
                    "message": "Requests rate limit exceeded",
                    "type": "rate_limited",
                    "param": None,
                    "code": "1300",
                },
            ),
            RateLimitError,
            429,
            3,
        ),
        (
            "groq",
            Reply(
                503,
                json={
                    "error": {
                        "message": "Service Unavailable",
                        "type": "internal_server_error",
                    }
                },
            ),
            ModelAPIError,
            503,
            3,
        ),
    ],
)
async def test_preset_error_bodies_are_named_errors_with_their_message(
    preset: str, reply: Reply, error: type[ModelAPIError], status: int, tries: int
) -> None:
    async with WireServer() as server:
        server.script(*[reply] * tries)
        model = _preset(server, preset, False)
        with pytest.raises(error) as caught:
            await model.request(ModelRequest(USER))
        await model.aclose()
    assert caught.value.status_code == status and len(server.requests) == tries
    message = reply.json["error"]["message"] if "error" in reply.json else reply.json["message"]
    assert message in str(caught.value)


async def test_openrouter_mid_stream_error_chunk_is_a_named_error() -> None:
    # OpenRouter's documented mid-stream failure: a chunk with "error" and
    # finish_reason "error" after content was sent (the HTTP status is already 200).
    events = openai_chunks(TEXT)
    failure = {
        "id": "cmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "provider": "openai",
        "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    async with WireServer() as server:
        server.script(Stream(events=[*events[:2], sse(failure)]))
        model = _preset(server, "openrouter", True)
        with pytest.raises(ModelAPIError, match="Provider disconnected unexpectedly"):
            await _final(model, True)
        await model.aclose()
    assert len(server.requests) == 1


def _overloaded_first() -> list[tuple[str, bytes]]:
    """Each provider's in-stream "overloaded / unavailable" event, as its reference shows it."""
    chat = {"error": {"message": "The server is overloaded.", "type": "server_error", "code": 503}}
    anthropic = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    gemini = {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    responses = {
        "type": "error",
        "code": "server_error",
        "message": "The server had an error while processing your request.",
        "param": None,
        "sequence_number": 1,
    }
    return [
        ("openai-chat", sse(chat)),
        ("openai-responses", sse(responses, "error")),
        ("anthropic", sse(anthropic, "error")),
        ("google", f"data: {json.dumps(gemini)}\r\n\r\n".encode()),
        ("bedrock", exception("serviceUnavailableException", "The service is unavailable.")),
        ("bedrock", exception("throttlingException", "Too many requests.")),
    ]


@pytest.mark.parametrize(
    ("name", "first"),
    _overloaded_first(),
    ids=[f"{e[0]}-{i}" for i, e in enumerate(_overloaded_first())],
)
async def test_an_overloaded_event_before_any_content_is_retried(name: str, first: bytes) -> None:
    provider = BY_NAME[name]
    async with WireServer() as server:
        server.script(provider.stream([first]), provider.stream(provider.text_events(TEXT)))
        model = provider.make(server, True)
        final = await _final(model, True)
        await model.aclose()
    assert final.get_text() == TEXT and len(server.requests) == 2

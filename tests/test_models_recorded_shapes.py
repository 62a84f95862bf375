"""The adapters against providers' real answer and request shapes (issue #32).

Each body below has the shape a provider's API reference documents or its recorded traffic
shows (Mistral's list content, Groq's in-stream error, OpenRouter's built-in tools and file
URLs, Anthropic's plain-text documents...). Answers go over the wire from a local server to
the official SDK clients where the adapters read them; request bodies are checked with
``format_request``, which is exactly what is sent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _model_calls import ask, request_of
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    anthropic_stream,
    openai_chunks,
    openai_completion,
    responses_body,
    sse,
)

from agentkit.exceptions import (
    BadRequestError,
    MessageValidationError,
    ModelAPIError,
    UnsupportedContentError,
)
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicChatModel,
    ChatResponse,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
    from_string,
)

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)
USER = [Msg("user", "hello", "user")]


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


@pytest.fixture
async def chat(server: WireServer) -> AsyncIterator[OpenAIChatModel]:
    m = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False, retry=FAST)
    yield m
    await m.aclose()


@pytest.fixture
async def claude(server: WireServer) -> AsyncIterator[AnthropicChatModel]:
    m = AnthropicChatModel(
        "claude-test", api_key="k", base_url=server.anthropic_url, stream=False, retry=FAST
    )
    yield m
    await m.aclose()


@pytest.fixture
async def responses(server: WireServer) -> AsyncIterator[OpenAIResponsesModel]:
    m = OpenAIResponsesModel(
        "gpt-test", api_key="k", base_url=server.openai_url, stream=False, retry=FAST
    )
    yield m
    await m.aclose()


async def collect(output: Any) -> list[ChatResponse]:
    return [chunk async for chunk in output]


def _chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": reason}
    return sse({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]})


# -- Mistral / Magistral: content as a list of parts -------------------------------------
THINKING = "The user greets me. I should greet back."


def _magistral_completion() -> dict[str, Any]:
    """A ``magistral-medium`` answer as Mistral's chat completions API returns it."""
    return {
        "id": "a1b2",
        "object": "chat.completion",
        "created": 1751542525,
        "model": "magistral-medium-2507",
        "usage": {"prompt_tokens": 18, "total_tokens": 40, "completion_tokens": 22},
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "tool_calls": None,
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": THINKING}]},
                        {"type": "text", "text": "Hello! "},
                        {"type": "text", "text": "How can I help?"},
                    ],
                },
            }
        ],
    }


async def test_list_content_gives_text_and_thinking(
    chat: OpenAIChatModel, server: WireServer
) -> None:
    server.script(Reply(json=_magistral_completion()))
    response = await ask(chat, USER)
    assert response.content == [
        {"type": "thinking", "thinking": THINKING},
        {"type": "text", "text": "Hello! How can I help?"},
    ]


async def test_streamed_list_content_keeps_thinking_parts(
    chat: OpenAIChatModel, server: WireServer
) -> None:
    chat.stream = True
    thought = [{"type": "thinking", "thinking": [{"type": "text", "text": "The user "}]}]
    more = [{"type": "thinking", "thinking": [{"type": "text", "text": "greets me."}]}]
    events = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": thought}),
        _chunk({"content": more}),
        _chunk({"content": [{"type": "text", "text": "Hello"}]}),
        _chunk({"content": "!"}),  # Mistral sends the answer's text as plain strings
        _chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    server.script(Stream(events))
    chunks = await collect(await ask(chat, USER))
    assert chunks[-1].content == [
        {"type": "thinking", "thinking": "The user greets me."},
        {"type": "text", "text": "Hello!"},
    ]


# -- built-in tools ----------------------------------------------------------------------
BUILT_IN = [{"type": "openrouter:web_search"}, {"type": "web_search_preview"}]
FUNCTION = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {}}},
}


async def test_built_in_tools_pass_through_chat_completions(
    chat: OpenAIChatModel, server: WireServer
) -> None:
    server.script(Reply(json=openai_completion(text="ok")))
    await ask(chat, USER, tools=[*BUILT_IN, FUNCTION])
    sent = server.requests[0].json["tools"]
    assert sent[0]["type"] == "function" and sent[0]["function"]["name"] == "add"
    assert sent[1:] == BUILT_IN  # function tools first, built-in ones as they are


def test_built_in_tools_pass_through_responses_and_anthropic(
    responses: OpenAIResponsesModel, claude: AnthropicChatModel
) -> None:
    server_tool = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    assert responses.format_request(request_of(USER, tools=BUILT_IN))["tools"] == BUILT_IN
    assert claude.format_request(request_of(USER, tools=[server_tool]))["tools"] == [server_tool]


# -- errors in a stream ------------------------------------------------------------------
GROQ_TOOL_USE_FAILED = {
    "error": {
        "message": "Failed to call a function. Please adjust your prompt.",
        "type": "invalid_request_error",
        "code": "tool_use_failed",
        "failed_generation": '<function=add{"a": 1}</function>',
    },
    "status_code": 400,
}


async def test_stream_error_event_keeps_its_status(server: WireServer) -> None:
    model = from_string(
        "groq:llama-3.3-70b", api_key="k", base_url=server.openai_url, retry=FAST, stream=True
    )
    server.script(Stream([_chunk({"role": "assistant"}), sse(GROQ_TOOL_USE_FAILED)]))
    with pytest.raises(BadRequestError, match="Failed to call a function") as caught:
        await collect(await ask(model, USER))
    assert (caught.value.status_code, caught.value.provider) == (400, "groq")
    assert len(server.requests) == 1  # a 400 is not retried
    await model.aclose()


# -- documents ---------------------------------------------------------------------------
TEXT_DOC = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."},
    "title": "Facts",
}


def test_plain_text_document_is_sent_to_anthropic(claude: AnthropicChatModel) -> None:
    msg = Msg("user", [TEXT_DOC, {"type": "text", "text": "What colour?"}], "user")
    assert Msg.from_dict(msg.to_dict()).content == msg.content
    content = claude.format_request(request_of([msg]))["messages"][0]["content"]
    assert content[0] == TEXT_DOC


def test_plain_text_document_on_chat_completions_is_text(chat: OpenAIChatModel) -> None:
    # OpenAI: "to use text from a file in Chat Completions, send its contents as text".
    msg = Msg("user", [TEXT_DOC, {"type": "text", "text": "What colour?"}], "user")
    sent = chat.format_request(request_of([msg]))["messages"][0]
    assert sent == {"role": "user", "content": "The grass is green.\nWhat colour?"}


def test_text_source_is_refused_on_images() -> None:
    image = {"type": "image", "source": {"type": "text", "media_type": "text/plain", "data": ""}}
    with pytest.raises(MessageValidationError, match=r"source\.type"):
        Msg("user", [image], "user")


async def test_document_by_url_is_sent_as_a_file_part(
    chat: OpenAIChatModel, server: WireServer
) -> None:
    url = "https://bitcoin.org/bitcoin.pdf"
    doc = {"type": "document", "source": {"type": "url", "url": url}, "filename": "bitcoin.pdf"}
    server.script(Reply(json=openai_completion(text="ok")))
    await ask(chat, [Msg("user", [doc, {"type": "text", "text": "Summarize"}], "user")])
    parts = server.requests[0].json["messages"][0]["content"]
    assert parts[0] == {"type": "file", "file": {"filename": "bitcoin.pdf", "file_data": url}}


# -- usage -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("-3920", "negative"),
        ('"12"', "not an integer"),
        ("Infinity", "not finite"),
        ("12.5", "not an integer"),
    ],
)
async def test_hostile_usage_is_an_api_error(
    chat: OpenAIChatModel, server: WireServer, raw: str, problem: str
) -> None:
    body = json.dumps(openai_completion(text="ok")).replace(
        '"prompt_tokens": 10', f'"prompt_tokens": {raw}'
    )
    server.script(Reply(body=body.encode(), headers={"content-type": "application/json"}))
    with pytest.raises(ModelAPIError, match=f"prompt_tokens.*{problem}"):
        await ask(chat, USER)


async def test_hostile_usage_on_anthropic_stream(
    claude: AnthropicChatModel, server: WireServer
) -> None:
    claude.stream = True
    events = anthropic_stream([{"type": "text", "text": "hi"}])
    events = [e.replace(b'"output_tokens": 5', b'"output_tokens": 1e400') for e in events]
    server.script(Stream(events))
    with pytest.raises(ModelAPIError, match="output_tokens"):
        await collect(await ask(claude, USER))


# -- system prompt, finish reasons -------------------------------------------------------
EMPTY_SYSTEM = [Msg("system", "", "system"), *USER]


def test_empty_system_prompt_sends_no_system_message(
    chat: OpenAIChatModel, responses: OpenAIResponsesModel, claude: AnthropicChatModel
) -> None:
    assert chat.format_request(request_of(EMPTY_SYSTEM))["messages"] == [
        {"role": "user", "content": "hello"}
    ]
    assert responses.format_request(request_of(EMPTY_SYSTEM))["input"] == [
        {"role": "user", "content": "hello"}
    ]
    assert "system" not in claude.format_request(request_of(EMPTY_SYSTEM))
    blocks = [Msg("system", [{"type": "text", "text": ""}], "system"), *USER]
    assert responses.format_request(request_of(blocks))["input"] == [
        {"role": "user", "content": "hello"}
    ]


async def test_unknown_finish_reason_is_other_and_logged(
    chat: OpenAIChatModel, server: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Reply(json=openai_completion(text="ok", finish_reason="banana")))
    with caplog.at_level(logging.DEBUG, logger="agentkit.models"):
        response = await ask(chat, USER)
    assert response.metadata is not None
    assert response.metadata["finish_reason"] == "other"
    assert response.metadata["provider_finish_reason"] == "banana"
    assert "banana" in caplog.text


async def test_unknown_anthropic_stop_reason_is_other(
    claude: AnthropicChatModel, server: WireServer
) -> None:
    body = anthropic_message([{"type": "text", "text": "ok"}])
    server.script(Reply(json={**body, "stop_reason": "banana"}), Reply(json=body))
    assert (await ask(claude, USER)).metadata == {
        "finish_reason": "other",
        "provider_finish_reason": "banana",
    }
    assert (await ask(claude, USER)).metadata == {"finish_reason": "end_turn"}


# -- streams cut before their first delta ------------------------------------------------
async def test_stream_cut_before_any_delta_is_retried(
    chat: OpenAIChatModel, server: WireServer
) -> None:
    chat.stream = True
    server.script(
        Stream(openai_chunks(text="hi")[:1], then="cut"),  # only the role chunk, then a drop
        Stream(openai_chunks(text="hello again")),
    )
    chunks = await collect(await ask(chat, USER))
    assert chunks[-1].get_text() == "hello again"
    assert all(c.get_text() for c in chunks)  # nothing of the cut attempt reached the caller
    assert len(server.requests) == 2


async def test_anthropic_stream_cut_before_any_delta_is_retried(
    claude: AnthropicChatModel, server: WireServer
) -> None:
    claude.stream = True
    events = anthropic_stream([{"type": "text", "text": "hello"}])
    server.script(Stream(events[:2], then="cut"), Stream(events))  # message_start, block start
    chunks = await collect(await ask(claude, USER))
    assert chunks[-1].get_text() == "hello"
    assert len(server.requests) == 2


# -- Responses: a reasoning item always has its following item ---------------------------
def test_orphan_reasoning_item_is_not_sent(responses: OpenAIResponsesModel) -> None:
    reasoning = {
        "type": "thinking",
        "thinking": "",
        "reasoning_id": "rs_1",
        "encrypted_content": "gAAA",
    }
    kept = {**reasoning, "reasoning_id": "rs_2"}
    history = [
        *USER,
        Msg("assistant", [reasoning], "assistant"),  # cut after its reasoning item
        Msg("user", "go on", "user"),
        Msg("assistant", [kept, {"type": "text", "text": "done"}], "assistant"),
    ]
    items = responses.format_request(request_of(history))["input"]
    assert [i.get("id") for i in items if i.get("type") == "reasoning"] == ["rs_2"]
    assert responses.format_request(request_of(history))["store"] is False


def test_responses_usage_is_checked(responses: OpenAIResponsesModel) -> None:
    from agentkit.models._responses_format import parse_response

    body = responses_body([{"type": "message", "content": []}])
    body["usage"] = {"input_tokens": 3, "output_tokens": -1}
    with pytest.raises(ModelAPIError, match="output_tokens"):
        parse_response(body, 0.0)


def test_unsupported_content_error_still_refuses_audio_urls(chat: OpenAIChatModel) -> None:
    audio = {"type": "audio", "source": {"type": "url", "url": "https://x/a.wav"}}
    with pytest.raises(UnsupportedContentError):
        chat.format_request(request_of([Msg("user", [audio], "user")]))

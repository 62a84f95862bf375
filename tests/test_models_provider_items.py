"""Anthropic citations, server-tool blocks and prompt caching; Responses built-in tool items."""

from __future__ import annotations

import json
from typing import Any

from _model_calls import ask, request_of
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    anthropic_stream,
    responses_body,
    responses_message,
    sse,
)

from agentkit.messages import Msg
from agentkit.models import AnthropicChatModel, ChatResponse, OpenAIResponsesModel
from agentkit.models import _openai_format as oai
from agentkit.models import _responses_format as rsp

USER = [Msg("user", "What is new?", "user")]
CITATION = {
    "type": "web_search_result_location",
    "url": "https://news.test/a",
    "title": "A",
    "encrypted_index": "EIDX",
    "cited_text": "Something new.",
}
SERVER_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "news"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://news.test/a",
            "title": "A",
            "encrypted_content": "ENC",
            "page_age": None,
        }
    ],
}
ANSWER = {"type": "text", "text": "Something new.", "citations": [CITATION]}
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}


def _provider(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "provider_item", "provider": "anthropic", "item": item}


async def test_server_tool_blocks_and_citations_are_kept_and_replayed() -> None:
    async with WireServer() as server:
        server.script(
            Reply(json=anthropic_message([SERVER_USE, SEARCH_RESULT, ANSWER])),
            Reply(json=anthropic_message([{"type": "text", "text": "ok"}])),
        )
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url, stream=False)
        first = await ask(model, USER, tools=[WEB_SEARCH_TOOL])
        assert isinstance(first, ChatResponse)
        assert first.content == [_provider(SERVER_USE), _provider(SEARCH_RESULT), ANSWER]
        assert first.tool_calls == []  # a server tool is not ours to run
        reply = Msg("bot", first.content, "assistant")
        restored = Msg.from_dict(json.loads(json.dumps(reply.to_dict())))
        await ask(model, [*USER, restored, Msg("user", "More?", "user")])
        await model.aclose()
        sent = server.requests[1].json["messages"]
    assert sent[1] == {"role": "assistant", "content": [SERVER_USE, SEARCH_RESULT, ANSWER]}
    # Built-in tool specs pass through to the API as given.
    assert server.requests[0].json["tools"][0]["type"] == "web_search_20250305"


async def test_streamed_server_tool_input_and_citation_deltas() -> None:
    events = anthropic_stream([], stop=False)[:2]  # message_start, ping
    start_use = {**SERVER_USE, "input": {}}
    events += [
        sse({"type": "content_block_start", "index": 0, "content_block": start_use}),
        sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": '},
            }
        ),
        sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '"news"}'},
            }
        ),
        sse({"type": "content_block_stop", "index": 0}),
        sse({"type": "content_block_start", "index": 1, "content_block": SEARCH_RESULT}),
        sse({"type": "content_block_stop", "index": 1}),
        sse(
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "text", "text": "", "citations": []},
            }
        ),
        sse(
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "citations_delta", "citation": CITATION},
            }
        ),
        sse(
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "text_delta", "text": "Something new."},
            }
        ),
        sse({"type": "content_block_stop", "index": 2}),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9, "server_tool_use": {"web_search_requests": 1}},
            }
        ),
        sse({"type": "message_stop"}),
    ]
    async with WireServer() as server:
        server.script(Stream(events))
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url)
        chunks = [c async for c in await ask(model, USER)]  # type: ignore[union-attr]
        await model.aclose()
    assert chunks[-1].content == [_provider(SERVER_USE), _provider(SEARCH_RESULT), ANSWER]


async def test_prompt_caching_marks_system_and_tools_and_reports_cache_usage() -> None:
    usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 0,
        "output_tokens": 3,
    }
    second = {**usage, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1000}
    body = anthropic_message([{"type": "text", "text": "hi"}])
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    other = {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}
    messages = [Msg("s", "You are terse.", "system"), *USER]
    async with WireServer() as server:
        server.script(Reply(json={**body, "usage": usage}), Reply(json={**body, "usage": second}))
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url, stream=False)
        first = await ask(model, messages, tools=[tool, other], cache={})
        again = await ask(model, messages, tools=[tool, other], cache={"ttl": "1h"})
        await model.aclose()
        requests = [r.json for r in server.requests]
    ephemeral = {"type": "ephemeral"}
    assert requests[0]["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": ephemeral}
    ]
    assert "cache_control" not in requests[0]["tools"][0]
    assert requests[0]["tools"][1]["cache_control"] == ephemeral
    assert requests[1]["tools"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert isinstance(first, ChatResponse) and isinstance(again, ChatResponse)
    assert first.usage is not None and again.usage is not None
    assert (first.usage.input_tokens, first.usage.cache_write_tokens) == (1005, 1000)
    assert (again.usage.cache_read_tokens, again.usage.cache_write_tokens) == (1000, 0)


def test_caching_is_off_by_default() -> None:
    model = AnthropicChatModel("c", api_key="k")
    body = model.format_request(request_of([Msg("s", "sys", "system"), *USER]))
    assert "cache_control" not in json.dumps(body)


def test_provider_items_go_only_to_their_provider() -> None:
    anthropic_item = _provider(SERVER_USE)
    web_call = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
    responses_item = {"type": "provider_item", "provider": "openai-responses", "item": web_call}
    history = [
        *USER,
        Msg("bot", [anthropic_item, responses_item, {"type": "text", "text": "x"}], "assistant"),  # type: ignore[list-item]
    ]
    assert oai.format_messages(history)[1] == {"role": "assistant", "content": "x"}
    assert rsp.format_input(history)[1:] == [web_call, {"role": "assistant", "content": "x"}]
    model = AnthropicChatModel("c", api_key="k")
    turns = model.format_request(request_of(history))["messages"]
    assert turns[1]["content"] == [SERVER_USE, {"type": "text", "text": "x"}]


async def test_responses_built_in_tool_items_are_kept_and_replayed() -> None:
    web_call = {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "news"},
    }
    async with WireServer() as server:
        server.script(Reply(json=responses_body([web_call, responses_message("Found it.")])))
        model = OpenAIResponsesModel("g", api_key="k", base_url=server.openai_url, stream=False)
        response = await ask(model, USER, tools=[{"type": "web_search"}])
        await model.aclose()
    assert isinstance(response, ChatResponse)
    assert response.content[0] == {
        "type": "provider_item",
        "provider": "openai-responses",
        "item": web_call,
    }
    assert server.requests[0].json["tools"] == [{"type": "web_search"}]
    replay = rsp.format_input([*USER, Msg("bot", response.content, "assistant")])
    assert replay[1:] == [web_call, {"role": "assistant", "content": "Found it."}]


def test_responses_text_annotations_are_kept() -> None:
    citation = {
        "type": "url_citation",
        "url": "https://x",
        "title": "X",
        "start_index": 0,
        "end_index": 1,
    }
    message = responses_message("Cited.")
    message["content"][0]["annotations"] = [citation]
    response = rsp.parse_response(responses_body([message]), 0.0)
    assert response.content == [{"type": "text", "text": "Cited.", "annotations": [citation]}]

"""Prompt caching across providers: ``settings["cache"]`` (``PromptCaching`` for an agent)
becomes each provider's wire form, sent by the official SDKs to a local server (Anthropic
``cache_control`` breakpoints, Bedrock ``cachePoint`` blocks, OpenAI ``prompt_cache_key`` and
``prompt_cache_retention``, Gemini's ``cachedContent`` without what the cache holds); cache
reads and writes (one-hour writes apart) are counted on every adapter and priced; a request
whose tools or system prompt changed emits ``CacheBusted``; and with ``ToolSearch`` the
request up to the previous request's last cache point stays byte-identical."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    responses_body,
    responses_message,
    sse,
)

from agentkit import Msg, PromptCaching, ReActAgent, ToolSearch
from agentkit.agent import Capability, RunContext
from agentkit.events import CacheBusted
from agentkit.exceptions import UsageError
from agentkit.models import (
    AnthropicChatModel,
    BedrockConverseModel,
    ChatUsage,
    GoogleModel,
    ModelPrice,
    ModelRequest,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
    ToolDefinition,
    set_price,
)
from agentkit.models._prices import cost_of
from agentkit.testing import ScriptedModel, tool_use

FAST = RetryPolicy(max_retries=0)
ADD = ToolDefinition("add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}})
MUL = ToolDefinition("mul", "Multiply.", {"type": "object", "properties": {}})
CALL = {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1}}
RESULT = {"type": "tool_result", "id": "c1", "name": "add", "output": "2"}
# A tool loop's second request: system, question, call, result.
LOOP = [
    Msg("s", "Be brief.", "system"),
    Msg("u", "What is 1+1?", "user"),
    Msg("bot", [CALL], "assistant"),  # type: ignore[list-item]
    Msg("tool", [RESULT], "user"),
]
EPHEMERAL = {"type": "ephemeral"}


# -- Anthropic: cache_control breakpoints -----------------------------------------------------
async def test_anthropic_marks_tools_system_and_the_last_two_user_turns() -> None:
    usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 1000,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
        "output_tokens": 3,
    }
    async with WireServer() as server:
        body = {**anthropic_message([{"type": "text", "text": "2"}]), "usage": usage}
        server.script(Reply(json=body), Reply(json=body))
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url, stream=False)
        first = await model.request(ModelRequest(LOOP, [ADD, MUL], settings={"cache": {}}))
        await model.request(
            ModelRequest(LOOP, [ADD, MUL], settings={"cache": {"ttl": "1h", "points": ["system"]}})
        )
        await model.aclose()
        sent = [r.json for r in server.requests]
        betas = [r.headers.get("anthropic-beta") for r in server.requests]
    assert betas == [None, "extended-cache-ttl-2025-04-11"]  # the one-hour lifetime's beta
    body0 = sent[0]
    assert "cache_control" not in body0["tools"][0]
    assert body0["tools"][1]["cache_control"] == EPHEMERAL
    assert body0["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    user_turns = [t for t in body0["messages"] if t["role"] == "user"]
    assert [t["content"][-1].get("cache_control") for t in user_turns] == [EPHEMERAL] * 2
    assert "cache_control" not in json.dumps(body0["messages"][1])  # the assistant turn
    assert json.dumps(body0).count("cache_control") == 4  # the API's limit
    body1 = sent[1]  # only the system point, one hour
    assert body1["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert json.dumps(body1).count("cache_control") == 1
    assert first.usage is not None
    assert first.usage.input_tokens == 1305
    assert (first.usage.cache_read_tokens, first.usage.cache_write_tokens) == (1000, 300)
    assert first.usage.cache_write_1h_tokens == 200


async def test_anthropic_streamed_cache_usage_comes_from_message_start() -> None:
    events = anthropic_stream([{"type": "text", "text": "2"}])
    start = json.loads(events[0].split(b"data: ", 1)[1])
    start["message"]["usage"].update(
        {
            "input_tokens": 4,
            "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 500,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 500},
        }
    )
    events[0] = sse(start, "message_start")
    async with WireServer() as server:
        server.script(Stream(events=events))
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url)
        chunks = [
            c
            async for c in model.request_stream(
                ModelRequest(LOOP, [ADD], settings={"cache": {"ttl": "1h"}})
            )
        ]
        await model.aclose()
        sent = server.requests[0].json
    usage = chunks[-1].usage
    assert usage is not None and usage.input_tokens == 2504
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (2000, 500)
    assert usage.cache_write_1h_tokens == 500
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_anthropic_breakpoints_the_caller_placed_count_against_the_limit() -> None:
    model = AnthropicChatModel("c", api_key="k", stream=False)
    marked = Msg(
        "s", [{"type": "text", "text": "Long manual.", "cache_control": EPHEMERAL}], "system"
    )  # type: ignore[list-item]
    body = model.format_request(ModelRequest([marked, *LOOP[1:]], [ADD], settings={"cache": {}}))
    text = json.dumps(body)
    assert text.count("cache_control") == 4  # the caller's, tools, and two user turns
    assert body["system"] == [{"type": "text", "text": "Long manual.", "cache_control": EPHEMERAL}]
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    # Formatting again gives the same body: the shared wire blocks were not marked in place.
    again = model.format_request(ModelRequest([marked, *LOOP[1:]], [ADD]))
    assert json.dumps(again).count("cache_control") == 1
    # A tool the caller marked is one sent as it is (a built-in, provider-shaped one): it
    # comes last, so the tools' point is the caller's and both user turns get one of ours.
    tool = {"name": "add", "input_schema": dict(ADD.parameters), "cache_control": EPHEMERAL}
    body = model.format_request(
        ModelRequest([marked, *LOOP[1:]], [MUL], [tool], settings={"cache": {}})
    )
    assert json.dumps(body).count("cache_control") == 4  # never more than the API takes
    assert body["tools"][-1] == tool and "cache_control" not in body["tools"][0]
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert body["messages"][0]["content"][-1]["cache_control"] == EPHEMERAL
    # With a third mark of the caller's, only the latest user turn gets one of ours.
    busy = Msg("u", [{"type": "text", "text": "What is 1+1?", "cache_control": EPHEMERAL}], "user")
    body = model.format_request(
        ModelRequest([marked, busy, *LOOP[2:]], [MUL], [tool], settings={"cache": {}})
    )
    assert json.dumps(body).count("cache_control") == 4


# -- OpenAI: prompt_cache_key and retention -------------------------------------------------
async def test_openai_chat_and_responses_send_the_cache_key_and_retention() -> None:
    chat_usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 1024},
    }
    async with WireServer() as server:
        server.script(
            Reply(json={**openai_completion(text="2"), "usage": chat_usage}),
            Reply(json=openai_completion(text="2")),
            Reply(json=responses_body([responses_message("2")], usage=(1200, 3), cached=1152)),
        )
        chat = OpenAIChatModel("gpt-4.1", api_key="k", base_url=server.openai_url, stream=False)
        cached = await chat.request(
            ModelRequest(LOOP, [ADD], settings={"cache": {"key": "conv-7", "ttl": "1h"}})
        )
        await chat.request(ModelRequest(LOOP, [ADD], settings={"cache": {}}))
        responses = OpenAIResponsesModel(
            "gpt-5", api_key="k", base_url=server.openai_url, stream=False
        )
        answer = await responses.request(
            ModelRequest(LOOP, [ADD], settings={"cache": {"key": "conv-7"}})
        )
        await chat.aclose()
        await responses.aclose()
        sent = [r.json for r in server.requests]
    assert sent[0]["prompt_cache_key"] == "conv-7"
    assert sent[0]["prompt_cache_retention"] == "24h"
    assert "cache" not in sent[0]
    assert "prompt_cache_key" not in sent[1] and "prompt_cache_retention" not in sent[1]
    assert "cache_control" not in json.dumps(sent[0])  # no marks in the prompt
    assert sent[2]["prompt_cache_key"] == "conv-7" and "prompt_cache_retention" not in sent[2]
    assert cached.usage is not None and cached.usage.cache_read_tokens == 1024
    assert answer.usage is not None and answer.usage.cache_read_tokens == 1152


async def test_compatible_servers_report_cache_tokens_their_way() -> None:
    deepseek = {
        "prompt_tokens": 900,
        "completion_tokens": 3,
        "prompt_cache_hit_tokens": 640,
        "prompt_cache_miss_tokens": 260,
    }
    openrouter = {
        "prompt_tokens": 900,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 880},
    }
    async with WireServer() as server:
        server.script(
            Reply(json={**openai_completion(text="a"), "usage": deepseek}),
            Reply(json={**openai_completion(text="b"), "usage": openrouter}),
        )
        model = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False)
        first = await model.request(ModelRequest(LOOP))
        second = await model.request(ModelRequest(LOOP))
        await model.aclose()
    assert first.usage is not None and first.usage.cache_read_tokens == 640
    assert second.usage is not None and second.usage.cache_write_tokens == 880


# -- Bedrock Converse: cachePoint blocks -------------------------------------------------
def _converse(usage: dict[str, Any]) -> Reply:
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": "2"}]}},
        "stopReason": "end_turn",
        "usage": usage,
        "metrics": {"latencyMs": 5},
    }
    return Reply(json=body, headers={"x-amzn-requestid": "r-1"})


def _bedrock(server: WireServer, model_id: str) -> BedrockConverseModel:
    return BedrockConverseModel(
        model_id,
        region="us-east-1",
        aws_access_key="AKIDEXAMPLE",
        aws_secret_key="secret",
        base_url=server.url,
        retry=FAST,
        stream=False,
    )


async def test_bedrock_converse_puts_cache_points_after_tools_system_and_user_turns() -> None:
    usage = {
        "inputTokens": 5,
        "outputTokens": 3,
        "totalTokens": 1308,
        "cacheReadInputTokens": 1000,
        "cacheWriteInputTokens": 300,
        "cacheDetails": [{"ttl": "1h", "inputTokens": 200}, {"ttl": "5m", "inputTokens": 100}],
    }
    point = {"cachePoint": {"type": "default", "ttl": "1h"}}
    async with WireServer() as server:
        server.script(_converse(usage), _converse(usage))
        claude = _bedrock(server, "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
        answer = await claude.request(ModelRequest(LOOP, [ADD], settings={"cache": {"ttl": "1h"}}))
        nova = _bedrock(server, "us.amazon.nova-lite-v1:0")
        await nova.request(ModelRequest(LOOP, [ADD], settings={"cache": {}}))
        await claude.aclose()
        await nova.aclose()
        sent = [r.json for r in server.requests]
    body = sent[0]
    assert body["toolConfig"]["tools"][-1] == point
    assert body["system"] == [{"text": "Be brief."}, point]
    user_turns = [t for t in body["messages"] if t["role"] == "user"]
    assert [t["content"][-1] for t in user_turns] == [point, point]
    assert "cachePoint" not in json.dumps([t for t in body["messages"] if t["role"] != "user"])
    assert answer.usage is not None
    assert answer.usage.input_tokens == 1305  # inputTokens leaves the cached ones out
    assert (answer.usage.cache_read_tokens, answer.usage.cache_write_tokens) == (1000, 300)
    assert answer.usage.cache_write_1h_tokens == 200
    nova_body = sent[1]  # Nova caches no tools: three points, default lifetime
    assert "cachePoint" not in json.dumps(nova_body["toolConfig"])
    assert nova_body["system"][-1] == {"cachePoint": {"type": "default"}}
    assert json.dumps(nova_body).count("cachePoint") == 3


# -- Gemini: implicit caching, explicit cached content --------------------------------------
async def test_gemini_cached_content_leaves_out_what_the_cache_holds() -> None:
    meta = {
        "promptTokenCount": 1500,
        "candidatesTokenCount": 2,
        "totalTokenCount": 1502,
        "cachedContentTokenCount": 1400,
    }
    answer = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "2"}]}, "index": 0}],
        "usageMetadata": meta,
    }
    answer["candidates"][0]["finishReason"] = "STOP"
    async with WireServer() as server:
        server.script(Reply(json=answer), Reply(json=answer))
        model = GoogleModel(
            "gemini-2.5-flash", api_key="g", base_url=server.url, stream=False, retry=FAST
        )
        implicit = await model.request(
            ModelRequest(LOOP, [ADD], settings={"cache": {"key": "ignored"}})
        )
        explicit = await model.request(
            ModelRequest(
                LOOP,
                [ADD],
                settings={"cache": {}, "extra_body": {"cached_content": "cachedContents/abc"}},
            )
        )
        await model.aclose()
        sent = [r.json for r in server.requests]
    assert "systemInstruction" in sent[0] and "tools" in sent[0]  # implicit: nothing changes
    assert "cache" not in json.dumps(sent[0]).lower().replace("cachedcontent", "")
    assert sent[1]["cachedContent"] == "cachedContents/abc"
    assert not {"systemInstruction", "tools", "toolConfig"} & set(sent[1])
    assert sent[1]["contents"] == sent[0]["contents"]
    assert implicit.usage is not None and implicit.usage.cache_read_tokens == 1400
    assert explicit.usage is not None and explicit.usage.cache_read_tokens == 1400


# -- cost ----------------------------------------------------------------------------------
def test_cache_reads_and_writes_are_priced_apart() -> None:
    usage = ChatUsage(
        input_tokens=1_000_000,
        output_tokens=0,
        cache_read_tokens=400_000,
        cache_write_tokens=300_000,
        cache_write_1h_tokens=100_000,
    )
    price = ModelPrice(
        input_per_mtok=3.0,
        output_per_mtok=15.0,
        cache_read_per_mtok=0.3,
        cache_write_per_mtok=3.75,
        cache_write_1h_per_mtok=6.0,
    )
    # 300k plain at 3, 400k reads at 0.3, 200k 5-minute writes at 3.75, 100k 1-hour at 6.
    assert price.cost(usage) == pytest.approx(0.9 + 0.12 + 0.75 + 0.6)
    without_long = ModelPrice(3.0, 15.0, cache_read_per_mtok=0.3, cache_write_per_mtok=3.75)
    assert without_long.cost(usage) == pytest.approx(0.9 + 0.12 + 1.125)
    set_price("cached-model", price)
    try:
        assert cost_of(usage, "cached-model", "anthropic") == pytest.approx(2.37)
    finally:
        set_price("cached-model", None)


def test_the_price_table_prices_each_providers_cache_tokens() -> None:
    pytest.importorskip("genai_prices")
    small = ChatUsage(100_000, 0, cache_read_tokens=50_000, cache_write_tokens=20_000)
    long_writes = ChatUsage(
        100_000,
        0,
        cache_read_tokens=50_000,
        cache_write_tokens=20_000,
        cache_write_1h_tokens=20_000,
    )
    # Anthropic (claude-sonnet-4-5): input 3, reads 0.3 (0.1x), writes 3.75 (1.25x), 1h 6 (2x).
    anthropic = cost_of(small, "claude-sonnet-4-5", "anthropic")
    assert anthropic == pytest.approx((30_000 * 3 + 50_000 * 0.3 + 20_000 * 3.75) / 1e6)
    hour = cost_of(long_writes, "claude-sonnet-4-5", "anthropic")
    assert hour == pytest.approx((30_000 * 3 + 50_000 * 0.3 + 20_000 * 6) / 1e6)
    # OpenAI (gpt-4.1): input 2, cached input 0.5.
    reads = ChatUsage(100_000, 0, cache_read_tokens=50_000)
    assert cost_of(reads, "gpt-4.1", "openai") == pytest.approx((50_000 * 2 + 50_000 * 0.5) / 1e6)
    # Gemini (gemini-2.5-flash): input 0.3, cached 0.03.
    gemini = cost_of(reads, "gemini-2.5-flash", "gemini")
    assert gemini == pytest.approx((50_000 * 0.3 + 50_000 * 0.03) / 1e6)
    # Bedrock: reads below the input price.
    bedrock = cost_of(reads, "anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock")
    plain = cost_of(ChatUsage(100_000, 0), "anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock")
    assert bedrock is not None and plain is not None and bedrock < plain


# -- the CacheBusted event -------------------------------------------------------------------
class Clock(Capability[Any]):
    """Instructions that change on every request (a timestamp): each busts the cache."""

    def __init__(self) -> None:
        self.ticks = 0

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        self.ticks += 1
        return f"Now: tick {self.ticks}."


async def _events(agent: ReActAgent[Any, Any], prompt: str) -> list[object]:
    return [event async for event in agent.stream(prompt)]


def _toolkit() -> Any:
    from agentkit import Toolkit

    toolkit = Toolkit()

    @toolkit.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return toolkit


async def test_a_stable_prefix_emits_no_bust_and_every_request_asks_for_caching() -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "3", "again"])
    agent = ReActAgent("a", "sys", model, _toolkit(), capabilities=[PromptCaching(key="k1")])
    events = await _events(agent, "1+2?") + await _events(agent, "again")
    assert not [e for e in events if isinstance(e, CacheBusted)]
    assert [r.settings.get("cache") for r in model.requests] == [{"key": "k1"}] * 3


async def test_changing_instructions_bust_the_cache_on_every_later_request() -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "3"])
    clock = Clock()
    agent = ReActAgent("a", "sys", model, _toolkit(), capabilities=[PromptCaching(), clock])
    events = await _events(agent, "1+2?")
    busts = [e for e in events if isinstance(e, CacheBusted)]
    assert busts == [CacheBusted(("system",))]
    order = [type(e).__name__ for e in events]
    # Announced before the request it concerns: after the tool result, before the answer.
    assert order.index("CacheBusted") > order.index("ToolResult")
    assert order.index("CacheBusted") < order.index("TextDelta")


class GrowingTools(Capability[Any]):
    """Offers one more tool on each request: the tool list changes."""

    def __init__(self) -> None:
        self.n = 0

    async def before_model(self, ctx: RunContext[Any], request: Any) -> Any:
        from dataclasses import replace

        self.n += 1
        extra = [ToolDefinition(f"extra_{i}", "x", {"type": "object"}) for i in range(self.n)]
        return replace(request, tools=[*request.tools, *extra])


async def test_tools_added_between_requests_bust_the_cache_and_are_named() -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "3"])
    agent = ReActAgent(
        "a", "sys", model, _toolkit(), capabilities=[PromptCaching(), GrowingTools()]
    )
    busts = [e for e in await _events(agent, "1+2?") if isinstance(e, CacheBusted)]
    assert busts == [CacheBusted(("tools",), added_tools=("extra_1",))]


async def test_without_caching_asked_no_bust_is_reported() -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "3"])
    agent = ReActAgent("a", "sys", model, _toolkit(), capabilities=[Clock()])
    events = await _events(agent, "1+2?")
    assert not [e for e in events if isinstance(e, CacheBusted)]
    assert all("cache" not in r.settings for r in model.requests)


async def test_the_cache_key_may_come_from_the_runs_dependencies() -> None:
    model = ScriptedModel(["hi"])
    caching = PromptCaching(key=lambda ctx: f"user-{ctx.deps}", points=["tools", "system"])
    agent = ReActAgent("a", "sys", model, capabilities=[caching])
    await agent.run("hello", deps=42)
    assert model.requests[0].settings["cache"] == {"points": ["tools", "system"], "key": "user-42"}


def test_bad_caching_options_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="ttl"):
        PromptCaching(ttl="2h")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="points"):
        PromptCaching(points=["prefix"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="key"):
        PromptCaching(key="")


def unmarked(value: Any) -> Any:
    """``value`` without its ``cache_control`` marks."""
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    return value


# -- ToolSearch keeps the request up to the previous cache point byte-identical --------------
async def test_tool_search_loads_keep_the_cached_prefix_byte_identical_with_cache_points() -> None:
    from agentkit import Tool, Toolkit, ToolResponse

    class Named(Tool):
        async def invoke(self, arguments: dict[str, object]) -> Any:
            yield ToolResponse.text(f"{self.name} ran")

    toolkit = Toolkit()
    for name, text in [("github_create_issue", "Create a GitHub issue."), ("read_file", "Read.")]:
        toolkit.register_tool(Named(name, text, {"type": "object", "properties": {}}))
    model = ScriptedModel(
        [
            tool_use("search_tools", "c1", query="create github issue"),
            tool_use("github_create_issue", "c2"),
            "Filed.",
        ]
    )
    agent = ReActAgent(
        "a", "sys", model, toolkit, capabilities=[ToolSearch(), PromptCaching(key="conv")]
    )
    events = await _events(agent, "File a bug")
    assert not [e for e in events if isinstance(e, CacheBusted)]
    claude = AnthropicChatModel("c", api_key="k", stream=False)
    gpt = OpenAIChatModel("gpt-4.1", api_key="k", stream=False)
    bodies = []
    for request in model.requests:
        assert request.settings["cache"] == {"key": "conv"}
        anthropic = claude.format_request(request)
        openai = gpt.format_request(request)
        bodies.append((anthropic, openai))
    for (before, before_oa), (after, after_oa) in itertools.pairwise(bodies):
        # Anthropic: the previous request's last cache point (its last user turn) is still
        # in place, so the next request reads exactly the entry it wrote; everything up to
        # it is the same bytes. Only the older mark moves on (the API does not count marks
        # as part of the cached prefix).
        last = len(before["messages"]) - 1
        assert before["messages"][last] == after["messages"][last]  # marks included
        assert "cache_control" in json.dumps(after["messages"][last])
        head = ("tools", "system")
        assert json.dumps([before[k] for k in head]) == json.dumps([after[k] for k in head])
        assert json.dumps(unmarked(before["messages"])) == json.dumps(
            unmarked(after["messages"][: last + 1])
        )
        # OpenAI: no marks; tools and the conversation so far are a byte-identical prefix.
        assert json.dumps(before_oa["tools"]) == json.dumps(after_oa["tools"])
        count = len(before_oa["messages"])
        assert json.dumps(before_oa["messages"]) == json.dumps(after_oa["messages"][:count])
        assert before_oa["prompt_cache_key"] == after_oa["prompt_cache_key"] == "conv"

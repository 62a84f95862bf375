"""Loading a tool through ``ToolSearch`` never busts the prompt cache. On the Claude API the
other tools go with ``defer_loading: true`` and a search's result is ``tool_reference``
blocks (the API's own tool search: sent by the official SDK to a local server); on the
OpenAI Responses API, opted in with ``native_tool_search=True``, the search is the API's
client-executed ``tool_search`` and a result is a ``tool_search_output`` item; every other
adapter leaves the deferred tools out and the search result's text carries the definitions.
On every adapter the serialized request up to the previous request's end is byte-identical
before and after a load."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    responses_body,
    responses_call,
    responses_message,
    responses_stream,
)

from agentkit import Msg, PromptCaching, ReActAgent, Tool, Toolkit, ToolResponse, ToolSearch
from agentkit.agent._tool_search import tool_loads
from agentkit.models import (
    AnthropicBedrockModel,
    AnthropicChatModel,
    AnthropicVertexModel,
    BedrockConverseModel,
    DeferredTools,
    GoogleModel,
    ModelRequest,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
    ToolDefinition,
)
from agentkit.models._anthropic_format import format_tools
from agentkit.testing import ScriptedModel, tool_use

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [
    ("github_create_issue", "Create a GitHub issue in a repository."),
    ("read_file", "Read a file from the workspace."),
    ("slack_post_message", "Post a message to a Slack channel."),
]


class Named(Tool):
    async def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        yield ToolResponse.text(f"{self.name} ran")


def toolkit() -> Toolkit:
    kit = Toolkit()
    for name, text in TOOLS:
        schema = {"type": "object", "properties": {"title": {"type": "string"}}}
        kit.register_tool(Named(name, text, schema))
    return kit


def agent_for(model: Any) -> ReActAgent[Any, Any]:
    return ReActAgent(
        "a",
        "sys",
        model,
        toolkit(),
        capabilities=[ToolSearch(always=["read_file"]), PromptCaching(key="conv")],
    )


def unmarked(value: Any) -> Any:
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    return value


async def test_claude_gets_deferred_tools_and_tool_references_through_the_sdk() -> None:
    search = {"type": "tool_use", "id": "toolu_1", "name": "search_tools"}
    call = {"type": "tool_use", "id": "toolu_2", "name": "github_create_issue"}
    async with WireServer() as server:
        server.script(
            Reply(json=anthropic_message([{**search, "input": {"query": "github issue"}}])),
            Reply(json=anthropic_message([{**call, "input": {"title": "bug"}}], id="m2")),
            Reply(json=anthropic_message([{"type": "text", "text": "Filed."}], id="m3")),
        )
        model = AnthropicChatModel(
            "claude-sonnet-4-5",
            api_key="k",
            base_url=server.anthropic_url,
            stream=False,
            retry=RetryPolicy(max_retries=0),
        )
        result = await agent_for(model).run("File a bug")
        await model.aclose()
        sent = [r.json for r in server.requests]
        betas = {r.headers.get("anthropic-beta") for r in server.requests}
    assert result.output == "Filed."
    assert betas == {None}  # tool search is GA on the Claude API: no beta header
    first = sent[0]["tools"]
    # Offered tools first (the cache point on the last of them), then every other tool
    # deferred, the same on every request.
    assert [(t["name"], t.get("defer_loading")) for t in first] == [
        ("search_tools", None),
        ("read_file", None),
        ("github_create_issue", True),
        ("slack_post_message", True),
    ]
    assert first[1]["cache_control"] == EPHEMERAL
    assert all("cache_control" not in t for t in first if t.get("defer_loading"))
    assert all(json.dumps(body["tools"]) == json.dumps(first) for body in sent)
    # The search's result is a reference the API resolves to the deferred definition.
    result_block = sent[1]["messages"][-1]["content"][0]
    assert result_block["type"] == "tool_result"
    assert result_block["tool_use_id"] == "toolu_1"
    assert result_block["content"] == [
        {"type": "tool_reference", "tool_name": "github_create_issue"}
    ]
    assert "input_schema" not in json.dumps(sent[1]["messages"])  # no definition in the stream
    # The request up to the previous request's last cache point is byte-identical.
    for before, after in itertools.pairwise(sent):
        last = len(before["messages"]) - 1
        assert before["messages"][last] == after["messages"][last]
        assert json.dumps([before["tools"], before["system"]]) == json.dumps(
            [after["tools"], after["system"]]
        )
        assert json.dumps(unmarked(before["messages"])) == json.dumps(
            unmarked(after["messages"][: last + 1])
        )


def test_a_load_whose_tools_are_gone_keeps_its_text_and_unknown_names_are_not_referenced() -> None:
    found = {"loaded_tools": [{"name": "gone"}, {"name": "kept"}]}
    messages = [
        Msg("u", "go", "user"),
        Msg(
            "bot",
            [{"type": "tool_use", "id": "c1", "name": "search_tools", "input": {}}],
            "assistant",
        ),
        Msg(
            "tool",
            [
                {
                    "type": "tool_result",
                    "id": "c1",
                    "name": "search_tools",
                    "output": json.dumps(found),
                }
            ],
            "user",
        ),
    ]
    assert tool_loads(messages) == {"c1": ("gone", "kept")}
    kept = ToolDefinition("kept", "Kept.", {"type": "object"})
    model = AnthropicChatModel("c", api_key="k", stream=False)
    body = model.format_request(
        ModelRequest(messages, deferred=DeferredTools((kept,), tool_loads(messages)))
    )
    assert body["messages"][-1]["content"][0]["content"] == [
        {"type": "tool_reference", "tool_name": "kept"}
    ]
    body = model.format_request(
        ModelRequest(messages, deferred=DeferredTools((), tool_loads(messages)))
    )
    assert body["messages"][-1]["content"][0]["content"] == json.dumps(found)
    # An offered tool is never repeated as a deferred one.
    assert [t["name"] for t in format_tools([kept], (), [kept])] == ["kept"]


# -- OpenAI Responses: the API's client-executed tool search ----------------------------------
def tool_search_call(call_id: str, query: str) -> dict[str, Any]:
    """A client-executed ``tool_search_call`` output item, as the Responses API returns it."""
    return {
        "id": f"tsc_{call_id}",
        "type": "tool_search_call",
        "execution": "client",
        "call_id": call_id,
        "status": "completed",
        "arguments": {"query": query},
    }


SEARCH_TURNS = [
    [tool_search_call("call_s1", "github issue")],
    [responses_call("call_2", "github_create_issue", '{"title": "bug"}')],
    [responses_message("Filed.")],
]


async def responses_run(stream: bool) -> tuple[Any, list[Any], list[Msg], OpenAIResponsesModel]:
    """A search, a call of the loaded tool and an answer, through the SDK to a local server."""
    async with WireServer() as server:
        server.script(
            *(
                Stream(responses_stream(turn, id=f"resp_{n}"))
                if stream
                else Reply(json=responses_body(turn, id=f"resp_{n}"))
                for n, turn in enumerate(SEARCH_TURNS)
            )
        )
        model = OpenAIResponsesModel(
            "gpt-5.4",
            api_key="k",
            base_url=server.openai_url,
            stream=stream,
            native_tool_search=True,
            retry=RetryPolicy(max_retries=0),
        )
        agent = agent_for(model)
        result = await agent.run("File a bug")
        await model.aclose()
        memory = await agent.memory.get_memory()
        return result, [r.json for r in server.requests], memory, model


async def test_responses_sends_the_search_as_the_api_tool_search_through_the_sdk() -> None:
    result, sent, memory, model = await responses_run(stream=False)
    assert result.output == "Filed."
    assert len(sent) == 3
    tools = sent[0]["tools"]
    # The search in its place as the client-executed tool_search, the always-on tool, then
    # every other tool deferred: the same bytes on every request.
    assert [(t["type"], t.get("name"), t.get("defer_loading")) for t in tools] == [
        ("tool_search", None, None),
        ("function", "read_file", None),
        ("function", "github_create_issue", True),
        ("function", "slack_post_message", True),
    ]
    search = tools[0]
    assert search["execution"] == "client"
    assert search["parameters"]["required"] == ["query"]
    assert "search_tools" not in json.dumps(sent)  # no function tool, call or result by name
    assert all(json.dumps(body["tools"]) == json.dumps(tools) for body in sent)
    # The model's search replays as it came; its result carries the loaded definition,
    # byte for byte the deferred one declared in ``tools``.
    call, output = sent[1]["input"][-2:]
    assert call == {
        "type": "tool_search_call",
        "call_id": "call_s1",
        "execution": "client",
        "status": "completed",
        "arguments": {"query": "github issue"},
    }
    assert output == {
        "type": "tool_search_output",
        "call_id": "call_s1",
        "execution": "client",
        "status": "completed",
        "tools": [tools[2]],
    }
    assert "loaded_tools" not in json.dumps(sent)  # the definitions are not in the text
    # The loaded tool is called as any function and run by the Toolkit.
    assert sent[2]["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": "github_create_issue ran",
    }
    # Each request is a byte prefix of the next.
    for before, after in itertools.pairwise(sent):
        assert json.dumps(after["input"][: len(before["input"])]) == json.dumps(before["input"])
    # In memory the search is an ordinary call and result of search_tools (any adapter can
    # replay it); saved and restored, it formats to the same input.
    calls = [b for m in memory for b in m.get_content_blocks() if b["type"] == "tool_use"]
    assert (calls[0]["name"], calls[0]["id"], calls[0]["input"]) == (
        "search_tools",
        "call_s1",
        {"query": "github issue"},
    )
    restored = [Msg.from_dict(json.loads(json.dumps(m.to_dict()))) for m in memory]
    scripted = ScriptedModel(["ok"])
    replayed = ReActAgent(
        "a",
        "sys",
        scripted,
        toolkit(),
        capabilities=[ToolSearch(always=["read_file"]), PromptCaching(key="conv")],
    )
    await replayed.memory.add(restored)
    await replayed.run("And tell the team")
    again = model.format_request(scripted.requests[0])
    assert json.dumps(again["tools"]) == json.dumps(tools)
    assert json.dumps(again["input"][: len(sent[2]["input"])]) == json.dumps(sent[2]["input"])


async def test_responses_tool_search_streamed_runs_the_same() -> None:
    streamed, sent_streamed, _, _ = await responses_run(stream=True)
    plain, sent_plain, _, _ = await responses_run(stream=False)
    assert streamed.output == plain.output == "Filed."
    unstreamed = [{k: v for k, v in body.items() if k != "stream"} for body in sent_streamed]
    assert json.dumps(unstreamed) == json.dumps(sent_plain)


def test_responses_tool_search_is_opt_in_and_server_searches_stay_provider_items() -> None:
    from agentkit.models._responses_format import client_search_calls, parse_response

    definitions = [ToolDefinition(n, d, {"type": "object"}) for n, d in TOOLS]
    search = ToolDefinition("search_tools", "Find tools.", {"type": "object"})
    request = ModelRequest(
        [Msg("u", "go", "user")],
        tools=[search],
        deferred=DeferredTools(tuple(definitions)),
    )
    plain = OpenAIResponsesModel("gpt-5", api_key="k").format_request(request)
    assert [t["name"] for t in plain["tools"]] == ["search_tools"]  # off by default
    native = OpenAIResponsesModel("gpt-5.4", api_key="k", native_tool_search=True)
    assert native.format_request(request)["tools"][0]["type"] == "tool_search"
    # No search among the request's tools: nothing is sent as the API's tool search.
    alone = ModelRequest(request.messages, tools=definitions[:1], deferred=request.deferred)
    assert "defer_loading" not in json.dumps(native.format_request(alone))
    hosted = {**tool_search_call("x", "q"), "execution": "server", "call_id": None}
    response = parse_response(responses_body([hosted, tool_search_call("c1", "q")]), 0.0)
    converted = client_search_calls(response, "search_tools")
    assert [b["type"] for b in converted.content] == ["provider_item", "tool_use"]
    assert converted.metadata == {"finish_reason": "tool_calls"}


# -- every adapter: the request before a load is a byte prefix of the one after it ------------
def _anthropic(model: AnthropicChatModel) -> Callable[[ModelRequest], tuple[Any, Any]]:
    def split(request: ModelRequest) -> tuple[Any, Any]:
        body = model.format_request(request)
        head = [body.get("tools"), body.get("system")]
        # Each request moves its older cache mark on; the API does not count marks as part
        # of the prefix, so compare without them (test_prompt_caching checks the marks).
        return unmarked(head), unmarked(body["messages"])

    return split


def _openai_chat(request: ModelRequest) -> tuple[Any, Any]:
    body = OpenAIChatModel("gpt-4.1", api_key="k", stream=False).format_request(request)
    return [body["tools"], body["prompt_cache_key"]], body["messages"]


def _responses(native: bool) -> Callable[[ModelRequest], tuple[Any, Any]]:
    model = OpenAIResponsesModel("gpt-5.4", api_key="k", stream=False, native_tool_search=native)

    def split(request: ModelRequest) -> tuple[Any, Any]:
        body = model.format_request(request)
        return [body["tools"], body.get("instructions"), body["prompt_cache_key"]], body["input"]

    return split


def _google(request: ModelRequest) -> tuple[Any, Any]:
    contents, config = GoogleModel("gemini-2.5-flash", api_key="g").format_request(request)
    return [config.get("tools"), config.get("system_instruction")], contents


def _converse(request: ModelRequest) -> tuple[Any, Any]:
    model = BedrockConverseModel(
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        region="us-east-1",
        aws_access_key="AKIDEXAMPLE",
        aws_secret_key="secret",
    )
    body = model.format_request(request)
    return [body["toolConfig"], body["system"]], unmarked_points(body["messages"])


def dump(value: Any) -> str:
    """``value`` serialized (the Gemini SDK's bytes, thought signatures, as hex)."""
    return json.dumps(value, default=lambda b: bytes(b).hex())


def unmarked_points(value: Any) -> Any:
    """Converse messages without their ``cachePoint`` blocks (marks, not prefix content)."""
    return [{**m, "content": [b for b in m["content"] if "cachePoint" not in b]} for m in value]


async def test_every_adapter_keeps_the_request_before_a_load_a_byte_prefix_of_the_next() -> None:
    model = ScriptedModel(
        [
            tool_use("search_tools", "c1", query="create github issue"),
            tool_use("github_create_issue", "c2", title="bug"),
            tool_use("search_tools", "c3", query="slack post message"),
            tool_use("slack_post_message", "c4", title="filed"),
            "Done.",
        ]
    )
    await agent_for(model).run("File a bug and tell the team")
    requests = model.requests
    assert len(requests) == 5
    assert requests[-1].deferred is not None
    assert dict(requests[-1].deferred.loads) == {
        "c1": ("github_create_issue",),
        "c3": ("slack_post_message",),
    }
    adapters: dict[str, Callable[[ModelRequest], tuple[Any, Any]]] = {
        "anthropic": _anthropic(AnthropicChatModel("c", api_key="k", stream=False)),
        "anthropic-bedrock": _anthropic(
            AnthropicBedrockModel(
                "anthropic.claude-sonnet-4-5",
                aws_region="us-east-1",
                aws_access_key="AKIDEXAMPLE",
                aws_secret_key="secret",
            )
        ),
        "anthropic-vertex": _anthropic(
            AnthropicVertexModel("claude-sonnet-4-5", project_id="p", region="us-east5")
        ),
        "openai-chat": _openai_chat,
        "openai-responses": _responses(native=False),
        "openai-responses-native": _responses(native=True),
        "google": _google,
        "bedrock-converse": _converse,
    }
    for name, split in adapters.items():
        formatted = [split(request) for request in requests]
        for (head, turns), (next_head, next_turns) in itertools.pairwise(formatted):
            assert dump(head) == dump(next_head), name
            assert dump(next_turns[: len(turns)]) == dump(turns), name
            assert len(next_turns) > len(turns), name
        head, turns = formatted[-1]
        # Claude on Bedrock and Vertex: behind a platform beta; Responses: opted in.
        native = name in ("anthropic", "openai-responses-native")
        assert ("defer_loading" in dump(head)) is native, name
        assert ("tool_reference" in dump(turns)) is (name == "anthropic"), name
        assert ("tool_search_output" in dump(turns)) is (name == "openai-responses-native"), name
        assert ("slack_post_message" in dump(head)) is native, name  # definitions: stream

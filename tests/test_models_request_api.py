"""One model API: ``request(ModelRequest)`` / ``request_stream(ModelRequest)``, the base class's,
which refuse while real model requests are blocked and call the adapter's ``_request`` /
``_request_stream``. Real SDK clients against the local wire server."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncGenerator
from typing import ClassVar

import pytest
from _wire_server import Reply, Stream, WireServer, openai_chunks, openai_completion

from agentkit import ReActAgent
from agentkit.exceptions import ModelRequestsBlocked
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicChatModel,
    ChatModel,
    ChatResponse,
    FallbackModel,
    ModelRequest,
    OpenAIChatModel,
    ToolDefinition,
)
from agentkit.models._azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
from agentkit.models._base import ModelSettings
from agentkit.models._bedrock import AnthropicBedrockModel
from agentkit.models._openai_responses import OpenAIResponsesModel
from agentkit.models._vertex import AnthropicVertexModel
from agentkit.testing import FunctionModel, ScriptedModel, TestModel, block_model_requests

USER = [Msg("user", "hello", "user")]
HELLO = ModelRequest(USER)
ADD = ToolDefinition("add", "Add two numbers.", {"type": "object", "properties": {}})

ADAPTERS: list[type[ChatModel]] = [
    OpenAIChatModel,
    OpenAIResponsesModel,
    AzureOpenAIChatModel,
    AzureOpenAIResponsesModel,
    AnthropicChatModel,
    AnthropicBedrockModel,
    AnthropicVertexModel,
    FallbackModel,
    ScriptedModel,
    FunctionModel,
    TestModel,
]


@pytest.mark.parametrize("cls", ADAPTERS, ids=lambda c: c.__name__)
def test_adapters_implement_the_protected_methods_and_keep_the_public_ones(
    cls: type[ChatModel],
) -> None:
    owners = {name: next(k for k in cls.__mro__ if name in vars(k)) for name in dir(cls)}
    assert owners["request"] is ChatModel  # the blocked-requests check cannot be skipped
    assert owners["request_stream"] is ChatModel
    assert owners["_request"] is not ChatModel
    assert "__call__" not in owners  # no second way to ask a model


async def test_request_sends_typed_settings_on_the_wire() -> None:
    async with WireServer() as server:
        server.script(Reply(json=openai_completion(text="hi")))
        model = OpenAIChatModel("gpt-t", api_key="k", base_url=server.openai_url, stream=False)
        settings: ModelSettings = {
            "tool_choice": "add",
            "temperature": 0.5,
            "extra_headers": {"x-trace": "abc"},
            "extra_body": {"user": "u-7"},
        }
        response = await model.request(ModelRequest(USER, [ADD], settings=settings))
        await model.aclose()
    assert response.get_text() == "hi"
    sent = server.requests[0]
    assert sent.headers["x-trace"] == "abc"
    body = sent.json
    assert body["temperature"] == 0.5 and body["user"] == "u-7"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert body["tools"][0]["function"]["name"] == "add"
    assert "stream" not in body


async def test_request_stream_yields_cumulative_chunks_whatever_the_model_default() -> None:
    async with WireServer() as server:
        server.script(Stream(openai_chunks(text="Hello there", parts=3)))
        model = OpenAIChatModel("gpt-t", api_key="k", base_url=server.openai_url, stream=False)
        chunks = [c.get_text() async for c in model.request_stream(HELLO)]
        await model.aclose()
    assert server.requests[0].json["stream"] is True
    assert len(chunks) >= 3 and chunks[-1] == "Hello there"
    assert all(b.startswith(a) for a, b in itertools.pairwise(chunks))


class CustomModel(ChatModel):
    """A user's adapter: it implements ``_request`` only (a one-chunk stream by default)."""

    def __init__(self, stream: bool) -> None:
        super().__init__("custom", stream)
        self.seen: list[ModelRequest] = []

    async def _request(self, request: ModelRequest) -> ChatResponse:
        self.seen.append(request)
        return ChatResponse(content=[{"type": "text", "text": "custom"}])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_custom_adapter_implements_request_and_is_guarded(stream: bool) -> None:
    with block_model_requests(), pytest.raises(ModelRequestsBlocked):
        await CustomModel(stream).request(HELLO)  # a real model: guarded like the others
    model = CustomModel(stream)
    answer = await model.request(ModelRequest(USER, [ADD], settings={"tool_choice": "auto"}))
    assert answer.get_text() == "custom"
    assert model.seen[0].tools == [ADD] and model.seen[0].settings == {"tool_choice": "auto"}
    assert [c.get_text() async for c in model.request_stream(HELLO)] == ["custom"]
    result = await ReActAgent("bot", "sys", model).run("hi")
    assert result.output == "custom"


async def test_a_subclass_with_no_implementation_says_so() -> None:
    class Empty(ChatModel):
        offline = True

    with pytest.raises(NotImplementedError, match=r"Empty does not implement _request\(\)"):
        await Empty("x").request(HELLO)


async def test_blocked_request_stream_refuses_before_any_connection() -> None:
    async with WireServer() as server:
        model = OpenAIChatModel("gpt-t", api_key="k", base_url=server.openai_url)
        with block_model_requests("this test"), pytest.raises(ModelRequestsBlocked):
            model.request_stream(HELLO)
        with block_model_requests("this test"), pytest.raises(ModelRequestsBlocked):
            await model.request(HELLO)
        await model.aclose()
    assert server.requests == []


async def test_fallback_streams_from_the_next_model_before_the_first_chunk() -> None:
    class Down(ChatModel):
        offline = True

        async def _request(self, request: ModelRequest) -> ChatResponse:
            raise ConnectionError("down")

        async def _request_stream(
            self, request: ModelRequest
        ) -> AsyncGenerator[ChatResponse, None]:
            raise ConnectionError("down")
            yield ChatResponse(content=[])  # pragma: no cover - makes this a generator

    backup = ScriptedModel(["from the backup"], stream=True)
    fallback = FallbackModel([Down("a"), backup], on=(ConnectionError,))
    chunks = [c async for c in fallback.request_stream(HELLO)]
    assert chunks[-1].get_text() == "from the backup"
    assert chunks[-1].metadata is not None and chunks[-1].metadata["fallback_from"] == ["a"]
    assert (
        await FallbackModel([Down("a"), ScriptedModel(["ok"])], on=(ConnectionError,)).request(
            HELLO
        )
    ).get_text() == "ok"


class LoggingOpenAI(OpenAIChatModel):
    """A subclass of a typed adapter that changes each request (what such overrides do)."""

    calls: ClassVar[list[str]] = []

    def _tuned(self, request: ModelRequest, how: str) -> ModelRequest:
        LoggingOpenAI.calls.append(how)
        return dataclasses.replace(request, settings={**request.settings, "temperature": 0.25})

    async def _request(self, request: ModelRequest) -> ChatResponse:
        return await super()._request(self._tuned(request, "request"))

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        async for chunk in super()._request_stream(self._tuned(request, "stream")):
            yield chunk


@pytest.mark.parametrize("stream", [False, True])
async def test_an_override_of_a_typed_adapter_is_not_skipped(stream: bool) -> None:
    LoggingOpenAI.calls = []
    async with WireServer() as server:
        if stream:
            server.script(Stream(openai_chunks(text="Hi there")))
        else:
            server.script(Reply(json=openai_completion(text="Hi there")))
        server.script(Reply(json=openai_completion(text="x")))
        model = LoggingOpenAI("gpt-t", api_key="k", base_url=server.openai_url, stream=stream)
        result = await ReActAgent("bot", "sys", model).run("hi")  # the agent asks request*()
        direct = await model.request(HELLO)
        await model.aclose()
    assert result.output == "Hi there" and direct.get_text() == "x"
    assert LoggingOpenAI.calls == ["stream" if stream else "request", "request"]
    assert all(r.json["temperature"] == 0.25 for r in server.requests)
    with block_model_requests(), pytest.raises(ModelRequestsBlocked):
        await model.request(HELLO)


async def test_built_in_tools_pass_through_unchanged_on_every_adapter() -> None:
    from agentkit.models import BedrockConverseModel, GoogleModel

    spec: dict[str, object] = {"type": "some_server_tool", "options": {"depth": 2}}
    request = ModelRequest(USER, [ADD], [spec], {"tool_choice": "auto"})
    chat = OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    responses = OpenAIResponsesModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    claude = AnthropicChatModel("c", api_key="k", base_url="http://127.0.0.1:9")
    gemini = GoogleModel("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9")
    nova = BedrockConverseModel(
        "amazon.nova-lite-v1:0", region="us-east-1", aws_access_key="A", aws_secret_key="s"
    )
    try:
        tools = {
            "chat": chat.format_request(request)["tools"],
            "responses": responses.format_request(request)["tools"],
            "anthropic": claude.format_request(request)["tools"],
            "gemini": gemini.format_request(request)[1]["tools"],
            "converse": nova.format_request(request)["toolConfig"]["tools"],
        }
    finally:
        for model in (chat, responses, claude, gemini, nova):
            await model.aclose()
    for name, sent in tools.items():
        assert isinstance(sent, list) and len(sent) == 2, name
        assert sent[-1] == spec, name  # after the function tool, exactly as given
    assert tools["chat"][0]["function"]["name"] == "add"  # OpenAI's shape on OpenAI only
    assert tools["anthropic"][0] == {
        "name": "add",
        "description": "Add two numbers.",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert tools["gemini"][0] == {
        "function_declarations": [{"name": "add", "description": "Add two numbers."}]
    }
    assert tools["converse"][0]["toolSpec"]["name"] == "add"

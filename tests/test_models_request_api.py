"""``request()`` / ``request_stream()`` are the adapters' primary methods; ``__call__`` is the
compatibility shim of the base class only. Real SDK clients against the local wire server."""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, ClassVar

import pytest
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_message,
    openai_chunks,
    openai_completion,
)

from agentkit import ReActAgent
from agentkit.exceptions import ModelRequestsBlocked
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicChatModel,
    ChatModel,
    ChatResponse,
    FallbackModel,
    OpenAIChatModel,
    ToolDefinition,
)
from agentkit.models._azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
from agentkit.models._base import ModelOutput, ModelSettings
from agentkit.models._bedrock import AnthropicBedrockModel
from agentkit.models._openai_responses import OpenAIResponsesModel
from agentkit.models._vertex import AnthropicVertexModel
from agentkit.testing import FunctionModel, ScriptedModel, TestModel, block_model_requests

USER = [Msg("user", "hello", "user")]
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
def test_adapters_implement_request_and_not_call(cls: type[ChatModel]) -> None:
    owners = {name: next(k for k in cls.__mro__ if name in vars(k)) for name in dir(cls)}
    assert owners["__call__"] is ChatModel  # the shim lives in the base class only
    assert owners["request"] is not ChatModel
    assert owners["request_stream"] is not ChatModel


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
        response = await model.request(USER, [ADD], settings)
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
        chunks = [c.get_text() async for c in model.request_stream(USER)]
        await model.aclose()
    assert server.requests[0].json["stream"] is True
    assert len(chunks) >= 3 and chunks[-1] == "Hello there"
    assert all(b.startswith(a) for a, b in itertools.pairwise(chunks))


async def test_call_shim_maps_to_request_and_request_stream() -> None:
    async with WireServer() as server:
        server.script(
            Reply(json=anthropic_message([{"type": "text", "text": "one"}])),
            Reply(json=anthropic_message([{"type": "text", "text": "two"}])),
        )
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url, stream=False)
        tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
        first = await model(USER, tools, "required", temperature=0.1)
        assert isinstance(first, ChatResponse) and first.get_text() == "one"
        second = await model.request(USER, [ADD], {"tool_choice": "required", "temperature": 0.1})
        await model.aclose()
    assert second.get_text() == "two"
    a, b = (r.json for r in server.requests)
    assert a["tool_choice"] == b["tool_choice"] == {"type": "any"}
    assert a["temperature"] == b["temperature"] == 0.1
    assert [t["name"] for t in a["tools"]] == [t["name"] for t in b["tools"]] == ["add"]


class LegacyModel(ChatModel):
    """A subclass written for older agentkit: it implements only ``__call__``."""

    def __init__(self, stream: bool) -> None:
        super().__init__("legacy", stream)
        self.seen: list[dict[str, Any]] = []

    async def __call__(
        self,
        messages: Sequence[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ModelOutput:
        self.seen.append({"tools": tools, "tool_choice": tool_choice, **kwargs})
        response = ChatResponse(content=[{"type": "text", "text": "old style"}])
        if not self.stream:
            return response
        return _one(response)


async def _one(response: ChatResponse) -> AsyncIterator[ChatResponse]:
    yield response


@pytest.mark.parametrize("stream", [False, True])
async def test_a_subclass_with_only_call_still_works(stream: bool) -> None:
    with block_model_requests(), pytest.raises(ModelRequestsBlocked):
        await LegacyModel(stream).request(USER)  # a real model: guarded like the others
    model = LegacyModel(stream)
    assert (await model.request(USER, [ADD], {"tool_choice": "auto"})).get_text() == "old style"
    assert model.seen[0]["tools"][0]["function"]["name"] == "add"
    assert model.seen[0]["tool_choice"] == "auto"
    result = await ReActAgent("bot", "sys", model).run("hi")
    assert result.output == "old style"


async def test_a_subclass_with_neither_method_says_so() -> None:
    class Empty(ChatModel):
        offline = True

    with pytest.raises(NotImplementedError, match="neither request"):
        await Empty("x").request(USER)


async def test_blocked_request_stream_refuses_before_any_connection() -> None:
    async with WireServer() as server:
        model = OpenAIChatModel("gpt-t", api_key="k", base_url=server.openai_url)
        with block_model_requests("this test"), pytest.raises(ModelRequestsBlocked):
            model.request_stream(USER)
        with block_model_requests("this test"), pytest.raises(ModelRequestsBlocked):
            await model(USER)
        await model.aclose()
    assert server.requests == []


async def test_fallback_streams_from_the_next_model_before_the_first_chunk() -> None:
    class Down(ChatModel):
        offline = True

        async def request(
            self,
            messages: Sequence[Msg],
            tools: Sequence[ToolDefinition] | None = None,
            settings: ModelSettings | None = None,
        ) -> ChatResponse:
            raise ConnectionError("down")

        async def request_stream(
            self,
            messages: Sequence[Msg],
            tools: Sequence[ToolDefinition] | None = None,
            settings: ModelSettings | None = None,
        ) -> AsyncGenerator[ChatResponse, None]:
            raise ConnectionError("down")
            yield ChatResponse(content=[])  # pragma: no cover - makes this a generator

    backup = ScriptedModel(["from the backup"], stream=True)
    fallback = FallbackModel([Down("a"), backup], on=(ConnectionError,))
    chunks = [c async for c in fallback.request_stream(USER)]
    assert chunks[-1].get_text() == "from the backup"
    assert chunks[-1].metadata is not None and chunks[-1].metadata["fallback_from"] == ["a"]
    assert (
        await FallbackModel([Down("a"), ScriptedModel(["ok"])], on=(ConnectionError,)).request(USER)
    ).get_text() == "ok"


class LoggingOpenAI(OpenAIChatModel):
    """An older-style subclass of a typed adapter: it overrides only ``__call__``."""

    calls: ClassVar[list[str]] = []

    async def __call__(
        self,
        messages: Sequence[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ModelOutput:
        LoggingOpenAI.calls.append(f"stream={kwargs.get('stream', self.stream)}")
        kwargs.setdefault("temperature", 0.25)  # what such overrides do: change arguments
        return await super().__call__(messages, tools, tool_choice, structured_model, **kwargs)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_override_of_a_typed_adapter_is_not_skipped(stream: bool) -> None:
    LoggingOpenAI.calls = []
    async with WireServer() as server:
        if stream:
            server.script(Stream(openai_chunks(text="Hi there")), Stream(openai_chunks(text="x")))
        else:
            server.script(Reply(json=openai_completion(text="Hi there")))
            server.script(Reply(json=openai_completion(text="x")))
        model = LoggingOpenAI("gpt-t", api_key="k", base_url=server.openai_url, stream=stream)
        result = await ReActAgent("bot", "sys", model).run("hi")  # the agent asks request*()
        direct = await model.request(USER)
        await model.aclose()
    assert result.output == "Hi there" and direct.get_text() == "x"
    assert len(LoggingOpenAI.calls) == 2  # the override ran for both requests, once each
    assert all(r.json["temperature"] == 0.25 for r in server.requests)
    with block_model_requests(), pytest.raises(ModelRequestsBlocked):
        await model.request(USER)

from __future__ import annotations

import datetime
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from agentkit import Msg
from agentkit.exceptions import ModelAPIError, ScriptExhaustedError
from agentkit.models import ChatModel, ChatResponse, ModelRequest, ToolDefinition
from agentkit.testing import FunctionModel, ScriptedModel, thinking, tool_use

USER = [Msg("user", "hi", "user")]


class Address(BaseModel):
    city: str = Field(min_length=3)
    zip: int = Field(ge=1000)


class Plan(BaseModel):
    days: int = Field(gt=0)
    where: Address


TOOLS = [ToolDefinition("add", "", {})]
ASK = ModelRequest(USER)


async def test_scripted_replays_every_item_form_and_records_requests() -> None:
    call = tool_use("add", a=1, b=2)
    model = ScriptedModel(
        [
            "plain text",
            [thinking("hmm"), call, tool_use("add", "fixed-id", a=3, b=4)],
            {"type": "text", "text": "one block"},
            ChatResponse(content=[{"type": "text", "text": "resp"}], metadata={"k": 1}),
            ModelAPIError("boom", status_code=500),
        ]
    )
    assert isinstance(model, ChatModel)
    first = await model.request(ModelRequest(USER, TOOLS, settings={"tool_choice": "auto"}))
    assert isinstance(first, ChatResponse) and first.get_text() == "plain text"
    second = await model.request(ASK)
    assert isinstance(second, ChatResponse)
    assert [b["type"] for b in second.content] == ["thinking", "tool_use", "tool_use"]
    assert second.tool_calls[1]["id"] == "fixed-id"
    assert call["id"].startswith("call_")
    third = await model.request(ASK)
    assert isinstance(third, ChatResponse) and third.get_text() == "one block"
    fourth = await model.request(ASK)
    assert isinstance(fourth, ChatResponse) and fourth.metadata == {"k": 1}
    with pytest.raises(ModelAPIError, match="boom"):
        await model.request(ASK)
    with pytest.raises(ScriptExhaustedError, match="ran out of responses: call 6"):
        await model.request(ASK)
    assert len(model.requests) == 6
    assert model.requests[0].tools == TOOLS and model.requests[0].tool_names == ["add"]
    assert model.requests[0].settings.get("tool_choice") == "auto"
    assert model.requests[0].messages == USER


async def test_streaming_yields_cumulative_chunks_with_partial_tool_arguments() -> None:
    final = [
        thinking("let me think"),
        {"type": "text", "text": "Calling the tool now."},
        tool_use("add", "c1", a=1, b=2),
    ]
    model = ScriptedModel([final], stream=True)
    chunks = [c async for c in model.request_stream(ASK)]
    assert len(chunks) > 6
    assert chunks[-1].content == final
    assert chunks[-1].usage is not None
    partial = [b for c in chunks[:-1] for b in c.content if b["type"] == "tool_use"]
    assert partial and all("raw_input" in b for b in partial)
    texts = [c.get_text() for c in chunks]
    assert all(texts[i + 1].startswith(texts[i]) for i in range(len(texts) - 1))


async def test_function_model_sync_and_async() -> None:
    def sync_fn(messages: list[Msg], tools: object) -> str:
        return f"{len(messages)} messages"

    async def async_fn(messages: list[Msg], tools: object) -> list[dict[str, object]]:
        return [tool_use("add", a=len(messages))]  # type: ignore[list-item]

    sync_result = await FunctionModel(sync_fn).request(ASK)
    assert sync_result.get_text() == "1 messages"
    model = FunctionModel(async_fn, stream=True)
    last = [c async for c in model.request_stream(ASK)][-1]
    assert last.tool_calls[0]["input"] == {"a": 1}
    assert len(model.requests) == 1


async def test_invalid_script_item_is_a_clear_error() -> None:
    model = ScriptedModel([[{"type": "tool_use", "name": "x", "input": {}}]])
    with pytest.raises(ValueError, match=r"script\[0\]\[0\]\.id"):
        await model.request(ASK)


# -- round 2: strict scripts, FunctionModel info, TestModel, blocking real models ---------
async def test_assert_complete_and_strict_mode() -> None:
    model = ScriptedModel(["one", "two"])
    await model.request(ASK)
    with pytest.raises(AssertionError, match="used 1 of 2 responses; unused: 'two'"):
        model.assert_complete()
    with (
        pytest.raises(AssertionError, match="unused"),
        ScriptedModel(["a", "b"], strict=True) as strict,
    ):
        await strict.request(ASK)
    async with ScriptedModel(["a"], strict=True) as done:
        await done.request(ASK)
    done.assert_complete()
    with ScriptedModel(["a"]) as lax:  # not strict: no check on exit
        pass
    assert lax.remaining == 1


async def test_function_model_gets_request_info() -> None:
    from agentkit.testing import RequestInfo

    seen: list[RequestInfo] = []

    def answer(messages: list[Msg], info: RequestInfo) -> str:
        seen.append(info)
        return f"{len(messages)} messages, tools {info.tool_names}"

    model = FunctionModel(answer)
    request = ModelRequest(
        USER, TOOLS, settings={"tool_choice": "required", "parallel_tool_calls": False}
    )
    out = await model.request(request)
    assert out.get_text() == "1 messages, tools ['add']"
    (info,) = seen
    assert info.tool_choice == "required" and info.settings == {"parallel_tool_calls": False}
    assert info.tools[0].name == "add" and info.request is request


async def test_test_model_calls_every_tool_with_valid_arguments() -> None:
    import jsonschema

    from agentkit import ReActAgent, Toolkit

    toolkit = Toolkit()
    calls: list[str] = []

    def book(when: datetime.date, seats: int, kind: Literal["bus", "train"], to: Address) -> str:
        """Book a trip.

        Args:
            when: The day.
            seats: How many seats.
            kind: Bus or train.
            to: Where.
        """
        calls.append(f"{when}:{seats}:{kind}:{to.city}")
        return "booked"

    def tags(names: list[str], note: str | None = None) -> str:
        """Tag things.

        Args:
            names: The tags.
            note: A note.
        """
        calls.append(f"tags:{names}")
        return "tagged"

    toolkit.register_tool_function(book)
    toolkit.register_tool_function(tags)
    from agentkit.testing import TestModel

    model = TestModel()
    agent = ReActAgent("bot", "sys", model, toolkit)
    result = await agent.run("go")
    assert sorted(calls) == ["2026-01-31:0:bus:aaa", "tags:[]"]  # parallel calls: any order
    for request_tool in model.requests[0].tools:
        call = next(
            b
            for b in result.new_messages[1].get_blocks("tool_use")
            if b["name"] == request_tool.name
        )
        jsonschema.validate(call["input"], request_tool.parameters)
    assert '"booked"' in result.output and '"tagged"' in result.output
    structured = await ReActAgent("bot", "sys", TestModel(), toolkit).run("go", output_type=Plan)
    assert structured.output.days == 1 and structured.output.where.zip == 1000


async def test_block_model_requests_stops_real_models_only() -> None:
    from agentkit.exceptions import ModelRequestsBlocked
    from agentkit.models import OpenAIChatModel
    from agentkit.testing import block_model_requests

    real = OpenAIChatModel("gpt-4o-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    with block_model_requests("test_block"):
        with pytest.raises(ModelRequestsBlocked, match="test_block"):
            await real.request(ASK)
        with pytest.raises(ModelRequestsBlocked):
            real.request_stream(ASK)  # refused before a stream (a connection) is made
        out = await ScriptedModel(["fine"]).request(ASK)  # test doubles still answer
        assert out.get_text() == "fine"
    await real.aclose()

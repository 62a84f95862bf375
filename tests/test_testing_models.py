from __future__ import annotations

import pytest

from agentkit import Msg
from agentkit.exceptions import ModelAPIError, ScriptExhaustedError
from agentkit.models import ChatModel, ChatResponse
from agentkit.testing import FunctionModel, ScriptedModel, thinking, tool_use

USER = [Msg("user", "hi", "user")]
TOOLS = [{"type": "function", "function": {"name": "add", "description": "", "parameters": {}}}]


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
    first = await model(USER, tools=TOOLS, tool_choice="auto")
    assert isinstance(first, ChatResponse) and first.get_text() == "plain text"
    second = await model(USER)
    assert isinstance(second, ChatResponse)
    assert [b["type"] for b in second.content] == ["thinking", "tool_use", "tool_use"]
    assert second.tool_calls[1]["id"] == "fixed-id"
    assert call["id"].startswith("call_")
    third = await model(USER)
    assert isinstance(third, ChatResponse) and third.get_text() == "one block"
    fourth = await model(USER)
    assert isinstance(fourth, ChatResponse) and fourth.metadata == {"k": 1}
    with pytest.raises(ModelAPIError, match="boom"):
        await model(USER)
    with pytest.raises(ScriptExhaustedError, match="ran out of responses: call 6"):
        await model(USER)
    assert len(model.requests) == 6
    assert model.requests[0].tools == TOOLS and model.requests[0].tool_names == ["add"]
    assert model.requests[0].tool_choice == "auto"
    assert model.requests[0].messages == USER


async def test_streaming_yields_cumulative_chunks_with_partial_tool_arguments() -> None:
    final = [
        thinking("let me think"),
        {"type": "text", "text": "Calling the tool now."},
        tool_use("add", "c1", a=1, b=2),
    ]
    model = ScriptedModel([final], stream=True)
    stream = await model(USER)
    assert not isinstance(stream, ChatResponse)
    chunks = [c async for c in stream]
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

    sync_result = await FunctionModel(sync_fn)(USER)
    assert isinstance(sync_result, ChatResponse) and sync_result.get_text() == "1 messages"
    model = FunctionModel(async_fn, stream=True)
    stream = await model(USER)
    assert not isinstance(stream, ChatResponse)
    last = [c async for c in stream][-1]
    assert last.tool_calls[0]["input"] == {"a": 1}
    assert len(model.requests) == 1


async def test_invalid_script_item_is_a_clear_error() -> None:
    model = ScriptedModel([[{"type": "tool_use", "name": "x", "input": {}}]])
    with pytest.raises(ValueError, match=r"script\[0\]\[0\]\.id"):
        await model(USER)

"""OpenAIResponsesModel against a local wire-compatible server, through the real openai SDK."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from _model_calls import ask, request_of
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    openai_error,
    responses_body,
    responses_call,
    responses_message,
    responses_reasoning,
    responses_stream,
    sse,
)
from pydantic import BaseModel

from agentkit.exceptions import (
    AuthenticationError,
    ContextWindowError,
    ModelAPIError,
    ModelConnectionError,
    RateLimitError,
)
from agentkit.messages import Msg
from agentkit.models import ChatResponse, OpenAIResponsesModel, RetryPolicy
from tests._agent_helpers import agent_for, checked_memory, shape

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)
USER = [Msg("user", "hello", "user")]
INCLUDE = ["reasoning.encrypted_content"]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


@pytest.fixture
async def model(server: WireServer) -> AsyncIterator[OpenAIResponsesModel]:
    m = OpenAIResponsesModel(
        "gpt-test", api_key="sk-test", base_url=server.openai_url, stream=False, retry=FAST
    )
    yield m
    await m.aclose()


async def collect(output: Any) -> list[ChatResponse]:
    return [chunk async for chunk in output]


async def test_text_non_streaming_exact_request(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    server.script(
        Reply(
            json=responses_body(
                [responses_message("Hi there")], usage=(12, 30), cached=8, reasoning_tokens=20
            )
        )
    )
    response = await ask(model, [Msg("system", "Be brief.", "system"), *USER])
    assert isinstance(response, ChatResponse)
    assert response.content == [{"type": "text", "text": "Hi there"}]
    assert response.id == "resp_1"
    assert response.metadata == {"finish_reason": "stop"}
    usage = response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (12, 30)
    assert (usage.cache_read_tokens, usage.reasoning_tokens) == (8, 20)
    assert usage.to_dict()["reasoning_tokens"] == 20
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json == {
        "model": "gpt-test",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        "store": False,
        "include": INCLUDE,
    }


async def test_streaming_is_cumulative_and_final_has_usage(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    model.stream = True
    server.script(Stream(responses_stream([responses_message("Hello streaming world")], parts=4)))
    chunks = await collect(await ask(model, USER))
    texts = [c.get_text() for c in chunks]
    assert len(chunks) >= 4
    assert all(a == b[: len(a)] for a, b in itertools.pairwise(texts))
    assert texts[-1] == "Hello streaming world"
    assert chunks[-1].usage is not None and chunks[-1].usage.input_tokens == 10
    assert chunks[-1].metadata == {"finish_reason": "stop"}
    assert chunks[-1].id == "resp_1"
    assert server.requests[0].json["stream"] is True


async def test_parallel_function_calls_streamed(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    model.stream = True
    output = [
        responses_call("call_a", "add", '{"a": 1, "b": 2}'),
        responses_call("call_b", "add", '{"a": 3, "b": 4}'),
    ]
    server.script(Stream(responses_stream(output, parts=3)))
    chunks = await collect(
        await ask(model, USER, tools=[ADD], tool_choice="required", parallel_tool_calls=True)
    )
    partial = [c for c in chunks if any("raw_input" in b for b in c.content)]
    assert partial, "arguments streamed in pieces show as raw_input while incomplete"
    final = chunks[-1]
    assert final.content == [
        {"type": "tool_use", "id": "call_a", "name": "add", "input": {"a": 1, "b": 2}},
        {"type": "tool_use", "id": "call_b", "name": "add", "input": {"a": 3, "b": 4}},
    ]
    assert final.metadata == {"finish_reason": "tool_calls"}
    body = server.requests[0].json
    assert body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "parameters": ADD["function"]["parameters"],
            "strict": False,
            "description": "Add two numbers.",
        }
    ]
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is True


async def test_forced_tool_choice_format(model: OpenAIResponsesModel) -> None:
    body = model.format_request(request_of(USER, tools=[ADD], tool_choice="add"))
    assert body["tool_choice"] == {"type": "function", "name": "add"}


async def test_reasoning_kept_with_encrypted_content_and_replayed(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    model.stream = True
    model.reasoning = {"effort": "low", "summary": "auto"}
    output = [
        responses_reasoning("rs_1", ["First I add.", "Then I answer."], encrypted="ENC-1"),
        responses_call("call_a", "add", '{"a": 1, "b": 2}'),
    ]
    server.script(Stream(responses_stream(output)))
    final = (await collect(await ask(model, USER, tools=[ADD])))[-1]
    thinking = final.content[0]
    assert thinking == {
        "type": "thinking",
        "thinking": "First I add.\n\nThen I answer.",
        "summary": ["First I add.", "Then I answer."],
        "reasoning_id": "rs_1",
        "encrypted_content": "ENC-1",
    }
    # The next request sends the reasoning item back verbatim, before its call.
    history = [
        *USER,
        Msg("bot", final.content, "assistant"),
        Msg(
            "user",
            [{"type": "tool_result", "id": "call_a", "name": "add", "output": "3"}],
            "user",
        ),
    ]
    body = model.format_request(request_of(history, tools=[ADD]))
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["input"] == [
        {"role": "user", "content": "hello"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "First I add."},
                {"type": "summary_text", "text": "Then I answer."},
            ],
            "encrypted_content": "ENC-1",
        },
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "add",
            "arguments": '{"a": 1, "b": 2}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "3"},
    ]


async def test_reasoning_replay_across_a_react_tool_loop(server: WireServer) -> None:
    """Three model turns through ReActAgent: every reasoning item goes back, in order."""
    server.script(
        Stream(
            responses_stream(
                [
                    responses_reasoning("rs_1", ["Need a sum."], encrypted="ENC-1"),
                    responses_call("call_1", "add", '{"a": 1, "b": 2}'),
                ],
                id="resp_1",
            )
        ),
        Stream(
            responses_stream(
                [
                    responses_reasoning("rs_2", [], encrypted="ENC-2"),
                    responses_call("call_2", "add", '{"a": 3, "b": 4}'),
                ],
                id="resp_2",
            )
        ),
        Stream(
            responses_stream(
                [responses_reasoning("rs_3", [], encrypted="ENC-3"), responses_message("3 and 7")],
                id="resp_3",
            )
        ),
    )
    model = OpenAIResponsesModel("o-test", api_key="k", base_url=server.openai_url, retry=FAST)
    agent = agent_for(model)
    reply = await agent("add twice")
    await model.aclose()
    assert reply.get_text() == "3 and 7"
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:add twice"]),
        ("assistant", ["thinking", "use:call_1"]),
        ("user", ["result:call_1"]),
        ("assistant", ["thinking", "use:call_2"]),
        ("user", ["result:call_2"]),
        ("assistant", ["thinking", "text:3 and 7"]),
    ]
    json.dumps([m.to_dict() for m in memory])  # JSON-serializable, encrypted content included
    third = server.requests[2].json
    kinds = [(i.get("type") or i["role"], i.get("id") or i.get("call_id")) for i in third["input"]]
    assert kinds == [
        ("system", None),
        ("user", None),
        ("reasoning", "rs_1"),
        ("function_call", "call_1"),
        ("function_call_output", "call_1"),
        ("reasoning", "rs_2"),
        ("function_call", "call_2"),
        ("function_call_output", "call_2"),
    ]
    reasoning = [i for i in third["input"] if i.get("type") == "reasoning"]
    assert [r["encrypted_content"] for r in reasoning] == ["ENC-1", "ENC-2"]
    assert reasoning[0]["summary"] == [{"type": "summary_text", "text": "Need a sum."}]
    outputs = [i for i in third["input"] if i.get("type") == "function_call_output"]
    assert [o["output"] for o in outputs] == ["3", "7"]
    assert all(r.json["store"] is False and r.json["include"] == INCLUDE for r in server.requests)


class Answer(BaseModel):
    city: str
    population: int


async def test_structured_output(model: OpenAIResponsesModel, server: WireServer) -> None:
    server.script(
        Reply(json=responses_body([responses_message('{"city": "Paris", "population": 2}')]))
    )
    response = await ask(model, USER, output=Answer)
    assert response.metadata["structured_output"] == {"city": "Paris", "population": 2}
    fmt = server.requests[0].json["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "Answer" and fmt["strict"] is True
    assert fmt["schema"]["additionalProperties"] is False


async def test_structured_output_keeps_other_text_options(model: OpenAIResponsesModel) -> None:
    model.generate_kwargs = {"text": {"verbosity": "low"}}
    body = model.format_request(request_of(USER, output=Answer))
    assert body["text"]["verbosity"] == "low" and body["text"]["format"]["name"] == "Answer"


async def test_refusal_and_incomplete(model: OpenAIResponsesModel, server: WireServer) -> None:
    refusal = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    server.script(
        Reply(json=responses_body([refusal])),
        Reply(
            json=responses_body(
                [responses_message("cut")], status="incomplete", incomplete="max_output_tokens"
            )
        ),
    )
    first = await ask(model, USER)
    assert first.get_text() == "I can't help with that."
    assert first.metadata["refusal"] == "I can't help with that."
    second = await ask(model, USER)
    assert second.metadata == {"finish_reason": "length"}


async def test_retries_then_succeeds(model: OpenAIResponsesModel, server: WireServer) -> None:
    server.script(
        openai_error(429, "slow down", retry_after_ms="1"),
        openai_error(503, "busy"),
        Reply(json=responses_body([responses_message("ok")])),
    )
    response = await ask(model, USER)
    assert response.get_text() == "ok"
    assert len(server.requests) == 3


async def test_errors_are_mapped(model: OpenAIResponsesModel, server: WireServer) -> None:
    server.script(
        openai_error(400, "Your input exceeds the context window", "context_length_exceeded"),
        openai_error(401, "bad key"),
        openai_error(429, "slow"),
        openai_error(429, "slow"),
        openai_error(429, "slow"),
    )
    with pytest.raises(ContextWindowError):
        await ask(model, USER)
    with pytest.raises(AuthenticationError):
        await ask(model, USER)
    with pytest.raises(RateLimitError):
        await ask(model, USER)
    assert len(server.requests) == 5  # 1 + 1 + (1 + 2 retries)


async def test_failed_response_body_raises(model: OpenAIResponsesModel, server: WireServer) -> None:
    error = {"code": "server_error", "message": "The model failed."}
    server.script(Reply(json=responses_body([], status="failed", error=error)))
    with pytest.raises(ModelAPIError, match="The model failed"):
        await ask(model, USER)


async def test_stream_error_event_and_failed_event(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    model.stream = True
    error_event = sse(
        {
            "type": "error",
            "code": "rate_limit_exceeded",
            "message": "Too fast",
            "param": None,
            "sequence_number": 3,
        },
        "error",
    )
    failed = responses_stream(
        [responses_message("partial")],
        final="failed",
        error={"code": "server_error", "message": "Boom"},
    )
    server.script(
        Stream([*responses_stream([responses_message("par")], complete=False), error_event]),
        Stream(failed),
    )
    with pytest.raises(RateLimitError, match="Too fast"):
        await collect(await ask(model, USER))
    with pytest.raises(ModelAPIError, match="Boom"):
        await collect(await ask(model, USER))


async def test_stream_cut_before_completed_raises(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    model.stream = True
    server.script(Stream(responses_stream([responses_message("half")], complete=False)))
    with pytest.raises(ModelConnectionError, match="before the answer was complete"):
        await collect(await ask(model, USER))


async def test_store_true_sends_no_include(server: WireServer) -> None:
    m = OpenAIResponsesModel("g", api_key="k", base_url=server.openai_url, store=True)
    body = m.format_request(request_of(USER), stream=False)
    assert body == {"model": "g", "input": [{"role": "user", "content": "hello"}], "store": True}
    await m.aclose()


async def test_wire_fixtures_parse_with_the_sdks_typed_path(server: WireServer) -> None:
    """The server's Responses bodies and events are what the SDK itself accepts."""
    output = [
        responses_reasoning("rs_1", ["s"], encrypted="E"),
        responses_message("hi"),
        responses_call("c1", "add", "{}"),
    ]
    server.script(Reply(json=responses_body(output)), Stream(responses_stream(output)))
    client = openai.AsyncOpenAI(api_key="k", base_url=server.openai_url, max_retries=0)
    response = await client.responses.create(model="m", input="hi")
    assert response.output_text == "hi"
    assert response.output[0].encrypted_content == "E"  # type: ignore[union-attr]
    stream = await client.responses.create(model="m", input="hi", stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[-1] == "response.completed"
    assert "response.reasoning_summary_text.delta" in kinds
    await client.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_benchmark_mock_server_speaks_responses(stream: bool) -> None:
    """The benchmark's mock ``/v1/responses`` serves both the raw SDK loop and the adapter."""
    from benchmarks import kit
    from benchmarks.baselines import tool_schema
    from benchmarks.mock_server import MockLLMServer
    from benchmarks.scenarios.responses_turns import responses_sdk_run

    async with MockLLMServer() as mock:
        client = openai.AsyncOpenAI(api_key="k", base_url=mock.base_url, max_retries=0)
        tools = [tool_schema("step")]
        answer = await responses_sdk_run(client, "steps-3", tools, kit.raw_step, stream=stream)
        kit.check_answer(answer, 3)
        await client.close()
        model = OpenAIResponsesModel("steps-3", api_key="k", base_url=mock.base_url, stream=stream)
        agent = kit.make_agent(model, kit.toolkit_with(kit.step))
        kit.check_answer(await kit.ask(agent), 3)
        memory = await agent.memory.get_memory()
        await model.aclose()
    reasoning = [b for m in memory for b in m.get_content_blocks() if b["type"] == "thinking"]
    assert [b["reasoning_id"] for b in reasoning] == ["rs_0", "rs_1", "rs_2", "rs_3"]


async def test_cancelled_stream_releases_the_connection(
    model: OpenAIResponsesModel, server: WireServer
) -> None:
    import anyio

    model.stream = True
    hanging = Stream(
        responses_stream([responses_message("a long answer")], complete=False), then="hang"
    )
    server.script(hanging)
    seen: list[str] = []

    async def consume() -> None:
        async for chunk in await ask(model, USER):  # type: ignore[union-attr]
            seen.append(chunk.get_text())

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        with anyio.fail_after(5):  # every event reached the consumer; the body still hangs
            while not (seen and seen[-1] == "a long answer"):
                await anyio.sleep(0.005)
        tg.cancel_scope.cancel()
    with anyio.fail_after(2):
        await hanging.closed.wait()
    assert hanging.sent == len(hanging.events)


def test_reasoning_still_streaming_is_not_replayable() -> None:
    """A snapshot cut mid-reasoning (an interrupt) keeps the text, not a half item to send."""
    from agentkit.models._responses_format import ResponsesStreamState, format_input

    state = ResponsesStreamState()
    item = {"id": "rs_9", "type": "reasoning", "summary": [], "encrypted_content": "PARTIAL"}
    state.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    state.feed(
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "Thinking...",
        }
    )
    partial = state.snapshot(final=False)
    assert partial.content == [
        {"type": "thinking", "thinking": "Thinking...", "summary": ["Thinking..."]}
    ]
    assert format_input([*USER, Msg("bot", partial.content, "assistant")]) == [
        {"role": "user", "content": "hello"}
    ]
    done = {**item, "summary": [{"type": "summary_text", "text": "Thinking..."}]}
    state.feed({"type": "response.output_item.done", "output_index": 0, "item": done})
    assert state.snapshot(final=False).content[0]["reasoning_id"] == "rs_9"  # type: ignore[typeddict-item]


async def test_cost_is_priced_like_openai(model: OpenAIResponsesModel, server: WireServer) -> None:
    from agentkit.models._prices import ModelPrice, set_price

    set_price("gpt-test", ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0), provider="openai")
    try:
        server.script(Reply(json=responses_body([responses_message("ok")], usage=(1000, 500))))
        response = await ask(model, USER)
    finally:
        set_price("gpt-test", None, provider="openai")
    assert response.usage is not None and response.usage.cost == pytest.approx(0.002)

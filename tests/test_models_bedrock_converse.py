"""BedrockConverseModel over the wire: the real aiobotocore client (SigV4, dummy credentials)
against a local server speaking Bedrock Runtime's Converse JSON and ConverseStream
``application/vnd.amazon.eventstream`` frames as the AWS API reference defines them."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import struct
import urllib.parse
from typing import Any

import pytest
from _wire_server import RecordedRequest, Reply, Stream, WireServer

from agentkit import ReActAgent, Toolkit
from agentkit.exceptions import AuthenticationError, BadRequestError, RateLimitError
from agentkit.messages import Msg
from agentkit.models import (
    BedrockConverseModel,
    ChatResponse,
    ModelRequest,
    RetryPolicy,
    ToolDefinition,
    from_string,
)

MODEL = "us.amazon.nova-lite-v1:0"
FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.002)
USER = [Msg("user", "hello", "user")]
ADD = ToolDefinition(
    "add",
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
USAGE = {
    "inputTokens": 10,
    "outputTokens": 5,
    "totalTokens": 45,
    "cacheReadInputTokens": 20,
    "cacheWriteInputTokens": 10,
}


# -- the AWS event-stream framing -----------------------------------------------------------
def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # name length, name, value type 7 (string), value length (uint16), value
    return (
        bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    )


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (lengths + CRC32), headers, payload, message CRC32."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", binascii.crc32(message))


def event(kind: str, data: dict[str, Any]) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(data).encode())


def exception(kind: str, message: str) -> bytes:
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())


def event_stream(frames: list[bytes], **kwargs: Any) -> Stream:
    headers = {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "r-1"}
    return Stream(events=frames, headers=headers, **kwargs)


def converse(content: list[dict[str, Any]], stop: str = "end_turn", **extra: Any) -> Reply:
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": USAGE,
        "metrics": {"latencyMs": 12},
        **extra,
    }
    return Reply(json=body, headers={"x-amzn-requestid": "r-1"})


def model_for(server: WireServer, **kwargs: Any) -> BedrockConverseModel:
    return BedrockConverseModel(
        MODEL,
        region="us-east-1",
        aws_access_key="AKIDEXAMPLE",
        aws_secret_key="secret",
        base_url=server.url,
        retry=FAST,
        **kwargs,
    )


def meta(response: ChatResponse) -> dict[str, Any]:
    assert response.metadata is not None
    return response.metadata


def model_id(request: RecordedRequest) -> str:
    return urllib.parse.unquote(request.path.split("/")[2])


# -- Converse ----------------------------------------------------------------------------------
async def test_converse_request_body_signing_and_answer() -> None:
    image = base64.b64encode(b"\x89PNG fake").decode()
    pdf = base64.b64encode(b"%PDF-1.7 fake").decode()
    messages = [
        Msg("system", "Be brief.", "system"),
        Msg(
            "user",
            [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": image},
                },
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
                    "filename": "report.v2.pdf",
                },
            ],
            "user",
        ),
    ]
    trace: dict[str, Any] = {
        "guardrail": {"inputAssessment": {"g1": {"topicPolicy": {"topics": []}}}}
    }
    async with WireServer() as server:
        server.script(converse([{"text": "Hi there"}], trace=trace))
        model = model_for(
            server,
            stream=False,
            guardrail={"guardrailIdentifier": "g1", "guardrailVersion": "1", "trace": "enabled"},
        )
        answer = await model.request(
            ModelRequest(messages, settings={"temperature": 0.2, "max_tokens": 50, "stop": ["END"]})
        )
        await model.aclose()
    request = server.requests[0]
    assert request.method == "POST"
    assert request.path.endswith("/converse")
    assert model_id(request) == MODEL
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-east-1/bedrock/aws4_request" in request.headers["authorization"]
    body = request.json
    assert body["system"] == [{"text": "Be brief."}]
    content = body["messages"][0]["content"]
    assert content[0] == {"text": "look"}
    assert content[1] == {"image": {"format": "png", "source": {"bytes": image}}}
    assert content[2] == {
        "document": {"format": "pdf", "name": "report-v2", "source": {"bytes": pdf}}
    }
    assert body["inferenceConfig"] == {
        "stopSequences": ["END"],
        "temperature": 0.2,
        "maxTokens": 50,
    }
    assert body["guardrailConfig"]["guardrailIdentifier"] == "g1"
    assert answer.get_text() == "Hi there"
    assert meta(answer)["finish_reason"] == "stop"
    assert meta(answer)["guardrail"] == trace["guardrail"]
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (40, 5)
    assert (answer.usage.cache_read_tokens, answer.usage.cache_write_tokens) == (20, 10)


async def test_converse_tool_use_and_reasoning_replayed() -> None:
    reasoning = {"reasoningContent": {"reasoningText": {"text": "add them", "signature": "sig-1"}}}
    call = {"toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 2, "b": 3}}}
    async with WireServer() as server:
        server.script(converse([reasoning, call], stop="tool_use"), converse([{"text": "5"}]))
        model = model_for(
            server, stream=False, reasoning={"thinking": {"type": "enabled", "budget_tokens": 1024}}
        )
        first = await model.request(ModelRequest(USER, [ADD], settings={"tool_choice": "required"}))
        assert meta(first)["finish_reason"] == "tool_calls"
        assert first.content[0] == {
            "type": "thinking",
            "thinking": "add them",
            "signature": "sig-1",
        }
        assert first.tool_calls[0]["input"] == {"a": 2, "b": 3}
        result = Msg(
            "user", [{"type": "tool_result", "id": "t1", "name": "add", "output": "5"}], "user"
        )
        second = await model.request(
            ModelRequest([*USER, Msg("assistant", first.content, "assistant"), result], [ADD])
        )
        await model.aclose()
    assert second.get_text() == "5"
    body = server.requests[0].json
    assert body["toolConfig"]["tools"][0]["toolSpec"] == {
        "name": "add",
        "inputSchema": {"json": ADD.parameters},
        "description": "Add two numbers.",
    }
    assert body["toolConfig"]["toolChoice"] == {"any": {}}
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }
    turns = server.requests[1].json["messages"]
    assert turns[1] == {"role": "assistant", "content": [reasoning, call]}
    assert turns[2]["content"] == [
        {"toolResult": {"toolUseId": "t1", "content": [{"text": "5"}], "status": "success"}}
    ]


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (429, "ThrottlingException", RateLimitError),
        (400, "ValidationException", BadRequestError),
        (403, "AccessDeniedException", AuthenticationError),
    ],
)
async def test_converse_errors_are_mapped(status: int, code: str, error: type[Exception]) -> None:
    reply = Reply(
        status,
        json={"message": f"{code} said no"},
        headers={
            "x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        },
    )
    async with WireServer() as server:
        server.script(reply, reply, reply)
        model = model_for(server, stream=False)
        with pytest.raises(error, match="said no"):
            await model.request(ModelRequest(USER))
        await model.aclose()
    assert len(server.requests) == (3 if status == 429 else 1)


async def test_model_not_ready_is_retried() -> None:
    busy = Reply(
        429, json={"message": "warming up"}, headers={"x-amzn-errortype": "ModelNotReadyException"}
    )
    unavailable = Reply(
        503, json={"message": "later"}, headers={"x-amzn-errortype": "ServiceUnavailableException"}
    )
    async with WireServer() as server:
        server.script(busy, unavailable, converse([{"text": "ok"}]))
        model = model_for(server, stream=False)
        answer = await model.request(ModelRequest(USER))
        await model.aclose()
    assert answer.get_text() == "ok"
    assert len(server.requests) == 3


# -- ConverseStream ----------------------------------------------------------------------------
def stream_frames() -> list[bytes]:
    return [
        event("messageStart", {"role": "assistant"}),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "think"}}},
        ),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig-9"}}},
        ),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Let me "}}),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "add."}}),
        event("contentBlockStop", {"contentBlockIndex": 1}),
        event(
            "contentBlockStart",
            {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "t1", "name": "add"}}},
        ),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"a": 2,'}}},
        ),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 2, "delta": {"toolUse": {"input": ' "b": 3}'}}},
        ),
        event("contentBlockStop", {"contentBlockIndex": 2}),
        event("messageStop", {"stopReason": "tool_use"}),
        event(
            "metadata",
            {
                "usage": USAGE,
                "metrics": {"latencyMs": 30},
                "trace": {"guardrail": {"modelOutput": ["x"]}},
            },
        ),
    ]


async def test_converse_stream_event_frames() -> None:
    async with WireServer() as server:
        server.script(event_stream(stream_frames()))
        model = model_for(server)
        chunks = [c async for c in model.request_stream(ModelRequest(USER, [ADD]))]
        await model.aclose()
    assert server.requests[0].path.endswith("/converse-stream")
    final = chunks[-1]
    assert [b["type"] for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0] == {"type": "thinking", "thinking": "think", "signature": "sig-9"}
    assert final.content[1] == {"type": "text", "text": "Let me add."}
    assert final.tool_calls[0]["input"] == {"a": 2, "b": 3}
    assert meta(final)["finish_reason"] == "tool_calls"
    assert meta(final)["guardrail"] == {"modelOutput": ["x"]}
    assert final.usage is not None
    assert final.usage.cache_read_tokens == 20
    assert len(chunks) > 3  # cumulative snapshots as the deltas came


async def test_converse_stream_throttling_before_content_is_retried() -> None:
    async with WireServer() as server:
        server.script(
            event_stream([exception("throttlingException", "slow down")]),
            event_stream(stream_frames()),
        )
        model = model_for(server)
        chunks = [c async for c in model.request_stream(ModelRequest(USER, [ADD]))]
        await model.aclose()
    assert meta(chunks[-1])["finish_reason"] == "tool_calls"
    assert len(server.requests) == 2


async def test_cancelling_converse_stream_closes_it() -> None:
    first = [
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "partial"}}),
    ]
    hanging = event_stream(first, then="hang")
    async with WireServer() as server:
        server.script(hanging)
        model = model_for(server)
        seen = asyncio.Event()

        async def consume() -> None:
            async for _ in model.request_stream(ModelRequest(USER)):
                seen.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(seen.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(hanging.closed.wait(), 10)
        await model.aclose()
    assert hanging.closed.is_set()


# -- agent level -------------------------------------------------------------------------------
async def test_agent_tool_turn_over_converse_stream() -> None:
    toolkit = Toolkit()

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    toolkit.register_tool_function(add)

    def finish(request: RecordedRequest) -> Stream:
        result = request.json["messages"][-1]["content"][0]["toolResult"]
        text = result["content"][0]["text"]
        return event_stream(
            [
                event("messageStart", {"role": "assistant"}),
                event(
                    "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": f"sum={text}"}}
                ),
                event("contentBlockStop", {"contentBlockIndex": 0}),
                event("messageStop", {"stopReason": "end_turn"}),
                event("metadata", {"usage": USAGE, "metrics": {"latencyMs": 3}}),
            ]
        )

    async with WireServer() as server:
        server.script(event_stream(stream_frames()), finish)
        model = model_for(server)
        agent = ReActAgent("bot", "You add.", model, toolkit, print_hint=False)
        reply = await agent("2+3?")
        await model.aclose()
    assert reply.get_text() == "sum=5"
    second = server.requests[1].json
    assert second["system"] == [{"text": "You add."}]
    assistant = second["messages"][1]["content"]
    assert assistant[0] == {
        "reasoningContent": {"reasoningText": {"text": "think", "signature": "sig-9"}}
    }
    assert assistant[2] == {
        "toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 2, "b": 3}}
    }


def test_from_string_bedrock_is_converse() -> None:
    from agentkit.models import AnthropicBedrockModel

    model = from_string(f"bedrock:{MODEL}", region="us-west-2")
    assert isinstance(model, BedrockConverseModel)
    other = from_string(
        "bedrock-anthropic:anthropic.claude-3-haiku", aws_region="us-west-2", api_key="k"
    )
    assert isinstance(other, AnthropicBedrockModel)

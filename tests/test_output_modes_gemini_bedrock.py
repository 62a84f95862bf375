"""Output modes over the Gemini and Bedrock Converse wire, with the official SDKs.

``NativeOutput`` is Gemini's ``responseMimeType: application/json`` + ``responseJsonSchema``
and Converse's ``outputConfig.textFormat`` (a ``json_schema`` sent as a string); the answer
is JSON text, streamed or not. A union is answered through response tools (``ToolOutput``).
``service_tier`` reaches both wires in each provider's spelling.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _wire_server import Reply, Stream, WireServer
from test_models_bedrock_converse import converse, event, event_stream
from test_models_bedrock_converse import model_for as bedrock_for
from test_models_google import answer, sse_events, usage
from test_models_google import model_for as google_for
from test_output_modes import TICKET, TICKET_JSON, Refund, Ticket, check_partials, streamed

from agentkit import NativeOutput, ReActAgent, ToolOutput
from agentkit.exceptions import BadRequestError
from agentkit.messages import Msg
from agentkit.models import ChatModel, ModelRequest

USER = [Msg("user", "hello", "user")]
USAGE = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}


def pieces(text: str, parts: int) -> list[str]:
    step = max(1, len(text) // parts)
    return [text[i : i + step] for i in range(0, len(text), step)]


def gemini_text_stream(text: str) -> Stream:
    chunks = [answer([{"text": piece}], finish=None) for piece in pieces(text, 10)]
    chunks.append(answer([{"text": ""}], usageMetadata=usage()))
    return Stream(events=sse_events(*chunks))


def converse_text_stream(text: str) -> Stream:
    frames = [event("messageStart", {"role": "assistant"})]
    frames += [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
        for piece in pieces(text, 10)
    ]
    frames += [
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
        event("metadata", {"usage": USAGE, "metrics": {"latencyMs": 3}}),
    ]
    return event_stream(frames)


def converse_call_stream(name: str, arguments: str) -> Stream:
    start = {"toolUse": {"toolUseId": "t1", "name": name}}
    frames = [
        event("messageStart", {"role": "assistant"}),
        event("contentBlockStart", {"contentBlockIndex": 0, "start": start}),
    ]
    frames += [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": p}}})
        for p in pieces(arguments, 10)
    ]
    frames += [
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "tool_use"}),
        event("metadata", {"usage": USAGE, "metrics": {"latencyMs": 3}}),
    ]
    return event_stream(frames)


async def _run(model: ChatModel, output_type: Any) -> tuple[list[Any], Any]:
    agent = ReActAgent("bot", "You file tickets.", model)
    try:
        return await streamed(agent, output_type)
    finally:
        await model.aclose()


# -- Gemini --------------------------------------------------------------------------------
async def test_gemini_native_output_streams_json_text_under_response_json_schema() -> None:
    async with WireServer() as server:
        server.script(gemini_text_stream(TICKET_JSON))
        events, result = await _run(google_for(server, stream=True), NativeOutput(Ticket))
    check_partials(events, Ticket, result.output)
    body = server.requests[0].json
    assert server.requests[0].path.endswith(":streamGenerateContent?alt=sse")
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseJsonSchema"]  # JSON Schema, $defs and $ref kept as they are
    assert schema == Ticket.model_json_schema()
    assert schema["properties"]["owner"] == {"$ref": "#/$defs/Owner"}
    assert "responseSchema" not in config and "tools" not in body


async def test_gemini_native_output_unstreamed_and_tool_output_union() -> None:
    refund = {"order": "A-7", "amount": 12.5}
    call = {"functionCall": {"id": "c1", "name": "generate_response_Refund", "args": refund}}
    async with WireServer() as server:
        server.script(
            Reply(json=answer([{"text": TICKET_JSON}], usageMetadata=usage())),
            Reply(json=answer([call], usageMetadata=usage())),
        )
        model = google_for(server)
        agent = ReActAgent("bot", "You file tickets.", model)
        native = await agent.run("file it", output_type=NativeOutput(Ticket))
        union = await agent.run("refund it", output_type=ToolOutput(Ticket | Refund))
        await model.aclose()
    assert native.output == Ticket.model_validate(TICKET)
    assert union.output == Refund.model_validate(refund)
    second = server.requests[1].json
    names = [d["name"] for d in second["tools"][0]["functionDeclarations"]]
    assert names == ["generate_response_Ticket", "generate_response_Refund"]
    assert "responseJsonSchema" not in second.get("generationConfig", {})


async def test_gemini_service_tier_is_a_request_field() -> None:
    async with WireServer() as server:
        server.script(Reply(json=answer([{"text": "ok"}])))
        model = google_for(server)
        await model.request(ModelRequest(USER, settings={"service_tier": "flex"}))
        await model.aclose()
    body = server.requests[0].json  # a field of the request, beside generationConfig
    assert body["serviceTier"] == "flex" and "serviceTier" not in body.get("generationConfig", {})


# -- Bedrock Converse ----------------------------------------------------------------------
async def test_converse_native_output_is_output_config_text_format_streamed() -> None:
    async with WireServer() as server:
        server.script(converse_text_stream(TICKET_JSON))
        events, result = await _run(bedrock_for(server), NativeOutput(Ticket))
    check_partials(events, Ticket, result.output)
    body = server.requests[0].json
    fmt = body["outputConfig"]["textFormat"]
    assert fmt["type"] == "json_schema"
    definition = fmt["structure"]["jsonSchema"]
    assert definition["name"] == "Ticket" and definition["description"] == "A support ticket."
    schema = json.loads(definition["schema"])  # the API takes the schema as a string
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Owner"]["additionalProperties"] is False
    assert "toolConfig" not in body  # no forced tool: the text is the answer


async def test_converse_native_output_unstreamed_and_tool_output_union_streamed() -> None:
    refund = json.dumps({"order": "A-7", "amount": 12.5})
    async with WireServer() as server:
        server.script(
            converse([{"text": TICKET_JSON}]),
            converse_call_stream("generate_response_Refund", refund),
        )
        plain = bedrock_for(server, stream=False)
        native = await ReActAgent("bot", "sys", plain).run(
            "file it", output_type=NativeOutput(Ticket)
        )
        await plain.aclose()
        events, union = await _run(bedrock_for(server), ToolOutput(Ticket | Refund))
    assert native.output == Ticket.model_validate(TICKET)
    assert union.output == Refund.model_validate_json(refund)
    check_partials(events, Refund, union.output)
    tools = server.requests[1].json["toolConfig"]
    names = [t["toolSpec"]["name"] for t in tools["tools"]]
    assert names == ["generate_response_Ticket", "generate_response_Refund"]
    assert "outputConfig" not in server.requests[1].json


@pytest.mark.parametrize("tier", ["priority", "flex"])
async def test_converse_service_tier_is_sent_as_service_tier_type(tier: str) -> None:
    async with WireServer() as server:
        server.script(converse([{"text": "ok"}]))
        model = bedrock_for(server, stream=False)
        await model.request(ModelRequest(USER, settings={"service_tier": tier}))
        await model.aclose()
    assert server.requests[0].json["serviceTier"] == {"type": tier}


async def test_gemini_without_any_turn_is_a_bad_request_before_sending() -> None:
    async with WireServer() as server:
        model = google_for(server)
        with pytest.raises(BadRequestError, match="at least one user or model message"):
            await model.request(ModelRequest([Msg("s", "Be brief.", "system")]))
        await model.aclose()
    assert server.requests == []

"""GoogleModel over the wire: the official google-genai SDK against a local server speaking
Gemini's REST JSON (``generateContent``, ``streamGenerateContent?alt=sse``) as the public API
reference defines it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from _wire_server import RecordedRequest, Reply, Stream, WireServer
from pydantic import BaseModel

from agentkit import ReActAgent, Toolkit
from agentkit.exceptions import (
    AuthenticationError,
    BadRequestError,
    ContextWindowError,
    ModelAPIError,
    ModelConnectionError,
    RateLimitError,
)
from agentkit.messages import Msg
from agentkit.models import (
    GoogleModel,
    ModelRequest,
    OutputSpec,
    RetryPolicy,
    ToolDefinition,
    from_string,
)

MODEL = "gemini-2.5-flash"
PATH = f"/v1beta/models/{MODEL}:generateContent"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.002)
USER = [Msg("user", "hello", "user")]
SIG_A = base64.b64encode(b"\x00sig-a\xff\xfe").decode()
SIG_B = base64.b64encode(b"sig-b\xfb\xff").decode()
ADD = ToolDefinition(
    "add",
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)


# -- Gemini's wire format ------------------------------------------------------------------
def usage(prompt: int = 7, answer: int = 3, **extra: Any) -> dict[str, Any]:
    out = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": answer,
        "totalTokenCount": prompt + answer + extra.get("thoughtsTokenCount", 0),
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    out.update(extra)
    return out


def answer(
    parts: list[dict[str, Any]], finish: str | None = "STOP", **extra: Any
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` body."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": MODEL,
        "responseId": "resp-1",
    }
    body.update(extra)
    return body


def sse_events(*chunks: dict[str, Any]) -> list[bytes]:
    """Gemini's SSE framing: ``data: <json>`` lines ended by CRLF CRLF."""
    return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks]


def error(status: int, message: str, code_name: str, **headers: str) -> Reply:
    body = {"error": {"code": status, "message": message, "status": code_name}}
    return Reply(status=status, json=body, headers=headers)


def camel(value: Any) -> Any:
    """``value`` with every key in lowerCamelCase (proto JSON accepts either spelling)."""
    if isinstance(value, list):
        return [camel(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        out[head + "".join(w.title() for w in rest)] = camel(item)
    return out


def model_for(server: WireServer, **kwargs: Any) -> GoogleModel:
    options: dict[str, Any] = {"api_key": "g-key", "stream": False, "retry": FAST}
    options.update(kwargs)
    return GoogleModel(MODEL, base_url=server.url, **options)


# -- text, settings, usage -----------------------------------------------------------------
async def test_text_answer_with_system_instruction_settings_and_usage() -> None:
    async with WireServer() as server:
        meta = usage(12, 4, cachedContentTokenCount=8, thoughtsTokenCount=5)
        server.script(Reply(json=answer([{"text": "hi there"}], usageMetadata=meta)))
        model = model_for(server)
        messages = [Msg("s", "Be brief.", "system"), *USER]
        response = await model.request(
            ModelRequest(
                messages,
                settings={"temperature": 0.2, "max_tokens": 64, "stop": ["END"], "seed": 3},
            )
        )
        await model.aclose()
        request = server.requests[0]
    assert request.path == PATH
    assert request.headers["x-goog-api-key"] == "g-key"
    body = request.json
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
        "seed": 3,
    }
    assert "tools" not in body
    assert response.get_text() == "hi there"
    assert response.id == "resp-1"
    assert response.metadata is not None and response.metadata["finish_reason"] == "stop"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 9)
    assert response.usage.cache_read_tokens == 8
    assert response.usage.reasoning_tokens == 5


async def test_empty_system_prompt_sends_no_system_instruction() -> None:
    async with WireServer() as server:
        server.script(Reply(json=answer([{"text": "ok"}])))
        model = model_for(server)
        await model.request(ModelRequest([Msg("s", "", "system"), *USER]))
        await model.aclose()
    assert "systemInstruction" not in server.requests[0].json


async def test_streamed_text_is_cumulative_and_a_trailing_signature_joins_the_text() -> None:
    async with WireServer() as server:
        events = sse_events(
            answer([{"text": "Hel"}], finish=None),
            answer([{"text": "lo!"}], finish=None),
            answer([{"text": "", "thoughtSignature": SIG_A}], usageMetadata=usage(5, 2)),
        )
        server.script(Stream(events=events))
        model = model_for(server, stream=True)
        chunks = [c async for c in model.request_stream(ModelRequest(USER))]
        await model.aclose()
        request = server.requests[0]
    assert request.path == STREAM_PATH
    texts = [c.get_text() for c in chunks]
    assert texts[:2] == ["Hel", "Hello!"] and texts[-1] == "Hello!"
    final = chunks[-1]
    assert final.content == [
        {
            "type": "text",
            "text": "Hello!",
            "extra_content": {"google": {"thought_signature": SIG_A}},
        }
    ]
    assert final.usage is not None and final.usage.input_tokens == 5
    assert chunks[0].usage is None


# -- function calling with thought signatures ---------------------------------------------
async def test_parallel_calls_keep_ids_and_signatures_and_replay_them_verbatim() -> None:
    calls = [
        {
            "functionCall": {"id": "c1", "name": "add", "args": {"a": 1, "b": 2}},
            "thoughtSignature": SIG_A,
        },
        {"functionCall": {"id": "c2", "name": "add", "args": {"a": 3, "b": 4}}},
    ]
    async with WireServer() as server:
        server.script(Reply(json=answer(calls)), Reply(json=answer([{"text": "3 and 7"}])))
        model = model_for(server)
        first = await model.request(ModelRequest(USER, [ADD], settings={"tool_choice": "required"}))
        assert [(c["id"], c["name"], c["input"]) for c in first.tool_calls] == [
            ("c1", "add", {"a": 1, "b": 2}),
            ("c2", "add", {"a": 3, "b": 4}),
        ]
        assert first.metadata is not None and first.metadata["finish_reason"] == "tool_calls"
        results = Msg(
            "user",
            [
                {"type": "tool_result", "id": "c1", "name": "add", "output": "3"},
                {
                    "type": "tool_result",
                    "id": "c2",
                    "name": "add",
                    "output": "boom",
                    "is_error": True,
                },
            ],
            "user",
        )
        second = await model.request(
            ModelRequest([*USER, Msg("bot", first.content, "assistant"), results], [ADD])
        )
        await model.aclose()
    assert second.get_text() == "3 and 7"
    body0, body1 = server.requests[0].json, server.requests[1].json
    # The SDK sends declarations' own fields by their proto names (``parameters_json_schema``);
    # the API's JSON parser takes proto names and lowerCamelCase alike.
    assert camel(body0["tools"]) == [
        {
            "functionDeclarations": [
                {
                    "name": "add",
                    "description": "Add two numbers.",
                    "parametersJsonSchema": ADD.parameters,
                }
            ]
        }
    ]
    assert body0["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    model_turn, result_turn = body1["contents"][1], body1["contents"][2]
    assert model_turn["role"] == "model"
    sent = model_turn["parts"]
    assert [p["functionCall"] for p in sent] == [c["functionCall"] for c in calls]
    # The signature travels on the part it came on, byte for byte; the second call had none.
    assert base64.urlsafe_b64decode(sent[0]["thoughtSignature"]) == base64.b64decode(SIG_A)
    assert "thoughtSignature" not in sent[1]
    assert result_turn == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "add", "response": {"output": "3"}}},
            {"functionResponse": {"id": "c2", "name": "add", "response": {"error": "boom"}}},
        ],
    }


async def test_streamed_calls_and_tool_choice_by_name() -> None:
    async with WireServer() as server:
        events = sse_events(
            answer(
                [{"functionCall": {"name": "add", "args": {"a": 1}}, "thoughtSignature": SIG_B}],
                finish=None,
            ),
            answer([{"functionCall": {"name": "add", "args": {"a": 2}}}], usageMetadata=usage()),
        )
        server.script(Stream(events=events))
        model = model_for(server, stream=True)
        chunks = [
            c
            async for c in model.request_stream(
                ModelRequest(USER, [ADD], settings={"tool_choice": "add"})
            )
        ]
        await model.aclose()
    final = chunks[-1]
    ids = [c["id"] for c in final.tool_calls]
    assert [c["input"] for c in final.tool_calls] == [{"a": 1}, {"a": 2}]
    assert all(ids) and len(set(ids)) == 2  # Gemini API calls without ids get unique ones
    extra: Any = final.tool_calls[0]
    assert extra["extra_content"] == {"google": {"thought_signature": SIG_B}}
    assert server.requests[0].json["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}
    }


async def test_calls_from_another_provider_get_the_documented_placeholder_signature() -> None:
    history = Msg(
        "bot", [{"type": "tool_use", "id": "x1", "name": "add", "input": {}}], "assistant"
    )
    async with WireServer() as server:
        server.script(Reply(json=answer([{"text": "ok"}])))
        model = model_for(server)
        await model.request(ModelRequest([*USER, history], [ADD]))
        await model.aclose()
    part = server.requests[0].json["contents"][1]["parts"][0]
    assert base64.urlsafe_b64decode(part["thoughtSignature"]) == b"skip_thought_signature_validator"


# -- thinking ------------------------------------------------------------------------------
async def test_thought_summaries_become_thinking_blocks_and_signed_ones_go_back() -> None:
    parts = [
        {"text": "Let me think.", "thought": True, "thoughtSignature": SIG_B},
        {"text": "42"},
    ]
    async with WireServer() as server:
        meta = usage(4, 1, thoughtsTokenCount=30)
        server.script(
            Reply(json=answer(parts, usageMetadata=meta)), Reply(json=answer([{"text": "ok"}]))
        )
        model = model_for(server, thinking={"include_thoughts": True, "thinking_budget": 512})
        response = await model.request(ModelRequest(USER))
        await model.request(
            ModelRequest(
                [*USER, Msg("bot", response.content, "assistant"), Msg("u", "and?", "user")]
            )
        )
        await model.aclose()
    assert response.content[0]["type"] == "thinking"
    assert response.content[0]["thinking"] == "Let me think."
    assert response.get_text() == "42"
    assert response.usage is not None
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (31, 30)
    assert camel(server.requests[0].json["generationConfig"]["thinkingConfig"]) == {
        "includeThoughts": True,
        "thinkingBudget": 512,
    }
    replayed = server.requests[1].json["contents"][1]["parts"]
    assert replayed[0]["thought"] is True and replayed[0]["text"] == "Let me think."
    assert base64.urlsafe_b64decode(replayed[0]["thoughtSignature"]) == base64.b64decode(SIG_B)
    assert replayed[1] == {"text": "42"}


# -- structured output ---------------------------------------------------------------------
class City(BaseModel):
    name: str
    population: int


async def test_structured_output_asks_for_json_by_schema_and_validates_it() -> None:
    async with WireServer() as server:
        text = '{"name": "Oslo", "population": 700000}'
        server.script(Reply(json=answer([{"text": text}])))
        model = model_for(server)
        response = await model.request(ModelRequest(USER, output=OutputSpec(City, "native")))
        await model.aclose()
    config = server.requests[0].json["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == City.model_json_schema()
    assert response.metadata is not None
    assert response.metadata["structured_output"] == {"name": "Oslo", "population": 700000}


# -- media in ------------------------------------------------------------------------------
async def test_images_pdfs_and_audio_go_as_inline_data_and_urls_as_file_data() -> None:
    png, pdf, wav = b"\x89PNG\r\n", b"%PDF-1.7", b"RIFF\x00WAVE"
    blocks: list[Any] = [
        {"type": "text", "text": "look"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(png).decode(),
            },
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(pdf).decode(),
            },
        },
        {
            "type": "audio",
            "source": {
                "type": "base64",
                "media_type": "audio/wav",
                "data": base64.b64encode(wav).decode(),
            },
        },
        {"type": "image", "source": {"type": "url", "url": "gs://bucket/cat.jpg"}},
    ]
    async with WireServer() as server:
        server.script(Reply(json=answer([{"text": "seen"}])))
        model = model_for(server)
        await model.request(ModelRequest([Msg("user", blocks, "user")]))
        await model.aclose()
    parts = camel(server.requests[0].json["contents"][0]["parts"])
    assert parts[0] == {"text": "look"}
    inline = [
        (p["inlineData"]["mimeType"], base64.urlsafe_b64decode(p["inlineData"]["data"]))
        for p in parts[1:4]
    ]
    assert inline == [("image/png", png), ("application/pdf", pdf), ("audio/wav", wav)]
    assert parts[4] == {"fileData": {"fileUri": "gs://bucket/cat.jpg", "mimeType": "image/jpeg"}}


# -- errors and stop reasons ---------------------------------------------------------------
async def test_rate_limit_is_retried_then_raised_as_rate_limit_error() -> None:
    async with WireServer() as server:
        limited = error(
            429, "Resource has been exhausted", "RESOURCE_EXHAUSTED", **{"retry-after": "0"}
        )
        server.script(limited, limited, limited)
        model = model_for(server)
        with pytest.raises(RateLimitError) as caught:
            await model.request(ModelRequest(USER))
        await model.aclose()
    assert len(server.requests) == 3  # the first try and FAST's two retries
    assert caught.value.status_code == 429 and caught.value.provider == "google"
    assert "Resource has been exhausted" in str(caught.value)


async def test_unavailable_is_retried_until_the_answer_comes() -> None:
    async with WireServer() as server:
        server.script(
            error(503, "The model is overloaded.", "UNAVAILABLE"),
            error(500, "Internal error", "INTERNAL"),
            Reply(json=answer([{"text": "back"}])),
        )
        model = model_for(server)
        response = await model.request(ModelRequest(USER))
        await model.aclose()
    assert response.get_text() == "back" and len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "name", "message", "expected"),
    [
        (400, "INVALID_ARGUMENT", "Invalid JSON payload received.", BadRequestError),
        (
            400,
            "INVALID_ARGUMENT",
            "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576).",
            ContextWindowError,
        ),
        (401, "UNAUTHENTICATED", "API key not valid.", AuthenticationError),
        (403, "PERMISSION_DENIED", "Permission denied.", AuthenticationError),
        (404, "NOT_FOUND", "models/nope is not found", BadRequestError),
    ],
)
async def test_client_errors_are_mapped_and_not_retried(
    status: int, name: str, message: str, expected: type[Exception]
) -> None:
    async with WireServer() as server:
        server.script(error(status, message, name))
        model = model_for(server)
        with pytest.raises(expected) as caught:
            await model.request(ModelRequest(USER))
        await model.aclose()
    assert len(server.requests) == 1
    assert isinstance(caught.value, ModelAPIError) and caught.value.status_code == status


async def test_error_in_the_stream_is_mapped() -> None:
    async with WireServer() as server:
        body = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
        events = [f"data: {json.dumps(body)}\r\n\r\n".encode()]
        server.script(Stream(events=events), Stream(events=events), Stream(events=events))
        model = model_for(server, stream=True)
        with pytest.raises(RateLimitError):
            [c async for c in model.request_stream(ModelRequest(USER))]
        await model.aclose()


async def test_stream_cut_before_any_content_is_retried() -> None:
    async with WireServer() as server:
        server.script(
            Stream(events=[], then="cut"),
            Stream(events=sse_events(answer([{"text": "whole"}], usageMetadata=usage()))),
        )
        model = model_for(server, stream=True)
        chunks = [c async for c in model.request_stream(ModelRequest(USER))]
        await model.aclose()
    assert chunks[-1].get_text() == "whole" and len(server.requests) == 2


async def test_stream_cut_after_content_raises_a_connection_error() -> None:
    async with WireServer() as server:
        server.script(
            Stream(events=sse_events(answer([{"text": "half"}], finish=None)), then="cut")
        )
        model = model_for(server, stream=True)
        seen: list[str] = []

        async def read() -> None:
            async for chunk in model.request_stream(ModelRequest(USER)):
                seen.append(chunk.get_text())

        with pytest.raises(ModelConnectionError):
            await read()
        await model.aclose()
    assert seen == ["half"] and len(server.requests) == 1


async def test_blocked_prompt_and_safety_stop_are_named_stop_reasons() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
        "usageMetadata": usage(9, 0),
        "modelVersion": MODEL,
    }
    ratings = [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
    ]
    safety = answer([], finish="SAFETY")
    safety["candidates"][0]["safetyRatings"] = ratings
    async with WireServer() as server:
        server.script(
            Reply(json=blocked),
            Reply(json=safety),
            Reply(json=answer([{"text": "x"}], finish="MAX_TOKENS")),
        )
        model = model_for(server)
        first = await model.request(ModelRequest(USER))
        second = await model.request(ModelRequest(USER))
        third = await model.request(ModelRequest(USER))
        await model.aclose()
    assert first.content == [] and first.metadata is not None
    assert first.metadata["finish_reason"] == "content_filter"
    assert first.metadata["block_reason"] == "SAFETY"
    assert second.metadata is not None and second.metadata["finish_reason"] == "content_filter"
    assert second.metadata["provider_finish_reason"] == "SAFETY"
    assert second.metadata["safety_ratings"][0]["category"] == "HARM_CATEGORY_DANGEROUS_CONTENT"
    assert third.metadata is not None and third.metadata["finish_reason"] == "length"


async def test_negative_token_counts_are_refused() -> None:
    async with WireServer() as server:
        server.script(Reply(json=answer([{"text": "x"}], usageMetadata=usage(5, -3))))
        model = model_for(server)
        with pytest.raises(ModelAPIError, match="negative"):
            await model.request(ModelRequest(USER))
        await model.aclose()


async def test_unknown_settings_are_a_clear_error_before_sending() -> None:
    async with WireServer() as server:
        model = model_for(server)
        with pytest.raises(BadRequestError, match="invalid request settings"):
            await model.request(ModelRequest(USER, settings={"extra_body": {"no_such_field": 1}}))
        await model.aclose()
    assert server.requests == []


# -- construction, strings, Vertex AI ------------------------------------------------------
def test_model_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    model = from_string("google:gemini-2.5-flash")
    assert isinstance(model, GoogleModel) and model.provider == "google"
    assert model.model_name == "gemini-2.5-flash" and not model.vertexai
    vertex = from_string("google-vertex:gemini-2.5-pro", project="p", location="us-central1")
    assert (
        isinstance(vertex, GoogleModel) and vertex.vertexai and vertex.provider == "google-vertex"
    )


def test_missing_api_key_is_an_authentication_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(AuthenticationError, match="GEMINI_API_KEY"):
        GoogleModel(MODEL)


async def test_vertex_requests_go_to_the_project_and_region_path() -> None:
    from google.oauth2.credentials import Credentials

    async with WireServer() as server:
        server.script(Reply(json=answer([{"text": "from vertex"}])))
        model = GoogleModel(
            MODEL,
            vertexai=True,
            project="proj",
            location="us-central1",
            credentials=Credentials(token="tok"),
            base_url=server.url,
            stream=False,
            retry=FAST,
        )
        response = await model.request(ModelRequest(USER))
        await model.aclose()
        request = server.requests[0]
    assert response.get_text() == "from vertex"
    assert request.path == (
        f"/v1beta1/projects/proj/locations/us-central1/publishers/google/models/{MODEL}:generateContent"
    )
    assert request.headers["authorization"] == "Bearer tok"


# -- an agent over the wire ----------------------------------------------------------------
async def test_react_agent_runs_a_tool_turn_with_gemini() -> None:
    toolkit = Toolkit()

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    toolkit.register_tool_function(add)
    call = {
        "functionCall": {"id": "k1", "name": "add", "args": {"a": 2, "b": 3}},
        "thoughtSignature": SIG_A,
    }

    def finish(request: RecordedRequest) -> Stream:
        result = request.json["contents"][-1]["parts"][0]["functionResponse"]
        return Stream(
            events=sse_events(
                answer([{"text": f"sum={result['response']['output']}"}], usageMetadata=usage())
            )
        )

    async with WireServer() as server:
        server.script(Stream(events=sse_events(answer([call], usageMetadata=usage()))), finish)
        model = model_for(server, stream=True)
        agent = ReActAgent("bot", "You add.", model, toolkit, print_hint=False)
        reply = await agent("2+3?")
        await model.aclose()
    assert reply.get_text() == "sum=5"
    second = server.requests[1].json
    assert second["systemInstruction"] == {"parts": [{"text": "You add."}]}
    model_part = second["contents"][1]["parts"][0]
    assert model_part["functionCall"] == call["functionCall"]
    assert base64.urlsafe_b64decode(model_part["thoughtSignature"]) == base64.b64decode(SIG_A)
    assert second["tools"][0]["functionDeclarations"][0]["name"] == "add"

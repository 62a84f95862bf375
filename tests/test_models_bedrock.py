"""Claude on Amazon Bedrock: lean invoke requests, event-stream streams through the SDK."""

from __future__ import annotations

import pytest
from _model_calls import ask
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    bedrock_stream,
)

from agentkit.exceptions import AuthenticationError, MissingDependencyError
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicBedrockModel,
    ChatResponse,
    ModelRequest,
    RetryPolicy,
    from_string,
)

USER = [Msg("user", "hello", "user")]
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
FAST = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.002)
EVENTSTREAM = {"content-type": "application/vnd.amazon.eventstream"}
ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}


def _model(server: WireServer, **kwargs: object) -> AnthropicBedrockModel:
    options: dict[str, object] = {"api_key": "br-key", "aws_region": "us-east-1"}
    options.update(kwargs)
    return AnthropicBedrockModel(
        MODEL,
        base_url=server.url,
        stream=False,
        max_tokens=256,
        retry=FAST,
        **options,  # type: ignore[arg-type]
    )


async def test_invoke_body_path_and_api_key() -> None:
    async with WireServer() as server:
        server.script(Reply(json=anthropic_message([{"type": "text", "text": "hi"}])))
        model = _model(server)
        response = await ask(model, [Msg("s", "Be brief.", "system"), *USER])
        await model.aclose()
        request = server.requests[0]
    assert isinstance(response, ChatResponse) and response.get_text() == "hi"
    assert request.path == f"/model/{MODEL}/invoke"
    assert request.headers["authorization"] == "Bearer br-key"
    assert request.json == {
        "max_tokens": 256,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "system": [{"type": "text", "text": "Be brief."}],
        "anthropic_version": "bedrock-2023-05-31",
    }


async def test_sigv4_signing_with_aws_credentials() -> None:
    async with WireServer() as server:
        server.script(Reply(json=anthropic_message([{"type": "text", "text": "signed"}])))
        model = _model(server, api_key=None, aws_access_key="AKIDEXAMPLE", aws_secret_key="secret")
        assert (await ask(model, USER)).get_text() == "signed"  # type: ignore[union-attr]
        await model.aclose()
        headers = server.requests[0].headers
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-east-1/bedrock/aws4_request" in headers["authorization"]
    assert "x-amz-date" in headers


async def test_event_stream_with_tool_call_and_retry() -> None:
    content = [
        {"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
    ]
    async with WireServer() as server:
        server.script(
            anthropic_error(429, "slow down", "rate_limit_error"),
            Stream(bedrock_stream(anthropic_stream(content)), headers=EVENTSTREAM),
        )
        model = _model(server)
        chunks = [c async for c in await ask(model, USER, tools=[ADD], stream=True)]  # type: ignore[union-attr]
        await model.aclose()
        requests = server.requests
    assert chunks[-1].content == content
    assert chunks[-1].metadata == {"finish_reason": "tool_use"}
    assert len(chunks) > 2  # cumulative snapshots while it streamed
    assert [r.path for r in requests] == [f"/model/{MODEL}/invoke-with-response-stream"] * 2
    body = requests[1].json
    assert "model" not in body and "stream" not in body
    assert body["tools"] == [{"name": "add", "input_schema": {"type": "object"}}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


async def test_stream_cut_before_message_stop_is_an_error() -> None:
    events = anthropic_stream([{"type": "text", "text": "partial"}], stop=False)[:-1]
    async with WireServer() as server:
        server.script(Stream(bedrock_stream(events), headers=EVENTSTREAM))
        model = _model(server)
        from agentkit.exceptions import ModelConnectionError

        with pytest.raises(ModelConnectionError):
            [c async for c in await ask(model, USER, stream=True)]  # type: ignore[union-attr]
        await model.aclose()


async def test_from_string_bedrock_anthropic_and_missing_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "env-br")
    with pytest.raises(AuthenticationError, match="AWS_REGION"):
        await from_string(f"bedrock-anthropic:{MODEL}", stream=False).request(ModelRequest(USER))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    model = from_string(f"bedrock-anthropic:{MODEL}")
    assert isinstance(model, AnthropicBedrockModel)
    assert str(model.client.base_url) == "https://bedrock-runtime.eu-west-1.amazonaws.com"


def test_sigv4_without_botocore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setitem(sys.modules, "botocore", None)  # as if botocore were absent
    with pytest.raises(MissingDependencyError, match=r"agentkit\[bedrock\]"):
        AnthropicBedrockModel(MODEL, aws_region="us-east-1")
    AnthropicBedrockModel(MODEL, aws_region="us-east-1", api_key="k")  # a Bedrock API key: fine

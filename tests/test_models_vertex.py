"""Claude on Vertex AI: the lean path sends what the SDK's own Vertex client sends."""

from __future__ import annotations

import anthropic
import pytest
from _model_calls import ask
from _wire_server import Reply, Stream, WireServer, anthropic_message, anthropic_stream

from agentkit.exceptions import AuthenticationError, MissingDependencyError, RateLimitError
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicVertexModel,
    ChatResponse,
    ModelRequest,
    RetryPolicy,
    from_string,
)

USER = [Msg("user", "hello", "user")]
MODEL = "claude-sonnet-4-5@20250929"
FAST = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.002)


def _model(server: WireServer, **kwargs: object) -> AnthropicVertexModel:
    return AnthropicVertexModel(
        MODEL,
        region="us-east5",
        project_id="proj-1",
        access_token="ya29.tok",
        base_url=f"{server.url}/v1",
        stream=False,
        max_tokens=256,
        retry=FAST,
        **kwargs,
    )


async def test_request_matches_the_sdk_vertex_client() -> None:
    async with WireServer() as server:
        reply = anthropic_message([{"type": "text", "text": "hi"}])
        server.script(Reply(json=reply), Reply(json=reply))
        sdk = anthropic.AsyncAnthropicVertex(
            region="us-east5",
            project_id="proj-1",
            access_token="ya29.tok",
            base_url=f"{server.url}/v1",
            max_retries=0,
        )
        await sdk.messages.create(
            model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "hello"}]
        )
        await sdk.close()
        model = _model(server)
        response = await ask(model, USER)
        await model.aclose()
        theirs, ours = server.requests
    assert isinstance(response, ChatResponse) and response.get_text() == "hi"
    assert ours.path == theirs.path
    assert ours.path == (
        f"/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/{MODEL}:rawPredict"
    )
    assert ours.headers["authorization"] == theirs.headers["authorization"] == "Bearer ya29.tok"
    assert ours.json == {
        "max_tokens": 256,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "anthropic_version": "vertex-2023-10-16",
    }
    assert "model" not in theirs.json and "anthropic_version" in theirs.json


async def test_streaming_uses_stream_raw_predict_and_retries() -> None:
    async with WireServer() as server:
        server.script(
            Reply(
                429,
                json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            ),
            Stream(anthropic_stream([{"type": "text", "text": "streamed answer"}])),
            Reply(
                429,
                json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            ),
            Reply(
                429,
                json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            ),
        )
        model = _model(server)
        chunks = [c async for c in await ask(model, USER, stream=True)]  # type: ignore[union-attr]
        assert chunks[-1].get_text() == "streamed answer"
        with pytest.raises(RateLimitError):
            await ask(model, USER)
        await model.aclose()
        paths = [r.path for r in server.requests]
    assert paths[0].endswith(":streamRawPredict") and paths[1] == paths[0]
    assert server.requests[0].json["stream"] is True
    assert paths[2].endswith(":rawPredict")


async def test_missing_settings_name_their_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
    monkeypatch.delenv("ANTHROPIC_VERTEX_PROJECT_ID", raising=False)
    with pytest.raises(AuthenticationError, match="CLOUD_ML_REGION"):
        await AnthropicVertexModel(MODEL, project_id="p", access_token="t").request(
            ModelRequest(USER)
        )
    with pytest.raises(AuthenticationError, match="ANTHROPIC_VERTEX_PROJECT_ID"):
        await AnthropicVertexModel(MODEL, region="us-east5", access_token="t").request(
            ModelRequest(USER)
        )
    monkeypatch.setenv("CLOUD_ML_REGION", "europe-west1")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "envproj")
    model = from_string(f"vertex:{MODEL}", access_token="t")
    assert isinstance(model, AnthropicVertexModel)
    assert (model.region, model.project_id) == ("europe-west1", "envproj")
    assert str(model.client.base_url) == "https://europe-west1-aiplatform.googleapis.com/v1/"


def test_missing_google_auth_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "google.auth", None)  # as if google-auth were absent
    with pytest.raises(MissingDependencyError, match=r"agentkit\[vertex\]"):
        AnthropicVertexModel(MODEL, region="us-east5", project_id="p")
    AnthropicVertexModel(MODEL, region="us-east5", project_id="p", access_token="t")  # no need

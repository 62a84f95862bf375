"""Azure OpenAI, Gemini and the other ``from_string`` providers, at the wire level."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _model_calls import ask
from _wire_server import (
    Reply,
    Stream,
    WireServer,
    openai_chunks,
    openai_completion,
    openai_error,
    responses_body,
    responses_message,
)

from agentkit.exceptions import AuthenticationError
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicChatModel,
    AzureOpenAIChatModel,
    AzureOpenAIResponsesModel,
    ChatResponse,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
    from_string,
)

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)
USER = [Msg("user", "hello", "user")]
VERSION = "2024-10-21"
_AZURE_ENV = ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT")


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*_AZURE_ENV, "OPENAI_API_VERSION", "OLLAMA_HOST", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


# -- Azure OpenAI --------------------------------------------------------------------------
async def test_azure_chat_uses_the_deployment_path_and_api_key(server: WireServer) -> None:
    server.script(
        Reply(json=openai_completion(text="hi from azure")),
        Stream(openai_chunks(text="streamed")),
    )
    model = AzureOpenAIChatModel(
        "my-gpt4o",
        azure_endpoint=server.url,
        api_version=VERSION,
        api_key="az-key",
        stream=False,
        retry=FAST,
    )
    response = await ask(model, USER)
    assert isinstance(response, ChatResponse) and response.get_text() == "hi from azure"
    request = server.requests[0]
    assert request.path == f"/openai/deployments/my-gpt4o/chat/completions?api-version={VERSION}"
    assert request.headers["api-key"] == "az-key"
    assert "authorization" not in request.headers
    assert request.json == {"model": "my-gpt4o", "messages": [{"role": "user", "content": "hello"}]}
    chunks = [c async for c in await ask(model, USER, stream=True)]  # type: ignore[union-attr]
    assert chunks[-1].get_text() == "streamed"
    assert server.requests[1].path == server.requests[0].path
    assert model.provider == "azure"
    await model.aclose()


async def test_azure_entra_token_provider_is_called_per_request(server: WireServer) -> None:
    tokens = itertools.count(1)

    async def token() -> str:
        return f"entra-{next(tokens)}"

    server.script(
        Reply(json=openai_completion(text="a")),
        openai_error(503, "busy"),
        Reply(json=openai_completion(text="b")),
    )
    model = AzureOpenAIChatModel(
        "dep",
        azure_endpoint=server.url,
        api_version=VERSION,
        azure_ad_token_provider=token,
        stream=False,
        retry=FAST,
    )
    await ask(model, USER)
    await ask(model, USER)  # retried once after the 503
    auth = [r.headers["authorization"] for r in server.requests]
    assert auth == ["Bearer entra-1", "Bearer entra-2", "Bearer entra-3"]
    assert all("api-key" not in r.headers for r in server.requests)
    await model.aclose()


async def test_azure_base_url_with_deployment_is_used_as_is(server: WireServer) -> None:
    server.script(Reply(json=openai_completion(text="ok")))
    base = f"{server.url}/openai/deployments/dep2"
    model = AzureOpenAIChatModel(
        "dep2", base_url=base, api_version=VERSION, api_key="k", stream=False
    )
    await ask(model, USER)
    assert (
        server.requests[0].path
        == f"/openai/deployments/dep2/chat/completions?api-version={VERSION}"
    )
    await model.aclose()


async def test_azure_responses_path(server: WireServer) -> None:
    server.script(Reply(json=responses_body([responses_message("ok")])))
    model = AzureOpenAIResponsesModel(
        "my-o4",
        azure_endpoint=server.url,
        api_version="2025-04-01-preview",
        api_key="az",
        stream=False,
    )
    assert (await ask(model, USER)).get_text() == "ok"  # type: ignore[union-attr]
    request = server.requests[0]
    assert request.path == "/openai/responses?api-version=2025-04-01-preview"
    assert request.json["model"] == "my-o4" and request.json["store"] is False
    assert request.headers["api-key"] == "az"
    await model.aclose()


async def test_azure_settings_from_the_sdk_environment(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)
    monkeypatch.setenv("OPENAI_API_VERSION", VERSION)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "env-az")
    server.script(Reply(json=openai_completion(text="ok")))
    model = from_string("azure:envdep", stream=False)
    assert isinstance(model, AzureOpenAIChatModel)
    await ask(model, USER)
    assert server.requests[0].path.startswith("/openai/deployments/envdep/chat/completions")
    assert server.requests[0].headers["api-key"] == "env-az"
    await model.aclose()


@pytest.mark.parametrize(
    ("kwargs", "missing"),
    [
        ({"azure_endpoint": "http://x", "api_key": "k"}, "OPENAI_API_VERSION"),
        ({"api_version": VERSION, "api_key": "k"}, "AZURE_OPENAI_ENDPOINT"),
        ({"azure_endpoint": "http://x", "api_version": VERSION}, "AZURE_OPENAI_API_KEY"),
    ],
)
async def test_azure_missing_setting_names_the_variable(
    kwargs: dict[str, Any], missing: str
) -> None:
    model = AzureOpenAIChatModel("dep", stream=False, **kwargs)
    with pytest.raises(AuthenticationError, match=missing):
        await ask(model, USER)


# -- Gemini (OpenAI-compatible endpoint) ---------------------------------------------------
def _gemini_call(signature: str) -> dict[str, Any]:
    body = openai_completion(tool_calls=[("call_g", "add", '{"a": 1}')])
    call = body["choices"][0]["message"]["tool_calls"][0]
    call["extra_content"] = {"google": {"thought_signature": signature}}
    return body


async def test_gemini_thought_signature_kept_and_sent_back(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gm-key")
    model = from_string("gemini:gemini-3-flash", base_url=server.openai_url, stream=False)
    assert isinstance(model, OpenAIChatModel) and model.provider == "gemini"
    server.script(Reply(json=_gemini_call("SIG-1")), Reply(json=openai_completion(text="done")))
    first = await ask(model, USER, tools=[])
    assert isinstance(first, ChatResponse)
    call = first.content[0]
    assert call["extra_content"] == {"google": {"thought_signature": "SIG-1"}}  # type: ignore[typeddict-item]
    history = [
        *USER,
        Msg("bot", first.content, "assistant"),
        Msg(
            "user", [{"type": "tool_result", "id": "call_g", "name": "add", "output": "1"}], "user"
        ),
    ]
    await ask(model, history)
    sent = server.requests[1].json["messages"][1]["tool_calls"][0]
    assert sent["extra_content"] == {"google": {"thought_signature": "SIG-1"}}
    assert server.requests[0].headers["authorization"] == "Bearer gm-key"
    await model.aclose()


async def test_gemini_thought_signature_in_a_stream(server: WireServer) -> None:
    events = openai_chunks(tool_calls=[("call_g", "add", '{"a": 1}')])
    head = json.loads(events[1][len(b"data: ") :])
    head["choices"][0]["delta"]["tool_calls"][0]["extra_content"] = {
        "google": {"thought_signature": "SIG-S"}
    }
    events[1] = f"data: {json.dumps(head)}\n\n".encode()
    server.script(Stream(events))
    model = OpenAIChatModel("g", api_key="k", base_url=server.openai_url, provider="gemini")
    chunks = [c async for c in await ask(model, USER)]  # type: ignore[union-attr]
    assert chunks[-1].content[0]["extra_content"] == {"google": {"thought_signature": "SIG-S"}}  # type: ignore[typeddict-item]
    await model.aclose()


# -- from_string ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "env", "base_url"),
    [
        ("gemini", "GEMINI_API_KEY", "https://generativelanguage.googleapis.com/v1beta/openai/"),
        ("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
        ("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
        ("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
        ("mistral", "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
        ("cerebras", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
        ("huggingface", "HF_TOKEN", "https://router.huggingface.co/v1"),
    ],
)
def test_from_string_hosted_compatible(
    provider: str, env: str, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "must-not-leak")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(AuthenticationError, match=env):
        from_string(f"{provider}:some-model")
    monkeypatch.setenv(env, f"{provider}-key")
    model = from_string(f"{provider}:some-model")
    assert isinstance(model, OpenAIChatModel)
    assert (model.base_url, model.api_key, model.provider) == (
        base_url,
        f"{provider}-key",
        provider,
    )
    assert from_string(f"{provider}:m", api_key="given").api_key == "given"  # type: ignore[attr-defined]


def test_from_string_gemini_google_api_key_and_local_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    assert from_string("gemini:m").api_key == "g-key"  # type: ignore[attr-defined]
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    assert from_string("ollama:q").base_url == "http://10.0.0.5:11434/v1"  # type: ignore[attr-defined]
    monkeypatch.setenv("GROQ_BASE_URL", "http://proxy/groq")
    monkeypatch.setenv("GROQ_API_KEY", "k")
    assert from_string("groq:m").base_url == "http://proxy/groq"  # type: ignore[attr-defined]


def test_from_string_adapters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    assert isinstance(from_string("openai-responses:o4-mini"), OpenAIResponsesModel)
    assert isinstance(from_string("anthropic:claude", api_key="a"), AnthropicChatModel)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", VERSION)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az")
    assert isinstance(from_string("azure-responses:dep"), AzureOpenAIResponsesModel)
    with pytest.raises(ValueError, match="unknown provider 'bedrok'"):
        from_string("bedrok:claude")


def test_provider_matrix_names_only_existing_tests() -> None:
    """Every cell of the docs' provider matrix names a test that exists."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    text = (root / "docs" / "models.md").read_text()
    matrix = text[text.index("### Provider matrix") :]
    named = 0
    for line in matrix.splitlines():
        if not line.startswith("| ") or line.startswith(("| Feature", "| ---")):
            continue
        module = None
        for match in re.finditer(r"`(?:(test_\w+)::)?:?(test_\w+)`|`::(test_\w+)`", line):
            file, test, tail = match.groups()
            module = file or module
            name = test or tail
            assert module is not None, line
            source = (root / "tests" / f"{module}.py").read_text()
            assert re.search(rf"def {name}\(", source), f"{module}::{name} named in the matrix"
            named += 1
    assert named >= 30


async def test_chat_usage_details_cached_and_reasoning_tokens(server: WireServer) -> None:
    body = openai_completion(text="ok", usage=(100, 40))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 64}
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 32}
    server.script(Reply(json=body), Reply(json=openai_completion(text="plain")))
    model = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False)
    first = await ask(model, USER)
    second = await ask(model, USER)
    await model.aclose()
    assert isinstance(first, ChatResponse) and first.usage is not None
    assert (first.usage.cache_read_tokens, first.usage.reasoning_tokens) == (64, 32)
    assert first.usage.to_dict() == {
        "input_tokens": 100,
        "output_tokens": 40,
        "time": first.usage.time,
        "cache_read_tokens": 64,
        "reasoning_tokens": 32,
    }
    assert isinstance(second, ChatResponse) and second.usage is not None
    assert set(second.usage.to_dict()) == {"input_tokens", "output_tokens", "time"}

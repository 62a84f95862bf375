"""``from_string``: build a model from a ``"provider:model"`` string.

Example:
    >>> from agentkit.models import from_string
    >>> model = from_string("ollama:qwen3")  # OpenAI-compatible server on localhost:11434
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agentkit.exceptions import AuthenticationError
from agentkit.models._base import ChatModel

__all__ = ["PROVIDERS", "from_string"]


@dataclass(frozen=True, slots=True)
class _Compatible:
    """An OpenAI-compatible provider: its endpoint and where its key comes from."""

    base_url: str | None
    key_env: tuple[str, ...] = ()  # tried in order; the provider's own SDK's variables
    default_key: str | None = None  # local servers that want any non-empty key
    base_env: str | None = None  # a variable overriding the base URL


_OPENAI_COMPATIBLE: dict[str, _Compatible] = {
    "openai": _Compatible(None),  # the SDK reads OPENAI_API_KEY / OPENAI_BASE_URL itself
    "gemini": _Compatible(
        "https://generativelanguage.googleapis.com/v1beta/openai/",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    ),
    "ollama": _Compatible("http://localhost:11434/v1", (), "ollama", "OLLAMA_HOST"),
    "vllm": _Compatible("http://localhost:8000/v1", ("VLLM_API_KEY",), "EMPTY"),
    "deepseek": _Compatible("https://api.deepseek.com", ("DEEPSEEK_API_KEY",)),
    "openrouter": _Compatible("https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",)),
    "groq": _Compatible("https://api.groq.com/openai/v1", ("GROQ_API_KEY",), None, "GROQ_BASE_URL"),
    "mistral": _Compatible("https://api.mistral.ai/v1", ("MISTRAL_API_KEY",)),
    "cerebras": _Compatible("https://api.cerebras.ai/v1", ("CEREBRAS_API_KEY",)),
    # Hugging Face's inference router (OpenAI-compatible): model ids like "org/model:provider".
    "huggingface": _Compatible("https://router.huggingface.co/v1", ("HF_TOKEN",)),
}
_OTHERS = (
    "openai-responses",
    "azure",
    "azure-responses",
    "anthropic",
    "bedrock",
    "bedrock-anthropic",
    "vertex",
    "google",
    "google-vertex",
)

PROVIDERS = (*_OTHERS, *_OPENAI_COMPATIBLE)
"""The provider prefixes ``from_string`` knows."""


def _ollama_url(host: str) -> str:
    """``OLLAMA_HOST`` (``host:port`` or a URL, as the ollama CLI takes it) -> its /v1 URL."""
    if "://" not in host:
        host = f"http://{host}"
    return host.rstrip("/") + "/v1"


def _compatible(provider: str, name: str, kwargs: dict[str, Any]) -> ChatModel:
    from agentkit.models._openai import OpenAIChatModel

    spec = _OPENAI_COMPATIBLE[provider]
    base_url = spec.base_url
    if spec.base_env and os.environ.get(spec.base_env):
        value = os.environ[spec.base_env]
        base_url = _ollama_url(value) if provider == "ollama" else value
    if base_url is not None:
        kwargs.setdefault("base_url", base_url)
    if "api_key" not in kwargs and (spec.key_env or spec.default_key):
        key = next((os.environ[e] for e in spec.key_env if os.environ.get(e)), None)
        if not (key or spec.default_key):
            # Never fall back to OPENAI_API_KEY: it must not be sent to another provider.
            names = " or ".join(spec.key_env)
            raise AuthenticationError(
                f"{provider}: no API key: set {names} or pass api_key=", provider=provider
            )
        kwargs["api_key"] = key or spec.default_key
    if provider == "deepseek":
        kwargs.setdefault("reasoning_content", True)
    if provider != "openai":
        kwargs.setdefault("provider", provider)
    return OpenAIChatModel(name, **kwargs)


def _other(provider: str, name: str, kwargs: dict[str, Any]) -> ChatModel:
    if provider in ("google", "google-vertex"):
        from agentkit.models._google import GoogleModel

        if provider == "google-vertex":
            kwargs.setdefault("vertexai", True)
        return GoogleModel(name, **kwargs)
    if provider == "anthropic":
        from agentkit.models._anthropic import AnthropicChatModel

        return AnthropicChatModel(name, **kwargs)
    if provider == "bedrock":
        from agentkit.models._bedrock_converse import BedrockConverseModel

        return BedrockConverseModel(name, **kwargs)
    if provider == "bedrock-anthropic":
        from agentkit.models._bedrock import AnthropicBedrockModel

        return AnthropicBedrockModel(name, **kwargs)
    if provider == "vertex":
        from agentkit.models._vertex import AnthropicVertexModel

        return AnthropicVertexModel(name, **kwargs)
    if provider == "openai-responses":
        from agentkit.models._openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, **kwargs)
    from agentkit.models._azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel

    if provider == "azure":
        return AzureOpenAIChatModel(name, **kwargs)
    return AzureOpenAIResponsesModel(name, **kwargs)


def from_string(spec: str, **kwargs: Any) -> ChatModel:
    """Build a model from ``"provider:model_name"``.

    Providers, with the environment variables each provider's own SDK uses:

    - ``openai`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) and ``openai-responses`` (the
      Responses API, same variables); a bare model name means ``openai``.
    - ``azure`` / ``azure-responses``: the model name is the deployment
      (``AZURE_OPENAI_ENDPOINT``, ``OPENAI_API_VERSION``, ``AZURE_OPENAI_API_KEY`` or
      ``AZURE_OPENAI_AD_TOKEN``).
    - ``anthropic`` (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``); ``vertex``: Claude on
      Vertex AI (``CLOUD_ML_REGION``, ``ANTHROPIC_VERTEX_PROJECT_ID``, Google Application
      Default Credentials through ``google-auth``, the ``agentkit[vertex]`` extra);
      ``bedrock``: any Amazon Bedrock model (Llama, Mistral, Nova, Cohere, Claude...)
      through the Converse API on ``aiobotocore`` (``AWS_REGION``, AWS credentials, the
      ``agentkit[bedrock]`` extra); ``bedrock-anthropic``: Claude on Bedrock through the
      Anthropic SDK's Messages API (AWS credentials or ``AWS_BEARER_TOKEN_BEDROCK``).
    - ``google``: Gemini's native API through ``google-genai`` (``GEMINI_API_KEY`` or
      ``GOOGLE_API_KEY``, the ``agentkit[google]`` extra); ``google-vertex``: Gemini on
      Vertex AI (``GOOGLE_CLOUD_PROJECT``, ``GOOGLE_CLOUD_LOCATION``, Application Default
      Credentials).
    - OpenAI-compatible endpoints: ``gemini`` (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``),
      ``ollama`` (``OLLAMA_HOST``, default ``localhost:11434``), ``vllm``
      (``http://localhost:8000/v1``, ``VLLM_API_KEY`` or ``"EMPTY"``), ``deepseek``
      (``DEEPSEEK_API_KEY``; thinking is sent back as ``reasoning_content``), ``openrouter``
      (``OPENROUTER_API_KEY``), ``groq`` (``GROQ_API_KEY``, ``GROQ_BASE_URL``) and
      ``mistral`` (``MISTRAL_API_KEY``).

    Args:
        spec: ``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``, ``"ollama:qwen3"``...
        **kwargs: Passed to the model class (``stream``, ``api_key``, ``base_url``...).

    Returns:
        The model.

    Raises:
        ValueError: on an unknown provider or an empty model name.
        AuthenticationError: a hosted OpenAI-compatible provider without its API key (the
            message names the variable); the other adapters report missing credentials
            on their first call.
        MissingDependencyError: ``bedrock:`` without ``aiobotocore``,
            ``bedrock-anthropic:`` / ``vertex:`` without the package their
            default credentials need, ``google:`` without ``google-genai`` (the message
            names the extra).
    """
    provider, sep, name = spec.partition(":")
    if not sep:
        provider, name = "openai", spec
    provider = provider.strip().lower()
    name = name.strip()
    if not name:
        raise ValueError(f"no model name in {spec!r}; expected 'provider:model'")
    if provider in _OPENAI_COMPATIBLE:
        return _compatible(provider, name, kwargs)
    if provider in _OTHERS:
        return _other(provider, name, kwargs)
    raise ValueError(f"unknown provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}")

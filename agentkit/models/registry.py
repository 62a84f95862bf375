"""``from_string``: build a model from a ``"provider:model"`` string.

Example:
    >>> from agentkit.models import from_string
    >>> model = from_string("ollama:qwen3")  # OpenAI-compatible server on localhost:11434
"""

from __future__ import annotations

import os
from typing import Any

from agentkit.models.base import ChatModel

__all__ = ["PROVIDERS", "from_string"]

# provider -> (default base URL, API key environment variable, default API key)
_OPENAI_COMPATIBLE: dict[str, tuple[str | None, str | None, str | None]] = {
    "openai": (None, None, None),  # the SDK reads OPENAI_API_KEY / OPENAI_BASE_URL itself
    "ollama": ("http://localhost:11434/v1", None, "ollama"),
    "vllm": ("http://localhost:8000/v1", "VLLM_API_KEY", "EMPTY"),
    "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY", None),
}

PROVIDERS = ("anthropic", *_OPENAI_COMPATIBLE)
"""The provider prefixes ``from_string`` knows."""


def from_string(spec: str, **kwargs: Any) -> ChatModel:
    """Build a model from ``"provider:model_name"``.

    Providers: ``openai`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``), ``anthropic``
    (``ANTHROPIC_API_KEY``), ``ollama`` (``http://localhost:11434/v1``), ``vllm``
    (``http://localhost:8000/v1``, ``VLLM_API_KEY`` or ``"EMPTY"``) and ``deepseek``
    (``DEEPSEEK_API_KEY``; thinking is sent back as ``reasoning_content``). A bare model name
    means ``openai``.

    Args:
        spec: ``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``, ``"ollama:qwen3"``...
        **kwargs: Passed to the model class (``stream``, ``api_key``, ``base_url``...).

    Returns:
        An ``OpenAIChatModel`` or ``AnthropicChatModel``.

    Raises:
        ValueError: on an unknown provider or an empty model name.
    """
    provider, sep, name = spec.partition(":")
    if not sep:
        provider, name = "openai", spec
    provider = provider.strip().lower()
    name = name.strip()
    if not name:
        raise ValueError(f"no model name in {spec!r}; expected 'provider:model'")
    if provider == "anthropic":
        from agentkit.models.anthropic import AnthropicChatModel

        return AnthropicChatModel(name, **kwargs)
    if provider not in _OPENAI_COMPATIBLE:
        raise ValueError(
            f"unknown provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}"
        )
    from agentkit.models.openai import OpenAIChatModel

    base_url, key_env, default_key = _OPENAI_COMPATIBLE[provider]
    if base_url is not None:
        kwargs.setdefault("base_url", base_url)
    if "api_key" not in kwargs and (key_env or default_key):
        key = os.environ.get(key_env) if key_env else None
        if key or default_key:
            kwargs["api_key"] = key or default_key
    if provider == "deepseek":
        kwargs.setdefault("reasoning_content", True)
    if provider != "openai":
        kwargs.setdefault("provider", provider)
    return OpenAIChatModel(name, **kwargs)

"""Model adapters behind one ``ChatModel`` interface.

Provider adapters are imported lazily (``from agentkit.models import OpenAIChatModel`` is
cheap until the class is first used), so ``import agentkit`` never imports the provider SDKs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentkit.models.base import (
    AudioOutput,
    ChatModel,
    ChatResponse,
    ChatUsage,
    ModelOutput,
    ModelSettings,
    ToolChoice,
    ToolDefinition,
)

if TYPE_CHECKING:
    from agentkit.models._http import RetryPolicy
    from agentkit.models.anthropic import AnthropicChatModel
    from agentkit.models.azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
    from agentkit.models.bedrock import AnthropicBedrockModel
    from agentkit.models.fallback import FallbackModel
    from agentkit.models.openai import OpenAIChatModel
    from agentkit.models.openai_responses import OpenAIResponsesModel
    from agentkit.models.registry import from_string
    from agentkit.models.vertex import AnthropicVertexModel

__all__ = [
    "AnthropicBedrockModel",
    "AnthropicChatModel",
    "AnthropicVertexModel",
    "AudioOutput",
    "AzureOpenAIChatModel",
    "AzureOpenAIResponsesModel",
    "ChatModel",
    "ChatResponse",
    "ChatUsage",
    "FallbackModel",
    "ModelOutput",
    "ModelSettings",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "RetryPolicy",
    "ToolChoice",
    "ToolDefinition",
    "from_string",
]

_LAZY = {
    "OpenAIChatModel": "agentkit.models.openai",
    "AnthropicChatModel": "agentkit.models.anthropic",
    "OpenAIResponsesModel": "agentkit.models.openai_responses",
    "AzureOpenAIChatModel": "agentkit.models.azure",
    "AnthropicVertexModel": "agentkit.models.vertex",
    "AnthropicBedrockModel": "agentkit.models.bedrock",
    "AzureOpenAIResponsesModel": "agentkit.models.azure",
    "FallbackModel": "agentkit.models.fallback",
    "RetryPolicy": "agentkit.models._http",
    "from_string": "agentkit.models.registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkit.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

"""Model adapters behind one ``ChatModel`` interface.

Provider adapters are imported lazily (``from agentkit.models import OpenAIChatModel`` is
cheap until the class is first used), so ``import agentkit`` never imports the provider SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.models._base import (
    AudioOutput,
    CachePoint,
    ChatModel,
    ChatResponse,
    ChatUsage,
    DeferredTools,
    ModelRequest,
    ModelSettings,
    OutputSpec,
    PromptCache,
    ToolChoice,
    ToolDefinition,
)

__all__ = [
    "AnthropicBedrockModel",
    "AnthropicChatModel",
    "AnthropicVertexModel",
    "AudioOutput",
    "AzureOpenAIChatModel",
    "AzureOpenAIResponsesModel",
    "BedrockConverseModel",
    "CachePoint",
    "ChatModel",
    "ChatResponse",
    "ChatUsage",
    "DeferredTools",
    "FallbackModel",
    "GoogleModel",
    "ModelPrice",
    "ModelRequest",
    "ModelSettings",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "OutputSpec",
    "PromptCache",
    "RetryPolicy",
    "ToolChoice",
    "ToolDefinition",
    "clear_prices",
    "from_string",
    "preload",
    "set_price",
]

if TYPE_CHECKING:
    from agentkit.models._anthropic import AnthropicChatModel
    from agentkit.models._azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
    from agentkit.models._bedrock import AnthropicBedrockModel
    from agentkit.models._bedrock_converse import BedrockConverseModel
    from agentkit.models._fallback import FallbackModel
    from agentkit.models._google import GoogleModel
    from agentkit.models._http import RetryPolicy
    from agentkit.models._openai import OpenAIChatModel
    from agentkit.models._openai_responses import OpenAIResponsesModel
    from agentkit.models._prices import ModelPrice, clear_prices, preload, set_price
    from agentkit.models._registry import from_string
    from agentkit.models._vertex import AnthropicVertexModel
else:
    from agentkit._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        __all__,
        {
            "OpenAIChatModel": "._openai",
            "AnthropicChatModel": "._anthropic",
            "OpenAIResponsesModel": "._openai_responses",
            "AzureOpenAIChatModel": "._azure",
            "AnthropicVertexModel": "._vertex",
            "AnthropicBedrockModel": "._bedrock",
            "BedrockConverseModel": "._bedrock_converse",
            "AzureOpenAIResponsesModel": "._azure",
            "FallbackModel": "._fallback",
            "GoogleModel": "._google",
            "RetryPolicy": "._http",
            "from_string": "._registry",
            "ModelPrice": "._prices",
            "clear_prices": "._prices",
            "preload": "._prices",
            "set_price": "._prices",
        },
    )

"""Model adapters behind one ``ChatModel`` interface.

Provider adapters are imported lazily (``from agentkit.models import OpenAIChatModel`` is
cheap until the class is first used), so ``import agentkit`` never imports the provider SDKs.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentkit.models.base import ChatModel, ChatResponse, ChatUsage, ModelOutput, ToolChoice

__all__ = [
    "ChatModel",
    "ChatResponse",
    "ChatUsage",
    "ModelOutput",
    "ToolChoice",
]

_LAZY = {
    "OpenAIChatModel": "agentkit.models.openai",
    "AnthropicChatModel": "agentkit.models.anthropic",
    "from_string": "agentkit.models.registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkit.models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

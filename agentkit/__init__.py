"""agentkit: a small, fast, strictly typed asyncio framework for tool-using LLM agents.

The public API is re-exported here; everything else is internal. Provider SDKs and the MCP
SDK are imported lazily, so ``import agentkit`` stays cheap.
"""

from agentkit.exceptions import AgentkitError
from agentkit.messages import (
    AudioBlock,
    ContentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentkit.tools import Tool, ToolResponse

__version__ = "0.1.0.dev0"

__all__ = [
    "AgentkitError",
    "AudioBlock",
    "ContentBlock",
    "ImageBlock",
    "Msg",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolResponse",
    "ToolResultBlock",
    "ToolUseBlock",
    "__version__",
]

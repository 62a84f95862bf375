"""agentkit: a small, fast, strictly typed asyncio framework for tool-using LLM agents.

The public API is re-exported here; everything else is internal. Provider SDKs, the MCP SDK,
jsonschema and pydantic-heavy modules are imported lazily, so ``import agentkit`` stays cheap.
"""

import logging as _logging

from agentkit.agent import (
    AgentEvent,
    ApprovalRequired,
    Interrupted,
    ReActAgent,
    ReplyFinished,
    ReplyStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)
from agentkit.agent.user import UserAgent
from agentkit.exceptions import AgentkitError
from agentkit.memory import InMemoryMemory, check_memory_invariant
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
from agentkit.pipelines import (
    AgentTool,
    MsgHub,
    agent_as_tool,
    fanout_pipeline,
    sequential_pipeline,
)
from agentkit.tools import Tool, ToolContext, ToolGroup, Toolkit, ToolResponse

__version__ = "0.1.0.dev0"

# A library never prints on its own: without this, Python's last-resort handler would write
# every agentkit WARNING to stderr of an application that did not configure logging.
_logging.getLogger("agentkit").addHandler(_logging.NullHandler())

__all__ = [
    "AgentEvent",
    "AgentTool",
    "AgentkitError",
    "ApprovalRequired",
    "AudioBlock",
    "ContentBlock",
    "ImageBlock",
    "InMemoryMemory",
    "Interrupted",
    "Msg",
    "MsgHub",
    "ReActAgent",
    "ReplyFinished",
    "ReplyStarted",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "Tool",
    "ToolCallStarted",
    "ToolContext",
    "ToolGroup",
    "ToolProgress",
    "ToolResponse",
    "ToolResult",
    "ToolResultBlock",
    "ToolUseBlock",
    "Toolkit",
    "UserAgent",
    "__version__",
    "agent_as_tool",
    "check_memory_invariant",
    "fanout_pipeline",
    "sequential_pipeline",
]

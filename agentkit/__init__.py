"""agentkit: a small, fast, strictly typed asyncio framework for tool-using LLM agents.

One import line is enough for a first agent::

    from agentkit import ReActAgent, Toolkit, ToolContext, RunResult, from_string

The public API is re-exported here; everything else is internal. Provider SDKs, the MCP SDK,
jsonschema and pydantic-heavy modules are imported lazily, so ``import agentkit`` stays cheap:
the MCP names (``StdioServer``, ``HttpServer``, ``MCPClient``...) and ``from_string`` load
their modules on first use. Event classes live in ``agentkit.events``.
"""

import logging as _logging
from typing import TYPE_CHECKING

from agentkit._console import interrupt_on_sigint
from agentkit._version import __version__
from agentkit.agent import (
    Capability,
    Decision,
    GuardrailResult,
    GuardrailTripped,
    Handoff,
    InputGuardrail,
    ModelRequest,
    OutputGuardrail,
    PendingCall,
    PromptCaching,
    ReActAgent,
    RunContext,
    RunResult,
    RunUsage,
    StopReason,
    ToolGuardrail,
    ToolSearch,
    UsageLimits,
    handoff,
    input_guardrail,
    output_guardrail,
    tool_guardrail,
)
from agentkit.agent._structured import NativeOutput, PromptedOutput, ToolOutput
from agentkit.agent._user import UserAgent
from agentkit.exceptions import (
    AgentkitError,
    ApprovalRequired,
    ToolRetry,
    UsageError,
    UsageLimitExceeded,
)
from agentkit.memory import InMemoryMemory, check_memory_invariant
from agentkit.messages import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
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

# A library never prints on its own: without this, Python's last-resort handler would write
# every agentkit WARNING to stderr of an application that did not configure logging.
_logging.getLogger("agentkit").addHandler(_logging.NullHandler())

__all__ = [
    "AgentTool",
    "AgentkitError",
    "ApprovalRequired",
    "AudioBlock",
    "Capability",
    "ContentBlock",
    "Decision",
    "DocumentBlock",
    "GuardrailResult",
    "GuardrailTripped",
    "Handoff",
    "HttpServer",
    "ImageBlock",
    "InMemoryMemory",
    "InputGuardrail",
    "MCPClient",
    "ModelRequest",
    "Msg",
    "MsgHub",
    "NativeOutput",
    "OutputGuardrail",
    "PendingCall",
    "PromptCaching",
    "PromptedOutput",
    "ReActAgent",
    "RunContext",
    "RunResult",
    "RunUsage",
    "StdioServer",
    "StopReason",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolContext",
    "ToolGroup",
    "ToolGuardrail",
    "ToolOutput",
    "ToolResponse",
    "ToolResultBlock",
    "ToolRetry",
    "ToolSearch",
    "ToolUseBlock",
    "Toolkit",
    "UsageError",
    "UsageLimitExceeded",
    "UsageLimits",
    "UserAgent",
    "__version__",
    "agent_as_tool",
    "check_memory_invariant",
    "fanout_pipeline",
    "from_string",
    "handoff",
    "input_guardrail",
    "interrupt_on_sigint",
    "output_guardrail",
    "register_mcp_client",
    "sequential_pipeline",
    "tool_guardrail",
]

# Loaded on first use (the MCP SDK and the model registry are not needed by every program).
if TYPE_CHECKING:
    from agentkit.mcp import HttpServer, MCPClient, StdioServer, register_mcp_client
    from agentkit.models._registry import from_string
else:
    from agentkit._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        __all__,
        {
            "HttpServer": "agentkit.mcp",
            "MCPClient": "agentkit.mcp",
            "StdioServer": "agentkit.mcp",
            "register_mcp_client": "agentkit.mcp",
            "from_string": "agentkit.models._registry",
        },
    )

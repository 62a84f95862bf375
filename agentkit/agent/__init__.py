"""The ReAct agent: loop, hooks, interrupt/resume, approval, state, typed runs.

The event classes live in ``agentkit.events``.
"""

from agentkit.agent._capabilities import Capability
from agentkit.agent._compaction import CompactionStrategy, Compactor, DropOldest, Summarize
from agentkit.agent._conversation import Decision
from agentkit.agent._guardrails import (
    GuardrailResult,
    GuardrailTripped,
    InputGuardrail,
    OutputGuardrail,
    ToolGuardrail,
    input_guardrail,
    output_guardrail,
    tool_guardrail,
)
from agentkit.agent._handoffs import Handoff, handoff
from agentkit.agent._limits import UsageLimits
from agentkit.agent._prompt_caching import PromptCaching
from agentkit.agent._react import ApprovalPolicy, ReActAgent
from agentkit.agent._result import PendingCall, RunResult, RunUsage, StopReason
from agentkit.agent._stream import EventStream
from agentkit.agent._structured import NativeOutput, PromptedOutput, ToolOutput
from agentkit.agent._tool_search import ToolSearch
from agentkit.models._base import ModelRequest
from agentkit.tools._context import RunContext

__all__ = [
    "ApprovalPolicy",
    "Capability",
    "CompactionStrategy",
    "Compactor",
    "Decision",
    "DropOldest",
    "EventStream",
    "GuardrailResult",
    "GuardrailTripped",
    "Handoff",
    "InputGuardrail",
    "ModelRequest",
    "NativeOutput",
    "OutputGuardrail",
    "PendingCall",
    "PromptCaching",
    "PromptedOutput",
    "ReActAgent",
    "RunContext",
    "RunResult",
    "RunUsage",
    "StopReason",
    "Summarize",
    "ToolGuardrail",
    "ToolOutput",
    "ToolSearch",
    "UsageLimits",
    "handoff",
    "input_guardrail",
    "output_guardrail",
    "tool_guardrail",
]

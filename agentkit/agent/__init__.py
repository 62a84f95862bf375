"""The ReAct agent: loop, events, hooks, interrupt/resume, approval, state."""

from agentkit.agent.events import (
    AgentEvent,
    ApprovalRequired,
    Interrupted,
    ReplyFinished,
    ReplyStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)
from agentkit.agent.react import ApprovalPolicy, ReActAgent
from agentkit.agent.stream import EventStream

__all__ = [
    "AgentEvent",
    "ApprovalPolicy",
    "ApprovalRequired",
    "EventStream",
    "Interrupted",
    "ReActAgent",
    "ReplyFinished",
    "ReplyStarted",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallStarted",
    "ToolProgress",
    "ToolResult",
]

"""The ReAct agent: loop, hooks, interrupt/resume, approval, state, typed runs.

The event classes live in ``agentkit.events``.
"""

from agentkit.agent._compaction import CompactionStrategy, Compactor, DropOldest, Summarize
from agentkit.agent._conversation import Decision
from agentkit.agent._hooks import AgentHooks
from agentkit.agent._limits import UsageLimits
from agentkit.agent._react import ApprovalPolicy, ReActAgent
from agentkit.agent._result import PendingCall, RunResult, RunUsage, StopReason
from agentkit.agent._stream import EventStream

__all__ = [
    "AgentHooks",
    "ApprovalPolicy",
    "CompactionStrategy",
    "Compactor",
    "Decision",
    "DropOldest",
    "EventStream",
    "PendingCall",
    "ReActAgent",
    "RunResult",
    "RunUsage",
    "StopReason",
    "Summarize",
    "UsageLimits",
]

"""The ReAct agent: loop, hooks, interrupt/resume, approval, state, typed runs.

The event classes live in ``agentkit.events``; importing them from here still works, with a
``DeprecationWarning``.
"""

from typing import Any

from agentkit.agent.hooks import AgentHooks
from agentkit.agent.limits import UsageLimits
from agentkit.agent.react import ApprovalPolicy, ReActAgent
from agentkit.agent.result import PendingCall, RunResult, RunUsage, StopReason
from agentkit.agent.stream import EventStream

__all__ = [
    "AgentHooks",
    "ApprovalPolicy",
    "EventStream",
    "PendingCall",
    "ReActAgent",
    "RunResult",
    "RunUsage",
    "StopReason",
    "UsageLimits",
]


def __getattr__(name: str) -> Any:
    from agentkit.agent.events import deprecated_event

    return deprecated_event(__name__, name)

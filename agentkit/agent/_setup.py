"""``RunSetup``: what the loop steps need that does not change during a run.

The agent builds one when a run starts (its model, toolkit, capabilities, limits, the
run's ``RunContext``), and every step receives it. Together with the ``Conversation``
(memory and pending calls) and the ``Run`` (the current step's scratch state), it is all a
step can touch, so steps can be run and tested without a ``ReActAgent``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from agentkit.agent._capabilities import NO_CAPABILITIES, Capabilities
from agentkit.messages import Msg, ToolUseBlock
from agentkit.tools._context import RunContext

if TYPE_CHECKING:
    import anyio

    from agentkit.agent._limits import UsageLimits
    from agentkit.agent._validators import OutputValidator
    from agentkit.models._base import ChatModel
    from agentkit.tools import Toolkit

__all__ = ["ApprovalPolicy", "RunSetup"]

ApprovalPolicy: TypeAlias = Callable[[ToolUseBlock], "bool | Awaitable[bool]"]

_NO_RUN: RunContext[None] = RunContext(deps=None)  # steps run without an agent (tests)


@dataclass(frozen=True, slots=True)
class RunSetup:
    """The frozen dependencies of one run.

    Attributes:
        name: The agent's name (author of the messages it stores).
        model: The chat model.
        system: Returns the system message (rebuilt when the prompt changes).
        toolkit: The tools (None: no tools).
        owner: Passed to tools as ``ToolContext.data`` / ``ctx.agent`` (the agent).
        limiter: Bounds the tool calls in flight (None: unbounded).
        limits: The run's usage limits (None: unbounded).
        context: What the run's participants see (deps, run id, usage...); tools get it
            plus their call as ``ToolContext``.
        capabilities: The run's capabilities (``for_run`` already applied), the agent's
            reasoning and acting string hooks first among them.
        max_iters: Model calls per task before the agent must summarize.
        parallel_tool_calls: Run the calls of one turn concurrently.
        approval_policy: Decides calls to tools registered with ``requires_approval``.
        max_tool_retries: ``ToolRetry`` answers allowed per tool and run.
        output_validators: The agent's ``@output_validator`` functions, in order.
    """

    name: str
    model: ChatModel
    system: Callable[[], Msg]
    toolkit: Toolkit | None = None
    owner: object = None
    limiter: anyio.CapacityLimiter | None = None
    limits: UsageLimits | None = None
    context: RunContext[Any] = _NO_RUN
    capabilities: Capabilities[Any] = NO_CAPABILITIES
    max_iters: int = 10
    parallel_tool_calls: bool = True
    approval_policy: ApprovalPolicy | None = None
    max_tool_retries: int = 2
    output_validators: tuple[OutputValidator, ...] = ()

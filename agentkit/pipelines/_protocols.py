"""What pipelines need from an agent: small structural protocols, no base class.

``ReActAgent`` and ``UserAgent`` satisfy them, and so does any user class with the same
methods, so pipelines never import the agent implementation.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from agentkit.messages import Msg, MsgInput

if TYPE_CHECKING:
    from agentkit.events import AgentEvent

__all__ = [
    "AgentLike",
    "EventStreamLike",
    "HubParticipant",
    "InterruptibleAgent",
    "ResumableAgent",
    "StreamingAgent",
    "accepts_deps",
    "can_resume",
    "deps_kwargs",
]


class AgentLike(Protocol):
    """Anything that replies to a message: ``reply = await agent(msg)``."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    async def __call__(self, msg: MsgInput = None) -> Msg:
        """Reply to ``msg`` (None: continue from memory)."""
        ...


class HubParticipant(AgentLike, Protocol):
    """An agent that can sit in a ``MsgHub``: it observes and has ``post_reply`` hooks."""

    async def observe(self, msg: Msg | list[Msg] | None) -> None:
        """Take in messages without replying."""
        ...

    def register_hook(self, kind: str, name: str, fn: Callable[..., object]) -> None:
        """Register a hook of ``kind`` under ``name``."""
        ...

    def remove_hook(self, kind: str, name: str) -> None:
        """Remove the hook ``name`` of ``kind``."""
        ...


class InterruptibleAgent(AgentLike, Protocol):
    """An agent whose running reply can be interrupted from another task."""

    async def interrupt(self, msg: Msg | None = None) -> object:
        """Interrupt the reply in progress."""
        ...


class StreamingAgent(InterruptibleAgent, Protocol):
    """An agent that streams events (``agentkit.events``) while it replies."""

    def stream(self, msg: MsgInput = None) -> EventStreamLike:
        """Reply to ``msg``; an async context manager iterating events (``ReplyFinished`` last)."""
        ...


class ResumableAgent(InterruptibleAgent, Protocol):
    """An agent whose run can pause for approval and resume from its saved state.

    ``ReActAgent`` is one. ``AgentTool`` needs these to surface the calls waiting inside
    such an agent in the outer run (nested approvals) and to route the decisions back.
    """

    @property
    def pending_tool_calls(self) -> Sequence[Mapping[str, object]]:
        """Calls waiting for approval (``{"id", "name", "input"}``)."""
        ...

    def state_dict(self) -> dict[str, object]:
        """A JSON-safe snapshot of the agent's conversation."""
        ...

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore a snapshot from :meth:`state_dict`."""
        ...

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """Resume a run paused for approval (``run(approvals=...)``); a ``RunResult``."""
        ...

    async def interrupt_pending(self, msg: MsgInput = None) -> Any:
        """End a run paused for approval as interrupted (its calls never run)."""
        ...


class EventStreamLike(Protocol):
    """What ``agent.stream()`` returns: ``async with agent.stream(m) as events: async for ...``.

    Leaving the ``async with`` block early interrupts the reply.
    """

    async def __aenter__(self) -> AsyncIterator[AgentEvent]:
        """Start the reply; return the event iterator."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Interrupt the reply if it still runs; wait until it has ended."""
        ...


def accepts_deps(agent: object) -> bool:
    """Whether ``agent``'s reply accepts ``deps=`` (a ``ReActAgent``'s does).

    Pipelines hand a run's dependencies on only to agents that take them, so a plain
    ``AgentLike`` (a ``UserAgent``, a user's class) keeps working unchanged.
    """
    if not callable(agent):
        return False
    try:
        return "deps" in inspect.signature(agent).parameters
    except (TypeError, ValueError):
        return False


def deps_kwargs(agent: object, deps: object) -> dict[str, object]:
    """``{"deps": deps}`` for an agent that takes them and deps that were given, else ``{}``."""
    return {"deps": deps} if deps is not None and accepts_deps(agent) else {}


def can_resume(agent: object) -> TypeGuard[ResumableAgent]:
    """Whether ``agent`` pauses for approval in a way ``AgentTool`` can resume."""
    return all(
        callable(getattr(agent, name, None))
        for name in ("state_dict", "load_state_dict", "run", "interrupt_pending")
    ) and hasattr(agent, "pending_tool_calls")

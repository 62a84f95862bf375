"""The seams the agent loop calls: no-ops until :func:`agentkit.observability.instrument`.

The loop opens ``with run_span(...)``, ``with model_span(...)`` and ``with tool_span(...)``
around a reply, a model request and a tool call, and reports a few events (an approval
asked for, a call denied). Without instrumentation every seam returns one shared
``nullcontext`` or does nothing: no OpenTelemetry import, no allocation, one global read.
``instrument()`` installs an :class:`Instrumentation` that does the real work.

This module imports nothing beyond the standard library, so importing it is free, and it
sits below every package that calls it (models, tools, mcp, agent): the loop's objects are
passed as ``object`` and the installed instrumentation (``agentkit.observability``, which may
import the agent) reads them with their real types.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from agentkit.messages import Msg, ToolUseBlock

__all__ = [
    "Instrumentation",
    "approval_required",
    "compacted",
    "conversation",
    "current_conversation",
    "fallback_attempt",
    "install",
    "installed",
    "model_span",
    "run_span",
    "server_tool_span",
    "tool_denied",
    "tool_span",
]

# A value an instrumentation event may carry (OpenTelemetry attribute values).
EventValue: TypeAlias = str | bool | int | float

_NULL: AbstractContextManager[None] = nullcontext()
_conversation: ContextVar[str | None] = ContextVar("agentkit_conversation", default=None)


class Instrumentation:
    """What an installed instrumentation implements; every method here is a no-op.

    The arguments are the loop's own objects (agent, run state, call block), read only
    (an implementation must never change them).
    """

    def run_span(self, agent: object, run: object) -> AbstractContextManager[None]:
        """Wrap one reply (``await agent(...)`` or ``agent.resume(...)``)."""
        return _NULL

    def model_span(
        self,
        agent: object,
        run: object,
        messages: Sequence[Msg],
        tools: Sequence[object] | None,
    ) -> AbstractContextManager[None]:
        """Wrap one model request; its answer is in ``run.turn.partial`` on exit."""
        return _NULL

    def tool_span(
        self, agent: object, run: object, index: int, toolkit: object = None
    ) -> AbstractContextManager[None]:
        """Wrap tool call ``run.batch[index]``; its result is in ``run.calls.results[index]``."""
        return _NULL

    def server_tool_span(
        self, name: str, call_id: str, meta: Mapping[str, object] | None
    ) -> AbstractContextManager[None]:
        """Wrap a call served by agentkit's MCP server (``meta``: the request's ``_meta``)."""
        return _NULL

    def event(self, name: str, attributes: Mapping[str, EventValue]) -> None:
        """Record an event on the current span."""


_active: Instrumentation | None = None


def install(instrumentation: Instrumentation | None) -> None:
    """Make ``instrumentation`` the active one (None: back to no-ops)."""
    global _active
    _active = instrumentation


def installed() -> Instrumentation | None:
    """The active instrumentation, if any."""
    return _active


def run_span(agent: object, run: object) -> AbstractContextManager[None]:
    """The ``invoke_agent`` span of one reply (a no-op unless instrumented)."""
    active = _active
    return _NULL if active is None else active.run_span(agent, run)


def model_span(
    agent: object,
    run: object,
    messages: Sequence[Msg],
    tools: Sequence[object] | None,
) -> AbstractContextManager[None]:
    """The ``chat`` span of one model request (a no-op unless instrumented)."""
    active = _active
    return _NULL if active is None else active.model_span(agent, run, messages, tools)


def tool_span(
    agent: object, run: object, index: int, toolkit: object = None
) -> AbstractContextManager[None]:
    """The ``execute_tool`` span of one tool call (a no-op unless instrumented).

    ``toolkit`` is the agent's toolkit (None: no tools), where the tool's description and
    MCP server are found.
    """
    active = _active
    return _NULL if active is None else active.tool_span(agent, run, index, toolkit)


def server_tool_span(
    name: str, call_id: str, meta: Mapping[str, object] | None
) -> AbstractContextManager[None]:
    """The span of a tool call served over MCP, continuing the caller's trace."""
    active = _active
    return _NULL if active is None else active.server_tool_span(name, call_id, meta)


def approval_required(calls: Sequence[Mapping[str, Any]]) -> None:
    """Calls set aside for a human's approval (``{"id", "name", "input"}`` dicts)."""
    if _active is not None:
        for call in calls:
            _active.event(
                "agentkit.approval.required",
                {"gen_ai.tool.name": call["name"], "gen_ai.tool.call.id": call["id"]},
            )


def tool_denied(call: ToolUseBlock, reason: bool | str) -> None:
    """A call the user denied (``reason``: False, or the user's words)."""
    if _active is not None:
        attributes = {"gen_ai.tool.name": call["name"], "gen_ai.tool.call.id": call["id"]}
        if isinstance(reason, str) and reason:
            attributes["agentkit.denied.reason"] = reason
        _active.event("agentkit.tool.denied", attributes)


def fallback_attempt(model_name: str, error: BaseException) -> None:
    """A model of a ``FallbackModel`` failed; the next one is tried."""
    if _active is not None:
        _active.event(
            "agentkit.fallback",
            {"gen_ai.request.model": model_name, "error.type": type(error).__qualname__},
        )


def compacted(left_out: int, kept: int, summarized: bool) -> None:
    """A request view was compacted: ``left_out`` history messages are no longer sent."""
    if _active is not None:
        _active.event(
            "agentkit.compaction",
            {
                "agentkit.compaction.left_out": left_out,
                "agentkit.compaction.kept": kept,
                "agentkit.compaction.summarized": summarized,
            },
        )


@contextlib.contextmanager
def conversation(conversation_id: str) -> Iterator[None]:
    """Tag the replies run inside this block with ``gen_ai.conversation.id``.

    Example:
        >>> with conversation("thread-42"):  # doctest: +SKIP
        ...     await agent("hello")
    """
    token = _conversation.set(conversation_id)
    try:
        yield
    finally:
        _conversation.reset(token)


def current_conversation() -> str | None:
    """The conversation id set by the innermost :func:`conversation` block."""
    return _conversation.get()

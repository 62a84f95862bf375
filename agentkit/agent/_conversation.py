"""The conversation: what an agent keeps between runs, and what ``state_dict()`` saves.

``Conversation`` holds memory plus the few things that outlive a run: tool calls waiting
for approval, messages observed while the agent was busy (deferred), and the paused
structured reply (its output type and the iterations it used). The loop steps read and
change it through its public attributes; the agent serializes it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentkit.agent._state import SCHEMA_VERSION, migrate_state, parse_agent_state, store
from agentkit.events import CallInfo
from agentkit.exceptions import StateError, UsageError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent._limits import UsageLimits
    from agentkit.agent._state import Run
    from agentkit.memory import Memory
    from agentkit.messages import Msg, ToolUseBlock

__all__ = ["CallInfo", "Conversation", "describe_call"]


def describe_call(call: ToolUseBlock) -> CallInfo:
    """The ``{"id", "name", "input"}`` form of a call shown to users (JSON-safe)."""
    return {"id": call["id"], "name": call["name"], "input": json.loads(json.dumps(call["input"]))}


class Conversation:
    """Memory and the state that outlives one run.

    Attributes:
        memory: The conversation memory.
        pending: Tool calls stored in memory and waiting for a human's approval.
        deferred: Messages observed while a run was in progress or calls were pending;
            stored once neither holds.
        paused_output: The output type of a structured reply paused for approval.
        paused_output_name: Its qualified name (kept across save/load; the class itself
            is never imported from a saved state).
        iteration: Model calls already made by the reply paused for approval.
        paused_limits: The ``UsageLimits`` of the reply paused for approval (its resume
            runs under them unless given others).
    """

    __slots__ = (
        "_deferred",
        "_pending",
        "iteration",
        "memory",
        "paused_limits",
        "paused_output",
        "paused_output_name",
    )

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        # The lists exist only while they hold something: an idle conversation (the
        # common case, thousands per process in a chat service) pays for neither.
        self._pending: list[ToolUseBlock] | None = None
        self._deferred: list[Msg] | None = None
        self.paused_output: type[BaseModel] | None = None
        self.paused_output_name: str | None = None
        self.paused_limits: UsageLimits | None = None
        self.iteration = 0

    @property
    def pending(self) -> list[ToolUseBlock]:
        """Tool calls stored in memory and waiting for a human's approval (a live list)."""
        if self._pending is None:
            self._pending = []
        return self._pending

    @pending.setter
    def pending(self, value: list[ToolUseBlock]) -> None:
        self._pending = value or None

    @property
    def deferred(self) -> list[Msg]:
        """Messages observed while a run was in progress or calls were pending (live)."""
        if self._deferred is None:
            self._deferred = []
        return self._deferred

    @deferred.setter
    def deferred(self, value: list[Msg]) -> None:
        self._deferred = value or None

    @property
    def has_pending(self) -> bool:
        """Whether tool calls wait for approval (without creating the list)."""
        return bool(self._pending)

    def pending_calls(self) -> list[CallInfo]:
        """The pending calls as ``{"id", "name", "input"}`` dicts."""
        return [describe_call(c) for c in self._pending or ()]

    def check_approvals(
        self,
        agent: str,
        approvals: dict[str, bool | str],
        output_type: type[BaseModel] | None,
    ) -> None:
        """Refuse approvals that cannot resume this conversation.

        Raises:
            UsageError: for an id that is not pending or a verdict of the wrong type.
            StateError: when nothing is pending, or a paused structured reply loaded
                from a state needs its ``output_type`` again.
        """
        pending_ids = {c["id"] for c in self._pending or ()}
        for call_id, verdict in approvals.items():
            if call_id not in pending_ids:
                raise UsageError(f"tool call {call_id!r} is not waiting for approval")
            if not isinstance(verdict, bool | str):
                raise UsageError(f"approval for {call_id!r} must be True, False or a reason")
        if not pending_ids:  # a silent empty "reply" would hide the caller's mistake
            raise StateError(f"agent {agent!r} has no tool calls waiting for approval")
        if output_type is None and self.paused_output is None and self.paused_output_name:
            raise StateError(
                f"this state paused a structured reply for {self.paused_output_name}; pass "
                "output_type= to resume (model classes are not "
                "stored in a state)"
            )

    async def flush_deferred(self, run: Run | None = None) -> None:
        """Store the deferred messages, unless calls still wait for approval."""
        if self._deferred and not self._pending:
            msgs, self._deferred = self._deferred, None
            await store(self.memory, msgs, run)

    def pause(
        self,
        output_type: type[BaseModel] | None,
        iteration: int,
        limits: UsageLimits | None = None,
    ) -> None:
        """Record how a run ended: paused for approval (calls pending) or not."""
        paused = bool(self._pending)
        if not paused:
            self._pending = None  # emptied in place by the run: drop the list
        if not self._deferred:
            self._deferred = None
        self.paused_output = output_type if paused else None
        self.paused_output_name = None
        self.paused_limits = limits if paused else None
        self.iteration = iteration if paused else 0

    def state_dict(self, name: str, iteration: int | None = None) -> dict[str, object]:
        """The JSON-safe state (``iteration``: a running reply's, else the paused one's)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "memory": self.memory.state_dict(),
            "pending_tool_calls": [json.loads(json.dumps(c)) for c in self._pending or ()],
            "deferred_messages": [m.to_dict() for m in self._deferred or ()],
            "iteration": self.iteration if iteration is None else iteration,
            "structured_model": _qualname(self.paused_output) or self.paused_output_name,
        }

    def load_state_dict(self, state: dict[str, object]) -> dict[str, object]:
        """Restore from :meth:`state_dict` (older schema versions are migrated first).

        Validated before anything changes; memory is loaded last, so a refused memory
        state leaves the conversation as it was.

        Returns:
            The migrated state (the caller restores the toolkit's part from it).

        Raises:
            StateError: on an unknown ``schema_version`` or inconsistent content.
        """
        state = migrate_state(state)
        pending, deferred, iteration = parse_agent_state(state)
        memory_state = state["memory"]
        if not isinstance(memory_state, dict):  # parse_agent_state refused it already
            raise StateError("agent state needs a 'memory' dict")
        self.memory.load_state_dict(memory_state)
        self.pending = pending
        self.deferred = deferred
        self.iteration = iteration
        self.paused_output = None
        self.paused_limits = None  # configuration, not state: the agent's apply
        name = state.get("structured_model")
        self.paused_output_name = name if isinstance(name, str) and pending else None
        return state


def _qualname(cls: type | None) -> str | None:
    return None if cls is None else f"{cls.__module__}.{cls.__qualname__}"

"""agentkit agent events -> AG-UI events (one :class:`Translator` per run).

The mapping (see docs/serving.md):

* a model turn is an AG-UI step ``reason N``; the tool calls after it are a step ``act N``;
* ``ThinkingDelta`` -> ``REASONING_START`` / ``REASONING_MESSAGE_*`` / ``REASONING_END``;
* ``TextDelta`` -> ``TEXT_MESSAGE_START`` / ``CONTENT`` / ``END``;
* ``ToolCallStarted`` -> ``TOOL_CALL_START`` / ``ARGS`` / ``END`` (calls that wait for approval
  or are answered without running are announced the same way when first seen);
* ``ToolProgress`` -> ``CUSTOM`` named :data:`TOOL_PROGRESS_EVENT`;
* ``ToolResult`` -> ``TOOL_CALL_RESULT`` (``metadata.status``: done | error | interrupted);
* a tool that is an agent (``agent.as_tool``) is also wrapped in ``SUBAGENT_STARTED`` /
  ``SUBAGENT_FINISHED`` (its run id is the tool call id).

Message ids streamed here are provisional (agentkit stores a turn's message only once the
model has finished it); the ``MESSAGES_SNAPSHOT`` sent before ``RUN_FINISHED`` carries the
stored ids, and the server remembers the provisional ones as aliases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ag_ui.core import (
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agentkit.events import (
    AgentEvent,
    ApprovalRequested,
    CallInfo,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)
from agentkit.messages import ToolResultBlock
from agentkit.serve._convert import arguments_json, result_status, result_text
from agentkit.serve._encode import encode_as

__all__ = ["TOOL_PROGRESS_EVENT", "Translator"]

TOOL_PROGRESS_EVENT = "agentkit.tool_progress"
"""Name of the ``CUSTOM`` event carrying a running tool's progress. Its ``value`` is
``{"toolCallId": str, "text": str, "progress": float | None, "total": float | None}``."""


class Translator:
    """Turns one run's agent events into AG-UI events, keeping start/end pairs balanced.

    The events come encoded (SSE ``data:`` blocks, :func:`~agentkit.serve._encode.encode_as`):
    written once from their values, never built as models.

    Args:
        run_id: The AG-UI run id (prefix of the provisional message ids).
        is_subagent: Tells whether a tool name belongs to an agent used as a tool.
        known_calls: Ids of calls announced by an earlier run (pending approvals).
    """

    def __init__(
        self,
        run_id: str,
        is_subagent: Callable[[str], bool] | None = None,
        known_calls: set[str] | None = None,
    ) -> None:
        self.run_id = run_id
        self.is_subagent = is_subagent or (lambda _name: False)
        self.aliases: list[str] = []  # provisional message ids streamed in this run
        self.pending: list[CallInfo] = []  # calls waiting for approval
        self._turn = 0
        self._step: str | None = None
        self._text: str | None = None  # open text message id
        self._reasoning: str | None = None  # open reasoning message id
        # Calls the client already knows (from an earlier run): results, no new START.
        self._announced: set[str] = set(known_calls or ())
        self._subagents: set[str] = set()
        self._parent: str | None = None  # this turn's assistant message id

    def _new_id(self, kind: str) -> str:
        msg_id = f"{self.run_id}:{self._turn}:{kind}"
        self.aliases.append(msg_id)
        return msg_id

    def _begin(self, kind: Literal["reason", "act"]) -> list[str]:
        if self._step is not None and self._step.startswith(kind):
            return []
        out = self._close_messages() + self._end_step()
        if kind == "reason" or self._turn == 0:  # a run may open with tool calls
            self._turn += 1
            self._parent = None
        self._step = f"{kind} {self._turn}"
        return [*out, encode_as(StepStartedEvent, step_name=self._step)]

    def _end_step(self) -> list[str]:
        if self._step is None:
            return []
        step, self._step = self._step, None
        return [encode_as(StepFinishedEvent, step_name=step)]

    def _close_messages(self) -> list[str]:
        out: list[str] = []
        if self._text is not None:
            out.append(encode_as(TextMessageEndEvent, message_id=self._text))
            self._text = None
        if self._reasoning is not None:
            out.append(encode_as(ReasoningMessageEndEvent, message_id=self._reasoning))
            out.append(encode_as(ReasoningEndEvent, message_id=self._reasoning))
            self._reasoning = None
        return out

    def parent_id(self) -> str:
        """This turn's (provisional) assistant message id, created on first use."""
        if self._parent is None:
            self._parent = self._new_id("assistant")
        return self._parent

    def finish(self) -> list[str]:
        """Close whatever is open (messages, the current step)."""
        return self._close_messages() + self._end_step()

    def translate(self, event: AgentEvent) -> list[str]:
        """The AG-UI events for one agent event (possibly none)."""
        if isinstance(event, TextDelta):
            # Most of a turn's events: the open message goes on (an open text message is in
            # the current ``reason`` step, with no reasoning open: nothing to begin or close).
            if self._text is not None:
                return [
                    encode_as(TextMessageContentEvent, message_id=self._text, delta=event.delta)
                ]
            return self._on_text(event.delta)
        if isinstance(event, ThinkingDelta):
            return self._on_thinking(event.delta)
        if isinstance(event, ToolCallStarted):
            started = event.tool_call
            return self._announce(started["id"], started["name"], started["input"])
        if isinstance(event, ToolProgress):
            return [self._progress(event)]
        if isinstance(event, ToolResult):
            return self._on_result(event.result)
        if isinstance(event, ApprovalRequested):
            self.pending = list(event.calls)
            out: list[str] = []
            for call in event.calls:
                out += self._announce(call["id"], call["name"], call["input"])
            return out
        return []

    def _on_text(self, delta: str) -> list[str]:
        out = self._begin("reason")
        if self._reasoning is not None:
            out += self._close_messages()
        if self._text is None:
            self._text = self.parent_id()
            out.append(encode_as(TextMessageStartEvent, message_id=self._text, role="assistant"))
        out.append(encode_as(TextMessageContentEvent, message_id=self._text, delta=delta))
        return out

    def _on_thinking(self, delta: str) -> list[str]:
        out = self._begin("reason")
        if self._text is not None:
            out += self._close_messages()
        if self._reasoning is None:
            self._reasoning = self._new_id("reasoning")
            out.append(encode_as(ReasoningStartEvent, message_id=self._reasoning))
            out.append(encode_as(ReasoningMessageStartEvent, message_id=self._reasoning))
        out.append(encode_as(ReasoningMessageContentEvent, message_id=self._reasoning, delta=delta))
        return out

    def _announce(self, call_id: str, name: str, arguments: object) -> list[str]:
        if call_id in self._announced:
            return []
        self._announced.add(call_id)
        out = self._begin("act")
        out += [
            encode_as(
                ToolCallStartEvent,
                tool_call_id=call_id,
                tool_call_name=name,
                parent_message_id=self.parent_id(),
            ),
            encode_as(
                ToolCallArgsEvent,
                tool_call_id=call_id,
                delta=arguments_json(arguments),
            ),
            encode_as(ToolCallEndEvent, tool_call_id=call_id),
        ]
        if self.is_subagent(name):
            self._subagents.add(call_id)
            out.append(
                encode_as(
                    SubagentStartedEvent,
                    subagent_run_id=call_id,
                    name=name,
                    parent_tool_call_id=call_id,
                )
            )
        return out

    def _progress(self, event: ToolProgress) -> str:
        meta = event.chunk.metadata or {}
        value = {
            "toolCallId": event.tool_call_id,
            "text": event.chunk.get_text(),
            "progress": meta.get("progress"),
            "total": meta.get("total"),
        }
        # An agent used as a tool forwards its own events as progress: attribute them to it.
        sub = event.tool_call_id if event.tool_call_id in self._subagents else None
        return encode_as(CustomEvent, name=TOOL_PROGRESS_EVENT, value=value, subagent_run_id=sub)

    def _on_result(self, block: ToolResultBlock) -> list[str]:
        call_id = block["id"]
        out = self._begin("act") + self._announce(call_id, block["name"], {})
        status = result_status(block)
        out.append(
            encode_as(
                ToolCallResultEvent,
                message_id=self._new_id(f"result:{call_id}"),
                tool_call_id=call_id,
                content=result_text(block["output"]),
                role="tool",
                metadata={"status": status},
            )
        )
        if call_id in self._subagents:
            self._subagents.discard(call_id)
            out.append(encode_as(SubagentFinishedEvent, subagent_run_id=call_id))
        return out

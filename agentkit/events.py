"""Events an agent emits while it replies, for UIs, logs and the console printer.

(``ApprovalRequested`` is the event; ``agentkit.ApprovalRequired`` is the exception a tool
raises to ask for approval.)

Every event is a small frozen dataclass with a ``type`` literal, so consumers can
``match event:`` on the class or dispatch on ``event.type``. The order within one reply is::

    ReplyStarted
    CacheBusted?                                  per model call, before it is sent
    (TextDelta | ThinkingDelta)*                  per model call, as chunks arrive
    PartialOutput*                                a structured answer taking shape
    (ToolCallStarted ToolProgress* ToolResult)*   per tool call (interleaved when parallel)
    ... more model calls and tool calls ...
    ApprovalRequested?                            calls wait for a human
    Interrupted?                                  the reply was interrupted
    ReplyFinished                                 always last
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict

if TYPE_CHECKING:
    from agentkit.messages import Msg, ToolResultBlock, ToolUseBlock
    from agentkit.tools._response import ToolResponse

__all__ = [
    "AgentEvent",
    "ApprovalRequested",
    "CacheBusted",
    "CallInfo",
    "Interrupted",
    "PartialOutput",
    "ReplyFinished",
    "ReplyStarted",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallStarted",
    "ToolProgress",
    "ToolResult",
]


class CallInfo(TypedDict):
    """A tool call as shown to users: its id, tool name and (JSON-copied) arguments."""

    id: str
    name: str
    input: dict[str, object]


@dataclass(frozen=True, slots=True)
class ReplyStarted:
    """A reply began."""

    agent: str
    type: Literal["reply_started"] = "reply_started"


@dataclass(frozen=True, slots=True)
class CacheBusted:
    """A warning: this request cannot read the prompt cache the previous one built.

    Emitted before a model request that asks for prompt caching (``PromptCaching``, or
    ``settings["cache"]`` set by a capability) when the start of the request that providers
    cache (the tool definitions and the system prompt) differs from the previous request of
    the conversation, so the provider processes (and, on Anthropic and Bedrock, writes
    again) the whole prompt. Typical causes: instructions that change per request (a
    timestamp), tools added or removed between steps.

    Attributes:
        reasons: What changed: ``"tools"``, ``"system"``, or both (in that order).
        added_tools: Names of the tools this request offers and the previous did not.
        removed_tools: Names of the tools the previous request offered and this one does not.
        changed_tools: Names of the tools offered by both whose definitions differ (or
            whose order changed).
    """

    reasons: tuple[Literal["tools", "system"], ...]
    added_tools: tuple[str, ...] = ()
    removed_tools: tuple[str, ...] = ()
    changed_tools: tuple[str, ...] = ()
    type: Literal["cache_busted"] = "cache_busted"


# The deltas are built once per streamed token: their ``__init__`` is written out, calling
# ``object.__setattr__`` bound once, where the generated one of a frozen dataclass looks it
# up per field (about a quarter of the event's cost). Same fields and defaults.
_set = object.__setattr__


@dataclass(frozen=True, slots=True, init=False)
class TextDelta:
    """New answer text from the model (``delta`` is only the new part)."""

    delta: str
    type: Literal["text_delta"] = "text_delta"

    def __init__(self, delta: str, type: Literal["text_delta"] = "text_delta") -> None:
        _set(self, "delta", delta)
        _set(self, "type", type)


@dataclass(frozen=True, slots=True, init=False)
class ThinkingDelta:
    """New reasoning text from the model."""

    delta: str
    type: Literal["thinking_delta"] = "thinking_delta"

    def __init__(self, delta: str, type: Literal["thinking_delta"] = "thinking_delta") -> None:
        _set(self, "delta", delta)
        _set(self, "type", type)


@dataclass(frozen=True, slots=True)
class PartialOutput:
    """A structured answer (``output_type``) taking shape while it streams.

    ``partial`` is the JSON object received so far: it validates against the output type
    (the member being answered, for a union) with missing fields allowed, and its fields
    never disappear from one event to the next. The last one of a run equals the
    accepted output's JSON dump (``result.output.model_dump(mode="json")``).
    """

    partial: dict[str, object]
    type: Literal["partial_output"] = "partial_output"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call starts running (after its ``pre_acting`` hooks)."""

    tool_call: ToolUseBlock
    type: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A non-final chunk streamed by a running tool."""

    tool_call_id: str
    chunk: ToolResponse
    type: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call finished (or was answered without running: denied, invalid JSON)."""

    tool_call_id: str
    result: ToolResultBlock
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """The reply stops because these calls (``{"id", "name", "input"}``) need approval."""

    calls: tuple[CallInfo, ...]
    type: Literal["approval_required"] = "approval_required"


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The reply was interrupted; ``reply`` is what it returns."""

    reply: Msg
    type: Literal["interrupted"] = "interrupted"


@dataclass(frozen=True, slots=True)
class ReplyFinished:
    """The reply ended (normally, waiting for approval, or interrupted)."""

    reply: Msg
    type: Literal["reply_finished"] = "reply_finished"


AgentEvent: TypeAlias = (
    ReplyStarted
    | CacheBusted
    | TextDelta
    | ThinkingDelta
    | PartialOutput
    | ToolCallStarted
    | ToolProgress
    | ToolResult
    | ApprovalRequested
    | Interrupted
    | ReplyFinished
)

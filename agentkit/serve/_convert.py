"""agentkit messages <-> AG-UI messages, and reconciling what a client sends.

agentkit keeps one assistant ``Msg`` per model turn (thinking, text and ``tool_use`` blocks)
and one ``role="user"`` ``Msg`` holding the ``tool_result`` blocks of a turn. AG-UI splits
them: a ``ReasoningMessage`` (id ``<msg id>:reasoning``), an ``AssistantMessage`` with
``tool_calls`` (the Msg id), and one ``ToolMessage`` per result (``<msg id>:<call id>``).
These ids are derived, so the same stored thread always converts to the same AG-UI ids and a
client that sends the conversation back is recognised message by message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeAlias, cast

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from pydantic import BaseModel

from agentkit.messages import Msg, ToolResultBlock

__all__ = [
    "ClientInputError",
    "Fields",
    "agui_fields",
    "build",
    "message_text",
    "new_user_messages",
    "result_status",
    "result_text",
    "to_agui_messages",
]

MAX_ID_LENGTH = 128
_ID = re.compile(r"[A-Za-z0-9._:@\-]{1,128}")


class ClientInputError(ValueError):
    """Input a client sent that the server refuses (answered with HTTP 4xx).

    Attributes:
        status: The HTTP status code.
        code: A short machine-readable error code.
        headers: Extra response headers (``Retry-After`` of a 429).
    """

    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = headers or {}


def check_client_id(value: str, what: str) -> str:
    """Validate an id chosen by a client (thread id, message id).

    Raises:
        ClientInputError: if it is empty, too long or uses other characters.
    """
    if not _ID.fullmatch(value):
        raise ClientInputError(
            400,
            "invalid_id",
            f"{what} must be 1-{MAX_ID_LENGTH} characters of letters, digits and ._:@- "
            f"(got {value[:40]!r})",
        )
    return value


def result_text(output: str | list[Any]) -> str:
    """A tool result's output as plain text (non-text blocks become a short placeholder)."""
    if isinstance(output, str):
        return output
    parts = []
    for block in output:
        kind = block.get("type") if isinstance(block, dict) else None
        parts.append(str(block.get("text", "")) if kind == "text" else f"[{kind or 'content'}]")
    return "\n".join(parts)


ToolStatus = Literal["done", "error", "interrupted"]
_CUT_PREFIXES = ("Tool call interrupted", "Tool call cancelled")


def result_status(block: ToolResultBlock) -> ToolStatus:
    """How a stored tool result ended: done, error (denied, failed) or interrupted."""
    if not block.get("is_error"):
        return "done"
    text = result_text(block["output"])
    return "interrupted" if text.startswith(_CUT_PREFIXES) else "error"


arguments_json = json.JSONEncoder(ensure_ascii=False).encode
"""A tool call's arguments as the JSON text AG-UI carries (``json.dumps(arguments,
ensure_ascii=False)``): one encoder for every call, not one built per ``dumps``."""


Fields: TypeAlias = "tuple[type[BaseModel], dict[str, Any]]"
"""An AG-UI model not built yet: its class and its fields by name (a nested model's value is
a ``Fields`` too). :func:`build` makes the model; ``encode_snapshot`` writes its JSON
without it (a thread's whole history is converted twice a turn: building and dumping the
models was most of that)."""


def build(fields: Fields) -> BaseModel:
    """The model ``fields`` describes (validated, as its constructor validates)."""
    cls, values = fields
    return cls(**{name: _built(value) for name, value in values.items()})


def _built(value: object) -> object:
    if type(value) is tuple:
        return build(value)
    if type(value) is list:
        return [_built(v) for v in value]
    return value


def _assistant(msg: Msg) -> list[Fields]:
    out: list[Fields] = []
    blocks = msg.get_content_blocks()
    thinking = "\n".join(b["thinking"] for b in blocks if b["type"] == "thinking")
    if thinking:
        out.append((ReasoningMessage, {"id": f"{msg.id}:reasoning", "content": thinking}))
    calls: list[Fields] = [
        (
            ToolCall,
            {
                "id": b["id"],
                "function": (
                    FunctionCall,
                    {"name": b["name"], "arguments": arguments_json(b["input"])},
                ),
            },
        )
        for b in blocks
        if b["type"] == "tool_use"
    ]
    text = msg.get_text()
    # An answer cut by Stop is stored with {"interrupted": True}: the page marks it "stopped"
    # after a reload too.
    cut = bool(msg.metadata and msg.metadata.get("interrupted"))
    fields: dict[str, Any] = {
        "id": msg.id,
        "content": text or None,
        "tool_calls": calls or None,
        "name": msg.name or None,
        "metadata": {"interrupted": True} if cut else None,
    }
    out.append((AssistantMessage, fields))
    return out


def _tool_message(msg: Msg, block: ToolResultBlock) -> Fields:
    content = result_text(block["output"])
    error = content if block.get("is_error") else None
    fields: dict[str, Any] = {
        "id": f"{msg.id}:{block['id']}",
        "tool_call_id": block["id"],
        "content": content,
        "error": error,
        "metadata": {"status": result_status(block)},
    }
    return ToolMessage, fields


def agui_fields(messages: Iterable[Msg]) -> list[Fields]:
    """A stored conversation as AG-UI messages (deterministic ids), not built yet."""
    out: list[Fields] = []
    for msg in messages:
        if msg.role == "assistant":
            out.extend(_assistant(msg))
        elif msg.role == "system":
            out.append((SystemMessage, {"id": msg.id, "content": msg.get_text()}))
        else:
            out.extend(_tool_message(msg, b) for b in msg.get_blocks("tool_result"))
            text = msg.get_text()
            if text or not msg.has_blocks("tool_result"):
                out.append((UserMessage, {"id": msg.id, "content": text, "name": msg.name or None}))
    return out


def to_agui_messages(messages: Iterable[Msg]) -> list[Message]:
    """Convert a stored conversation to AG-UI messages (deterministic ids)."""
    return [cast("Message", build(fields)) for fields in agui_fields(messages)]


def message_text(message: UserMessage | ToolMessage, kind: str = "message") -> str:
    """The text of a client's message (its text parts joined by newlines).

    Raises:
        ClientInputError: 400 for content parts other than text.
    """
    if isinstance(message.content, str):
        return message.content
    texts = []
    for part in message.content:
        if part.type != "text":
            raise ClientInputError(
                400,
                "unsupported_content",
                f"{kind} {message.id!r}: only text content is accepted (got a {part.type} part)",
            )
        texts.append(part.text)
    return "\n".join(texts)


def new_user_messages(client: Sequence[Message], known_ids: set[str]) -> list[Msg]:
    """The client's messages that the server does not hold yet, as agentkit ``Msg``s.

    The server is the source of truth: a message whose id it knows is skipped whatever its
    content; an unknown message is accepted only if it is a user message. Anything else (an
    assistant, tool, system, developer, reasoning or activity message the server never
    issued) is refused: a client could otherwise forge a tool result or an approval.

    Raises:
        ClientInputError: for a forged message, a bad id, a duplicate or non-text content.
    """
    out: list[Msg] = []
    seen: set[str] = set()
    for message in client:
        if message.id in known_ids:
            continue
        if message.id in seen:
            raise ClientInputError(400, "duplicate_message", f"message id {message.id!r} repeats")
        seen.add(message.id)
        if not isinstance(message, UserMessage):
            raise ClientInputError(
                422,
                "forged_message",
                f"message {message.id!r} has role {message.role!r} and is not part of this "
                "thread: clients may only add user messages, and results of the pending calls of "
                "their own (frontend) tools (other tool results and approvals come from the "
                "server; answer interrupts with resume entries)",
            )
        check_client_id(message.id, "a message id")
        out.append(Msg("user", message_text(message), "user", id=message.id))
    return out

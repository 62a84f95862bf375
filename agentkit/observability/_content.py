"""Prompt and answer content in the GenAI conventions' message shape (``capture_content``).

``gen_ai.input.messages`` / ``gen_ai.output.messages`` hold JSON arrays of
``{"role", "parts": [...]}`` with ``text``, ``reasoning``, ``tool_call`` and
``tool_call_response`` parts; the system prompt goes to ``gen_ai.system_instructions``.
Only built when the application asked for content capture.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkit.messages import Msg

__all__ = ["dumps", "request_attributes", "response_attributes"]

_MAX_CHARS = 64_000  # one attribute; backends truncate or drop larger values anyway


def dumps(value: object) -> str:
    """JSON text of ``value`` (non-JSON values by ``str``), cut to a sane size."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_CHARS else text[:_MAX_CHARS] + "..."


def _part(block: str | Mapping[str, object]) -> dict[str, object]:
    if isinstance(block, str):
        return {"type": "text", "content": block}
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "thinking":
        return {"type": "reasoning", "content": block.get("thinking", "")}
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
        }
    if kind == "tool_result":
        return {"type": "tool_call_response", "id": block.get("id"), "response": block["output"]}
    return {"type": str(kind)}  # media: the kind only, never the bytes


def _parts(msg: Msg) -> list[dict[str, object]]:
    content = msg.content
    blocks: list[str | Mapping[str, object]] = [content] if isinstance(content, str) else [*content]
    return [_part(b) for b in blocks]


def _message(msg: Msg) -> dict[str, object]:
    content = msg.content
    role: str = msg.role
    if role == "user" and any(
        not isinstance(b, str) and b.get("type") == "tool_result"
        for b in ([] if isinstance(content, str) else content)
    ):
        role = "tool"
    return {"role": role, "parts": _parts(msg)}


def request_attributes(messages: Sequence[Msg]) -> dict[str, str]:
    """``gen_ai.system_instructions`` and ``gen_ai.input.messages`` of one request."""
    system = [m for m in messages if m.role == "system"]
    rest = [_message(m) for m in messages if m.role != "system"]
    attributes: dict[str, str] = {"gen_ai.input.messages": dumps(rest)}
    if system:
        parts = [p for m in system for p in _parts(m)]
        attributes["gen_ai.system_instructions"] = dumps(parts)
    return attributes


def response_attributes(
    content: Sequence[Mapping[str, object]], finish_reason: object
) -> dict[str, str]:
    """``gen_ai.output.messages`` of one answer."""
    message: dict[str, object] = {"role": "assistant", "parts": [_part(b) for b in content]}
    if isinstance(finish_reason, str):
        message["finish_reason"] = finish_reason
    return {"gen_ai.output.messages": dumps([message])}

"""Prompt and answer content in the GenAI conventions' message shape (``capture_content``).

``gen_ai.input.messages`` / ``gen_ai.output.messages`` hold JSON arrays of
``{"role", "parts": [...]}`` with ``text``, ``reasoning``, ``tool_call`` and
``tool_call_response`` parts; the system prompt goes to ``gen_ai.system_instructions``.
Only built when the application asked for content capture.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps", "request_attributes", "response_attributes"]

_MAX_CHARS = 64_000  # one attribute; backends truncate or drop larger values anyway


def dumps(value: Any) -> str:
    """JSON text of ``value`` (non-JSON values by ``str``), cut to a sane size."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_CHARS else text[:_MAX_CHARS] + "..."


def _part(block: Any) -> dict[str, Any]:
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


def _message(msg: Any) -> dict[str, Any]:
    content = msg.content
    blocks = [content] if isinstance(content, str) else list(content)
    role = msg.role
    if role == "user" and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    ):
        role = "tool"
    return {"role": role, "parts": [_part(b) for b in blocks]}


def request_attributes(messages: list[Any]) -> dict[str, Any]:
    """``gen_ai.system_instructions`` and ``gen_ai.input.messages`` of one request."""
    system = [m for m in messages if m.role == "system"]
    rest = [_message(m) for m in messages if m.role != "system"]
    attributes = {"gen_ai.input.messages": dumps(rest)}
    if system:
        parts = [p for m in system for p in _message(m)["parts"]]
        attributes["gen_ai.system_instructions"] = dumps(parts)
    return attributes


def response_attributes(content: list[Any], finish_reason: Any) -> dict[str, Any]:
    """``gen_ai.output.messages`` of one answer."""
    message: dict[str, Any] = {"role": "assistant", "parts": [_part(b) for b in content]}
    if isinstance(finish_reason, str):
        message["finish_reason"] = finish_reason
    return {"gen_ai.output.messages": dumps([message])}

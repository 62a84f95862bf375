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

__all__ = ["dumps", "dumps_messages", "request_attributes", "response_attributes", "result_parts"]

_MAX_CHARS = 64_000  # one attribute; backends truncate or drop larger values anyway


_PART_CHARS = 4_000  # one text part, when the whole does not fit


def dumps(value: object) -> str:
    """JSON text of ``value`` (non-JSON values by ``str``) within ``_MAX_CHARS``, still valid.

    A backend parses the value to show it: a cut in the middle of the JSON would make all of
    it unreadable. Too long, each long string is shortened; still too long, the value becomes
    one JSON string holding the start of its text.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= _MAX_CHARS:
        return text
    text = json.dumps(_cap(value), ensure_ascii=False, default=str)
    if len(text) <= _MAX_CHARS:
        return text
    # Half: escaping the quotes and backslashes of JSON text can double its length.
    return json.dumps(text[: _MAX_CHARS // 2] + "...", ensure_ascii=False)


def _cap(value: object) -> object:
    """``value`` with every long string cut to ``_PART_CHARS`` (the JSON stays valid)."""
    if isinstance(value, str):
        return value if len(value) <= _PART_CHARS else value[:_PART_CHARS] + "..."
    if isinstance(value, dict):
        return {k: _cap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap(v) for v in value]
    return value


def dumps_messages(messages: list[dict[str, object]]) -> str:
    """JSON text of GenAI messages within ``_MAX_CHARS``, still valid JSON.

    A backend parses these attributes to show the conversation: a cut in the middle of the
    text would make the whole value unreadable. Too long, each long text is shortened,
    then the oldest messages are left out (the latest ones matter most to read a request).
    """
    text = json.dumps(messages, ensure_ascii=False, default=str)
    if len(text) <= _MAX_CHARS:
        return text
    dumped = [json.dumps(_cap(m), ensure_ascii=False, default=str) for m in messages]
    kept: list[str] = []
    size = 2
    for item in reversed(dumped):
        if kept and size + len(item) + 1 > _MAX_CHARS:
            break
        kept.append(item)
        size += len(item) + 1
    text = "[" + ",".join(reversed(kept)) + "]"
    if len(text) <= _MAX_CHARS:
        return text
    # One message, still too long (many parts): keep its first parts that fit.
    last = _cap(messages[-1])
    assert isinstance(last, dict)
    parts: list[object] = list(last.get("parts") or [])
    while parts and len(text) > _MAX_CHARS:
        parts.pop()
        text = json.dumps([{**last, "parts": parts}], ensure_ascii=False, default=str)
    return text


def result_parts(content: Sequence[Mapping[str, object]]) -> str:
    """``gen_ai.tool.call.result``: a tool's result blocks (media: the kind only)."""
    return dumps([_part(b) for b in content])


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
        output = block["output"]
        if isinstance(output, list):  # blocks: media by kind only, as elsewhere
            output = [_part(b) if isinstance(b, Mapping) else b for b in output]
        return {"type": "tool_call_response", "id": block.get("id"), "response": output}
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
    attributes: dict[str, str] = {"gen_ai.input.messages": dumps_messages(rest)}
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
    return {"gen_ai.output.messages": dumps_messages([message])}

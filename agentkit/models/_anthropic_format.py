"""Conversion between agentkit messages and the Anthropic Messages wire format.

Pure functions on dicts: no SDK import. Redacted thinking is kept in agentkit as a thinking
block with an empty ``thinking`` and the opaque payload under ``redacted_data``, so it can be
sent back verbatim.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any, cast

from agentkit.messages import ContentBlock, Msg, ToolResultBlock
from agentkit.models._common import split_tool_results, tool_use_block
from agentkit.models.base import ChatResponse, ChatUsage

__all__ = [
    "AnthropicStreamState",
    "format_messages",
    "format_tool_choice",
    "format_tools",
    "parse_message",
]

_AUDIO_NOTE = "[audio omitted: not supported by this provider]"
_VALID_ID = re.compile(r"[A-Za-z0-9_-]+")


def _wire_id(call_id: str) -> str:
    """A tool call id Anthropic accepts (``^[a-zA-Z0-9_-]+$``).

    Ids from other providers may not fit (``functions.add:0`` from some OpenAI-compatible
    servers, an empty id): they are mapped deterministically, so a call and its result
    still match, with a hash suffix so two ids cannot collide.
    """
    if _VALID_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:10]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)[:40]}_{digest}"


def _source(block: ContentBlock) -> dict[str, Any]:
    source: dict[str, Any] = block["source"]  # type: ignore[typeddict-item,assignment]
    if source["type"] == "url":
        return {"type": "url", "url": source["url"]}
    return {"type": "base64", "media_type": source["media_type"], "data": source["data"]}


def _with_cache(out: dict[str, Any], block: Any) -> dict[str, Any]:
    if "cache_control" in block:  # a prompt-caching hint stored on the block
        out["cache_control"] = block["cache_control"]
    return out


def _result(result: ToolResultBlock) -> dict[str, Any]:
    output = result["output"]
    content: str | list[dict[str, Any]]
    if isinstance(output, str):
        content = output
    else:
        content = []
        for block in output:
            if block["type"] == "text":
                if block["text"]:
                    content.append({"type": "text", "text": block["text"]})
            elif block["type"] == "image":
                content.append({"type": "image", "source": _source(block)})
            else:
                content.append({"type": "text", "text": _AUDIO_NOTE})
    out: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _wire_id(result["id"]),
        "content": content,
    }
    if result.get("is_error"):
        out["is_error"] = True
    return _with_cache(out, result)


def _block(block: ContentBlock, role: str) -> dict[str, Any] | None:
    kind = block["type"]
    if kind == "text":
        text = block["text"]  # type: ignore[typeddict-item]
        return _with_cache({"type": "text", "text": text}, block) if text else None
    if kind == "thinking":
        if role != "assistant":
            return None
        extra: dict[str, Any] = block  # type: ignore[assignment]
        if "redacted_data" in extra:
            return {"type": "redacted_thinking", "data": extra["redacted_data"]}
        signature = block.get("signature")
        if not signature:
            return None  # thinking from another provider cannot be verified: drop it
        return {"type": "thinking", "thinking": block["thinking"], "signature": signature}  # type: ignore[typeddict-item]
    if kind == "tool_use":
        # Malformed arguments (raw_input) go as {}, keeping the call paired with its error
        # result; the model sees the error and retries.
        arguments = {} if "raw_input" in block else block["input"]  # type: ignore[typeddict-item]
        call_id = _wire_id(block["id"])  # type: ignore[typeddict-item]
        out = {"type": "tool_use", "id": call_id, "name": block["name"], "input": arguments}  # type: ignore[typeddict-item]
        return _with_cache(out, block)
    if kind == "image":
        return _with_cache({"type": "image", "source": _source(block)}, block)
    if kind == "audio":
        return {"type": "text", "text": _AUDIO_NOTE}
    return None


def _append(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add blocks as a turn, merging with a previous turn of the same role.

    Tool results come first in a user turn, as the API requires.
    """
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        blocks = turns[-1]["content"] + blocks
        turns.pop()
    if role == "user":
        blocks = [b for b in blocks if b["type"] == "tool_result"] + [
            b for b in blocks if b["type"] != "tool_result"
        ]
    turns.append({"role": role, "content": blocks})


def format_messages(
    messages: Sequence[Msg],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Convert a conversation to Anthropic's ``(system, messages)``.

    Leading system messages become the ``system`` parameter; a system message later in the
    conversation becomes user text at its place. Tool results go into user turns whatever
    the role of the message holding them, and consecutive same-role turns are merged.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for msg in messages:
        blocks = msg.get_content_blocks()
        if msg.role == "system" and not turns:
            system += [b for b in (_block(x, "user") for x in blocks) if b and b["type"] == "text"]
            continue
        role = "assistant" if msg.role == "assistant" else "user"
        others, results = split_tool_results(blocks)
        converted = [b for b in (_block(x, role) for x in others) if b is not None]
        if role == "assistant":
            _append(turns, "assistant", converted)
            _append(turns, "user", [_result(r) for r in results])
        else:
            _append(turns, "user", [_result(r) for r in results] + converted)
    if turns and turns[-1]["role"] == "assistant":
        _trim_prefill(turns)
    return system, turns


def _trim_prefill(turns: list[dict[str, Any]]) -> None:
    """Trim the trailing whitespace of a final assistant turn.

    Such a turn is a prefill the model continues (e.g. a partial answer kept by an
    interrupt), and the API rejects one that ends in whitespace.
    """
    blocks = turns[-1]["content"]
    if blocks and blocks[-1]["type"] == "text":
        text = blocks[-1]["text"].rstrip()
        if text:
            blocks[-1] = {**blocks[-1], "text": text}
        else:
            blocks.pop()
    if not blocks:
        turns.pop()


def format_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style function schemas -> Anthropic tool definitions."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function", tool)
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        converted: dict[str, Any] = {"name": function["name"], "input_schema": schema}
        if function.get("description"):
            converted["description"] = function["description"]
        out.append(_with_cache(converted, tool))
    return out


def format_tool_choice(choice: str | None, parallel: bool | None) -> dict[str, Any] | None:
    """Map a tool choice (and ``parallel_tool_calls=False``) to Anthropic's ``tool_choice``."""
    if choice is None and parallel is not False:
        return None
    mapping = {None: "auto", "auto": "auto", "none": "none", "required": "any"}
    out: dict[str, Any] = (
        {"type": mapping[choice]} if choice in mapping else {"type": "tool", "name": choice}
    )
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _usage(data: dict[str, Any], elapsed: float) -> ChatUsage:
    prompt = sum(
        int(data.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return ChatUsage(
        prompt,
        int(data.get("output_tokens") or 0),
        elapsed,
        cache_read_tokens=int(data.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(data.get("cache_creation_input_tokens") or 0),
    )


def _content_block(block: dict[str, Any]) -> ContentBlock | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text") or ""}
    if kind == "thinking":
        out: dict[str, Any] = {"type": "thinking", "thinking": block.get("thinking") or ""}
        if block.get("signature"):
            out["signature"] = block["signature"]
        return out  # type: ignore[return-value]
    if kind == "redacted_thinking":
        redacted: Any = {"type": "thinking", "thinking": "", "redacted_data": block.get("data", "")}
        return cast(ContentBlock, redacted)
    if kind == "tool_use":
        value = block.get("input")
        raw = json.dumps(value) if not isinstance(value, dict) else ""
        result = tool_use_block(block.get("id"), block.get("name") or "", raw, final=True)
        if isinstance(value, dict):
            result["input"] = value
        return result
    return None  # server tool blocks and future types have no agentkit form


def parse_message(data: dict[str, Any], elapsed: float) -> ChatResponse:
    """Build a ``ChatResponse`` from a non-streaming ``message`` body."""
    content = [b for b in map(_content_block, data.get("content") or []) if b is not None]
    return ChatResponse(
        content=content,
        usage=_usage(data.get("usage") or {}, elapsed),
        id=str(data.get("id") or uuid.uuid4().hex),
        metadata={"finish_reason": data.get("stop_reason")},
    )


class AnthropicStreamState:
    """Accumulates Messages stream events into cumulative snapshots."""

    __slots__ = ("blocks", "finish_reason", "id", "stopped", "usage_data")

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        # index -> mutable Anthropic-style block; tool_use blocks accumulate "raw"
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stopped: set[int] = set()
        self.finish_reason: str | None = None
        self.usage_data: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> bool:
        """Apply one event; return whether the visible content changed."""
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event.get("index", 0), event.get("delta") or {})
        if kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            start_input = block.get("input")
            # The API starts tool input at {} and streams it; a proxy may send it whole here.
            block["raw"] = (
                json.dumps(start_input) if isinstance(start_input, dict) and start_input else ""
            )
            self.blocks[event.get("index", len(self.blocks))] = block
            return True
        if kind == "content_block_stop":
            self.stopped.add(event.get("index", 0))
            return self.blocks.get(event.get("index", 0), {}).get("type") == "tool_use"
        if kind == "message_start":
            message = event.get("message") or {}
            self.id = message.get("id") or self.id
            self.usage_data.update(message.get("usage") or {})
        elif kind == "message_delta":
            self.finish_reason = (event.get("delta") or {}).get("stop_reason") or self.finish_reason
            usage = event.get("usage") or {}
            self.usage_data.update({k: v for k, v in usage.items() if v is not None})
        return False

    def _delta(self, index: int, delta: dict[str, Any]) -> bool:
        block = self.blocks.get(index)
        if block is None:
            return False
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature", "")
            return False
        elif kind == "input_json_delta":
            block["raw"] += delta.get("partial_json", "")
        else:
            return False
        return True

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The cumulative response so far (``final`` adds usage and finish reason)."""
        content: list[ContentBlock] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.get("type") == "tool_use":
                done = final or index in self.stopped
                content.append(
                    tool_use_block(
                        block.get("id"), block.get("name") or "", block["raw"], final=done
                    )
                )
            else:
                converted = _content_block(block)
                if converted is not None:
                    content.append(converted)
        response = ChatResponse(content=content, id=self.id)
        if final:
            response.usage = _usage(self.usage_data, elapsed)
            response.metadata = {"finish_reason": self.finish_reason}
        return response

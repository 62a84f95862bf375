"""Conversion between agentkit messages and the OpenAI Chat Completions wire format.

Pure functions on dicts: no SDK import, so they are cheap and easy to test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from agentkit.messages import ContentBlock, Msg, ToolResultBlock
from agentkit.models._common import result_text, split_tool_results, tool_use_block
from agentkit.models.base import ChatResponse, ChatUsage

__all__ = ["OpenAIStreamState", "format_messages", "format_tool_choice", "parse_completion"]

# One encoder reused: json.dumps with non-default options builds a new encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _image_part(block: ContentBlock) -> dict[str, Any]:
    source: dict[str, Any] = block["source"]  # type: ignore[typeddict-item,assignment]
    if source["type"] == "url":
        url = source["url"]
    else:
        url = f"data:{source['media_type']};base64,{source['data']}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_part(block: ContentBlock) -> dict[str, Any] | None:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": block["text"]}  # type: ignore[typeddict-item]
    if kind == "image":
        return _image_part(block)
    if kind == "audio":
        source: dict[str, Any] = block["source"]  # type: ignore[typeddict-item,assignment]
        if source["type"] == "base64":
            fmt = _AUDIO_FORMATS.get(source["media_type"], source["media_type"].split("/")[-1])
            return {"type": "input_audio", "input_audio": {"data": source["data"], "format": fmt}}
        return {"type": "text", "text": f"[audio: {source['url']}]"}
    return None  # thinking/tool_use in a user turn have no OpenAI form


def _user_message(blocks: list[ContentBlock]) -> dict[str, Any] | None:
    parts = [p for p in (_user_part(b) for b in blocks) if p is not None]
    if not parts:
        return None
    if all(p["type"] == "text" for p in parts):
        # Plain string content: accepted by every OpenAI-compatible server.
        return {"role": "user", "content": "\n".join(p["text"] for p in parts)}
    return {"role": "user", "content": parts}


def _assistant_message(blocks: list[ContentBlock], reasoning: bool) -> dict[str, Any] | None:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "thinking":
            thoughts.append(block["thinking"])
        elif block["type"] == "tool_use":
            raw = block.get("raw_input")
            arguments = raw if raw is not None else _encode(block["input"])
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": arguments},
                }
            )
    if not texts and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if reasoning and thoughts:
        message["reasoning_content"] = "\n".join(thoughts)
    return message


def _tool_messages(results: list[ToolResultBlock]) -> list[dict[str, Any]]:
    """One ``role=tool`` message per result.

    Images follow in one user message, since OpenAI tool messages carry text only.
    """
    messages: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for result in results:
        messages.append(
            {"role": "tool", "tool_call_id": result["id"], "content": result_text(result)}
        )
        if isinstance(result["output"], list):
            found = [_image_part(b) for b in result["output"] if b["type"] == "image"]
            if found:
                note = f"Images returned by tool {result['name']!r} (call {result['id']}):"
                images += [{"type": "text", "text": note}, *found]
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def format_messages(messages: Sequence[Msg], *, reasoning: bool = False) -> list[dict[str, Any]]:
    """Convert a conversation to Chat Completions messages.

    Args:
        messages: The conversation.
        reasoning: Send thinking blocks back as ``reasoning_content`` (DeepSeek-style
            servers); otherwise thinking is dropped, as OpenAI does not accept it.

    Returns:
        The ``messages`` array. Tool results become ``role=tool`` messages wherever they
        are stored (converted by block type, not by the message's role).
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        if isinstance(msg.content, str):
            if msg.content or msg.role != "assistant":
                out.append({"role": msg.role, "content": msg.content})
            continue
        if msg.role == "system":
            out.append({"role": "system", "content": msg.get_text()})
            continue
        others, results = split_tool_results(msg.content)
        if msg.role == "assistant":
            message = _assistant_message(others, reasoning)
            if message is not None:
                out.append(message)
            out += _tool_messages(results)
        else:
            out += _tool_messages(results)
            message = _user_message(others)
            if message is not None:
                out.append(message)
    return out


def format_tool_choice(choice: str) -> str | dict[str, Any]:
    """``"auto"``/``"none"``/``"required"`` or a tool name, in OpenAI's format."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _usage(data: Any, elapsed: float) -> ChatUsage | None:
    if not isinstance(data, dict):
        return None
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return ChatUsage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        time=elapsed,
        cache_read_tokens=int(cached or 0),  # included in prompt_tokens, priced lower
    )


def _arguments_text(value: Any) -> str:
    """Arguments as JSON text; some servers send an object instead of the specified string."""
    if value is None or isinstance(value, str):
        return value or ""
    return _encode(value)


def _reasoning_of(message: dict[str, Any]) -> str | None:
    value = message.get("reasoning_content")
    if value is None:
        value = message.get("reasoning")  # OpenRouter / Ollama spelling
    return value if isinstance(value, str) else None


def parse_completion(data: dict[str, Any], elapsed: float) -> ChatResponse:
    """Build a ``ChatResponse`` from a non-streaming ``chat.completion`` body."""
    choices = data.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    content: list[ContentBlock] = []
    reasoning = _reasoning_of(message)
    if reasoning:
        content.append({"type": "thinking", "thinking": reasoning})
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append({"type": "text", "text": refusal})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = _arguments_text(function.get("arguments"))
        content.append(tool_use_block(call.get("id"), function.get("name") or "", raw, final=True))
    metadata: dict[str, Any] = {"finish_reason": choice.get("finish_reason")}
    if isinstance(refusal, str) and refusal:
        metadata["refusal"] = refusal
    return ChatResponse(
        content=content,
        usage=_usage(data.get("usage"), elapsed),
        id=str(data.get("id") or uuid.uuid4().hex),
        metadata=metadata,
    )


class OpenAIStreamState:
    """Accumulates ``chat.completion.chunk`` deltas into cumulative snapshots."""

    __slots__ = ("calls", "finish_reason", "id", "reasoning", "text", "usage_data")

    def __init__(self) -> None:
        self.id: str | None = None
        self.text = ""
        self.reasoning = ""
        # index -> [id, name, argument text]; dicts keep first-seen order
        self.calls: dict[int, list[Any]] = {}
        self.finish_reason: str | None = None
        self.usage_data: dict[str, Any] | None = None

    def feed(self, chunk: dict[str, Any]) -> bool:
        """Apply one chunk; return whether the visible content changed."""
        if self.id is None and chunk.get("id"):
            self.id = str(chunk["id"])
        if isinstance(chunk.get("usage"), dict):
            self.usage_data = chunk["usage"]
        changed = False
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            changed = self._apply(delta) or changed
        return changed

    def _apply(self, delta: dict[str, Any]) -> bool:
        changed = False
        piece = delta.get("content")
        if isinstance(piece, str) and piece:
            self.text += piece
            changed = True
        thought = _reasoning_of(delta)
        if thought:
            self.reasoning += thought
            changed = True
        for call in delta.get("tool_calls") or ():
            entry = self.calls.setdefault(self._index_of(call), [None, "", ""])
            if call.get("id") and entry[0] is None:
                entry[0] = call["id"]
            function = call.get("function") or {}
            if function.get("name") and not entry[1]:
                entry[1] = function["name"]
            if function.get("arguments"):
                entry[2] += _arguments_text(function["arguments"])
            changed = True
        return changed

    def _index_of(self, call: dict[str, Any]) -> int:
        index = call.get("index")
        if isinstance(index, int):
            return index
        # Some servers omit the index: a new id starts a new call, anything else continues
        # the last one.
        last: int | None = next(reversed(self.calls), None)
        if last is None or (call.get("id") and call["id"] != self.calls[last][0]):
            return len(self.calls)
        return last

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The cumulative response so far (``final`` adds usage and finish reason)."""
        content: list[ContentBlock] = []
        if self.reasoning:
            content.append({"type": "thinking", "thinking": self.reasoning})
        if self.text:
            content.append({"type": "text", "text": self.text})
        for entry in self.calls.values():
            if entry[0] is None:  # keep the generated id stable across snapshots
                entry[0] = tool_use_block(None, "", "", final=True)["id"]
            content.append(tool_use_block(entry[0], entry[1], entry[2], final=final))
        if self.id is None:
            self.id = uuid.uuid4().hex
        response = ChatResponse(content=content, id=self.id)
        if final:
            response.usage = _usage(self.usage_data, elapsed) or ChatUsage(time=elapsed)
            response.metadata = {"finish_reason": self.finish_reason}
        return response

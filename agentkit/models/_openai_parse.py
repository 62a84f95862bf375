"""Parsing OpenAI Chat Completions answers (whole and streamed) into agentkit responses.

Pure functions on dicts: no SDK import, so they are cheap and easy to test.
"""

from __future__ import annotations

import json
from typing import cast

from agentkit._ids import new_id
from agentkit._text import StreamText
from agentkit.messages import ContentBlock, ToolUseBlock
from agentkit.models._base import ChatResponse, ChatUsage
from agentkit.models._common import (
    CHAT_FINISH_REASONS,
    clean_body,
    finish_metadata,
    tool_use_block,
)
from agentkit.models._json import JSONObject, JSONValue, arr, count, obj
from agentkit.models._openai_audio import AudioStream, audio_block_of

__all__ = ["OpenAIStreamState", "parse_completion"]

# One encoder reused: json.dumps with non-default options builds a new encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode


def _usage(data: JSONValue, elapsed: float) -> ChatUsage | None:
    if not isinstance(data, dict):
        return None
    prompt = data.get("prompt_tokens_details")
    completion = data.get("completion_tokens_details")
    cached = _detail(prompt, "prompt_tokens_details", "cached_tokens")
    if not cached:  # DeepSeek's own field (its newer answers also carry the detail)
        cached = count(data.get("prompt_cache_hit_tokens"), "usage.prompt_cache_hit_tokens")
    return ChatUsage(
        input_tokens=count(data.get("prompt_tokens"), "usage.prompt_tokens"),
        output_tokens=count(data.get("completion_tokens"), "usage.completion_tokens"),
        time=elapsed,
        # Included in prompt_tokens, priced lower (reads) or higher (writes, OpenRouter's
        # detail for the providers that bill them: Anthropic, Gemini).
        cache_read_tokens=cached,
        cache_write_tokens=_detail(prompt, "prompt_tokens_details", "cache_write_tokens"),
        reasoning_tokens=_detail(completion, "completion_tokens_details", "reasoning_tokens"),
        # Included in the totals too, and priced many times higher than text.
        input_audio_tokens=_detail(prompt, "prompt_tokens_details", "audio_tokens"),
        output_audio_tokens=_detail(completion, "completion_tokens_details", "audio_tokens"),
    )


def _detail(details: JSONValue, name: str, key: str) -> int:
    value = details.get(key) if isinstance(details, dict) else None
    return count(value, f"usage.{name}.{key}")


def _arguments_text(value: JSONValue) -> str:
    """Arguments as JSON text; some servers send an object instead of the specified string."""
    if value is None or isinstance(value, str):
        return value or ""
    return _encode(value)


def _reasoning_of(message: JSONObject) -> str | None:
    value = message.get("reasoning_content")
    if value is None:
        value = message.get("reasoning")  # OpenRouter / Ollama spelling
    return value if isinstance(value, str) else None


def _content_of(value: JSONValue) -> tuple[str, str]:
    """``(text, thinking)`` of a message's (or delta's) ``content``.

    The content is a string on OpenAI; Mistral's reasoning models (Magistral) send a list of
    parts: ``{"type": "text", "text": ...}`` and ``{"type": "thinking", "thinking": [text
    parts]}``. Other parts (references...) carry nothing to show.
    """
    if value is None or isinstance(value, str):
        return value or "", ""
    texts: list[str] = []
    thoughts: list[str] = []
    for item in arr(value):
        part = obj(item)
        kind = part.get("type")
        if kind == "text":
            texts.append(_text_of(part.get("text")))
        elif kind == "thinking":
            thoughts.append(_text_of(part.get("thinking")))
    return "".join(texts), "".join(thoughts)


def _text_of(value: JSONValue) -> str:
    """A part's text: a string, or a list of text parts (Mistral's ``thinking``)."""
    if value is None or isinstance(value, str):
        return value or ""
    return _content_of(value)[0]


def _with_extra(block: ToolUseBlock, extra_content: JSONValue) -> ToolUseBlock:
    """Keep a call's ``extra_content`` (Gemini puts its thought signature there)."""
    if isinstance(extra_content, dict):
        # A provider key on the block, kept so the call is sent back exactly as it came.
        cast("dict[str, object]", block)["extra_content"] = extra_content
    return block


def parse_completion(data: JSONObject, elapsed: float) -> ChatResponse:
    """Build a ``ChatResponse`` from a non-streaming ``chat.completion`` body."""
    data = obj(clean_body(data))
    choices = arr(data.get("choices")) or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = obj(choice.get("message"))
    content: list[ContentBlock] = []
    text, thought = _content_of(message.get("content"))
    reasoning = (_reasoning_of(message) or "") + thought
    if reasoning:
        content.append({"type": "thinking", "thinking": reasoning})
    if text:
        content.append({"type": "text", "text": text})
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append({"type": "text", "text": refusal})
    spoken = audio_block_of(obj(message.get("audio")))
    if spoken is not None:
        if spoken["transcript"] and spoken["transcript"] != text:  # the text of the turn
            content.append({"type": "text", "text": spoken["transcript"]})
        content.append(spoken)
    for item in arr(message.get("tool_calls")):
        call = obj(item)
        function = obj(call.get("function"))
        raw = _arguments_text(function.get("arguments"))
        block = tool_use_block(
            _opt_str(call.get("id")), str(function.get("name") or ""), raw, final=True
        )
        content.append(_with_extra(block, call.get("extra_content")))
    metadata = finish_metadata(choice.get("finish_reason"), CHAT_FINISH_REASONS)
    if isinstance(refusal, str) and refusal:
        metadata["refusal"] = refusal
    return ChatResponse(
        content=content,
        usage=_usage(data.get("usage"), elapsed),
        id=str(data.get("id") or new_id()),
        metadata=metadata,
    )


def _opt_str(value: JSONValue) -> str | None:
    return None if value is None else str(value)


class _Call:
    """A streamed tool call being assembled."""

    __slots__ = ("arguments", "extra", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments = ""
        self.extra: JSONValue = None


class OpenAIStreamState:
    """Accumulates ``chat.completion.chunk`` deltas into cumulative snapshots."""

    __slots__ = (
        "audio",
        "calls",
        "finish_reason",
        "id",
        "plain",
        "reasoning",
        "text",
        "usage_data",
    )

    def __init__(self) -> None:
        self.id: str | None = None
        # Joined as valid Unicode: an emoji split across chunks as two JSON escapes is rejoined.
        self.text = StreamText()
        self.reasoning = StreamText()
        self.calls: dict[int, _Call] = {}  # by index; dicts keep first-seen order
        self.finish_reason: str | None = None
        self.usage_data: JSONObject | None = None
        self.audio: AudioStream | None = None  # audio output, when asked for
        self.plain = True  # text only so far: no reasoning, tool call or audio

    def feed(self, chunk: JSONObject) -> bool:
        """Apply one chunk; return whether the visible content changed."""
        if self.id is None and chunk.get("id"):
            self.id = str(chunk["id"])
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage_data = usage
        choices = chunk.get("choices")
        if type(choices) is list and len(choices) == 1:
            # Once per streamed token: one choice whose delta is nothing but a text piece.
            choice = choices[0]
            if type(choice) is dict and not choice.get("finish_reason"):
                delta = choice.get("delta")
                if type(delta) is dict and len(delta) == 1 and choice.get("index", 0) == 0:
                    piece = delta.get("content")
                    if type(piece) is str:
                        self.text.add(piece)
                        return bool(piece)
        changed = False
        for item in choices if type(choices) is list else arr(choices):
            choice = item if type(item) is dict else obj(item)
            if choice.get("index", 0) != 0:
                continue
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = str(reason)
            delta = choice.get("delta")
            changed = self._apply(delta if type(delta) is dict else obj(delta)) or changed
        return changed

    def _apply(self, delta: JSONObject) -> bool:
        # Once per streamed token: the fields a delta lacks are skipped by one lookup each.
        changed = False
        piece = delta.get("content")
        if type(piece) is str:  # the common case: plain text, no parts to walk
            part_thought = ""
        else:
            piece, part_thought = _content_of(piece)
        if piece:
            self.text.add(piece)
            changed = True
        if part_thought or "reasoning_content" in delta or "reasoning" in delta:
            thought = (_reasoning_of(delta) or "") + part_thought
            if thought:
                self.reasoning.add(thought)
                self.plain = False
                changed = True
        audio = delta.get("audio")
        if isinstance(audio, dict):
            self.audio = self.audio or AudioStream()
            self.plain = False
            changed = self.audio.feed(audio) or changed
        calls = delta.get("tool_calls")
        if calls is None:
            return changed
        for item in arr(calls):
            call = obj(item)
            entry = self.calls.setdefault(self._index_of(call), _Call())
            self.plain = False
            if isinstance(call.get("extra_content"), dict):
                entry.extra = call["extra_content"]
            if call.get("id") and entry.id is None:
                entry.id = str(call["id"])
            function = obj(call.get("function"))
            if function.get("name") and not entry.name:
                entry.name = str(function["name"])
            if function.get("arguments"):
                entry.arguments += _arguments_text(function["arguments"])
            changed = True
        return changed

    def _index_of(self, call: JSONObject) -> int:
        index = call.get("index")
        if isinstance(index, int):
            return index
        # Some servers omit the index: a new id starts a new call, anything else continues
        # the last one.
        last: int | None = next(reversed(self.calls), None)
        if last is None or (call.get("id") and call["id"] != self.calls[last].id):
            return len(self.calls)
        return last

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The cumulative response so far (``final`` adds usage and finish reason)."""
        if self.plain and not final and self.id is not None:
            # Once per streamed token of a plain answer: its one text block, nothing to walk.
            text = self.text.text
            return ChatResponse([{"type": "text", "text": text}] if text else [], None, self.id)
        content: list[ContentBlock] = []
        reasoning, text = self.reasoning.value(final=final), self.text.value(final=final)
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning})
        if text:
            content.append({"type": "text", "text": text})
        if self.audio is not None:  # its transcript so far; the clip once complete
            content += self.audio.blocks(text, final=final)
        for entry in self.calls.values():
            if entry.id is None:  # keep the generated id stable across snapshots
                entry.id = tool_use_block(None, "", "", final=True)["id"]
            block = tool_use_block(entry.id, entry.name, entry.arguments, final=final)
            content.append(_with_extra(block, entry.extra))
        if self.id is None:
            self.id = new_id()
        response = ChatResponse(content=content, id=self.id)
        if final:
            response.usage = _usage(self.usage_data, elapsed) or ChatUsage(time=elapsed)
            response.metadata = finish_metadata(self.finish_reason, CHAT_FINISH_REASONS)
        return response

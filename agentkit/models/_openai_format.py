"""Conversion between agentkit messages and the OpenAI Chat Completions wire format.

Pure functions on dicts: no SDK import, so they are cheap and easy to test. Answers are
parsed in ``_openai_parse`` (``parse_completion`` and ``OpenAIStreamState`` are re-exported).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agentkit._text import copy_json
from agentkit.exceptions import UnsupportedContentError
from agentkit.messages import (
    AudioBlock,
    ContentBlock,
    ImageBlock,
    Msg,
    ToolResultBlock,
)
from agentkit.models._common import result_text, split_tool_results
from agentkit.models._openai_audio import (
    audio_expiry,
    is_audio_output,
    replay_audio,
)
from agentkit.models._openai_parse import OpenAIStreamState, parse_completion

__all__ = [
    "OpenAIStreamState",
    "WireMessages",
    "encode_body",
    "format_messages",
    "format_messages_uncached",
    "format_tool_choice",
    "parse_completion",
]

# One encoder reused: json.dumps with non-default options builds a new encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _image_part(block: ImageBlock) -> dict[str, object]:
    source = block["source"]
    if source["type"] == "url":
        url = source["url"]
    else:
        url = f"data:{source['media_type']};base64,{source['data']}"
    return {"type": "image_url", "image_url": {"url": url}}


def _unsupported(what: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"OpenAI Chat Completions does not accept {what}; send it inline (base64)",
        provider="openai",
    )


def _file_part(block: ContentBlock) -> dict[str, object]:
    """A document as a ``file`` part; a plain-text document as text.

    ``file_data`` holds a data URL, or the document's URL: OpenRouter takes URLs there,
    OpenAI only inline data. Which servers take a URL is theirs to say, not refused here.
    OpenAI's advice for a file's text on Chat Completions is to send it as text.
    """
    extra = cast("Mapping[str, Any]", block)  # a document block, read by key
    source = extra["source"]
    if source["type"] == "text":
        return {"type": "text", "text": source["data"]}
    name = extra.get("filename") or extra.get("title") or "document.pdf"
    if source["type"] == "url":
        data = source["url"]
    else:
        data = f"data:{source['media_type']};base64,{source['data']}"
    return {"type": "file", "file": {"filename": name, "file_data": data}}


def _user_part(block: ContentBlock) -> dict[str, object] | None:
    if block["type"] == "text":
        return {"type": "text", "text": block["text"]}
    if block["type"] == "image":
        return _image_part(block)
    if block["type"] == "document":
        return _file_part(block)
    if block["type"] == "audio":
        source = block["source"]
        if source["type"] != "base64":
            raise _unsupported("audio by URL")
        fmt = _AUDIO_FORMATS.get(source["media_type"], source["media_type"].split("/")[-1])
        return {"type": "input_audio", "input_audio": {"data": source["data"], "format": fmt}}
    return None  # thinking/tool_use in a user turn have no OpenAI form


def _user_message(blocks: Sequence[ContentBlock]) -> dict[str, object] | None:
    parts = [p for p in (_user_part(b) for b in blocks) if p is not None]
    if not parts:
        return None
    if all(p["type"] == "text" for p in parts):
        # Plain string content: accepted by every OpenAI-compatible server.
        return {"role": "user", "content": "\n".join(str(p["text"]) for p in parts)}
    return {"role": "user", "content": parts}


def _assistant_message(blocks: Sequence[ContentBlock], reasoning: bool) -> dict[str, object] | None:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, object]] = []
    spoken: list[AudioBlock] = []
    for block in blocks:
        if block["type"] == "audio":
            spoken.append(block)  # audio output (see ``_convert``)
        elif block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "thinking":
            thoughts.append(block["thinking"])
        elif block["type"] == "tool_use":
            raw = block.get("raw_input")
            arguments = raw if raw is not None else _encode(block["input"])
            call: dict[str, object] = {
                "id": block["id"],
                "type": "function",
                "function": {"name": block["name"], "arguments": arguments},
            }
            extra = cast("Mapping[str, object]", block)  # may carry a provider key
            if "extra_content" in extra:  # Gemini's thought signature, sent back as it came
                call["extra_content"] = extra["extra_content"]
            calls.append(call)
    audio_id, texts = replay_audio(spoken, texts) if spoken else (None, texts)
    if not texts and not calls and audio_id is None:
        return None
    message: dict[str, object] = {
        "role": "assistant",
        "content": "\n".join(texts) if texts else None,
    }
    if audio_id is not None:  # the server still holds the clip: refer to it
        message["audio"] = {"id": audio_id}
    if calls:
        message["tool_calls"] = calls
    if reasoning and thoughts:
        message["reasoning_content"] = "\n".join(thoughts)
    return message


def _tool_messages(results: list[ToolResultBlock]) -> list[dict[str, object]]:
    """One ``role=tool`` message per result.

    Images, audio and documents follow in one user message, since OpenAI tool messages
    carry text only.
    """
    messages: list[dict[str, object]] = []
    images: list[dict[str, object]] = []
    for result in results:
        messages.append(
            {"role": "tool", "tool_call_id": result["id"], "content": result_text(result)}
        )
        if isinstance(result["output"], list):
            media = [b for b in result["output"] if b["type"] != "text"]
            found = [p for p in map(_user_part, media) if p is not None]
            if found:
                what = "Images" if all(b["type"] == "image" for b in media) else "Attachments"
                note = f"{what} returned by tool {result['name']!r} (call {result['id']}):"
                images += [{"type": "text", "text": note}, *found]
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def format_messages(messages: Sequence[Msg], *, reasoning: bool = False) -> list[dict[str, object]]:
    """Convert a conversation to Chat Completions messages.

    Args:
        messages: The conversation.
        reasoning: Send thinking blocks back as ``reasoning_content`` (DeepSeek-style
            servers); otherwise thinking is dropped, as OpenAI does not accept it.

    Returns:
        The ``messages`` array. Blocks are converted by type wherever they are stored,
        whatever the role of the message holding them: tool calls become an assistant
        message's ``tool_calls``, tool results ``role=tool`` messages (a ``role="system"``
        message holding results, as AgentScope stores them, included), images user content.

    Each message's wire form is cached (see ``_WireCache``): a long conversation sends its
    whole history with every request, and only its new or changed messages are converted.
    """
    out = WireMessages()
    sources, used = out.sources, out.entries
    handed: list[dict[str, object]] = []
    cache = _CACHE
    for msg in messages:
        entry = cache.get(msg, reasoning)
        if entry is None:
            entry = cache.put(msg, reasoning, _format_one(msg, reasoning))
        handed += entry
        sources += entry if entry.pristine is None else entry.pristine
        used.append(entry)
    # Shallow copies: a caller changing a message dict of the body must not change the
    # cached form. Nested values are shared with the entry (copying them all costs
    # more than the cache saves); an edit there is caught by comparing with the private
    # ``entry.pristine`` forms, here (``_WireCache.get``) and when encoding (``json_text``).
    out.extend(map(dict, handed))
    return out


_CONTAINERS = (dict, list)


class WireMessages(list[dict[str, object]]):
    """What :func:`format_messages` returns: a plain list of message dicts.

    It remembers the cached forms it was copied from, so that :func:`encode_body` can reuse
    their JSON.
    """

    __slots__ = ("entries", "sources")

    def __init__(self) -> None:
        super().__init__()
        # The cached form of each item, private (never handed out, so never edited).
        self.sources: list[dict[str, object]] = []
        self.entries: list[_Entry] = []  # the cache entries, in order

    def json_text(self) -> str | None:
        """The compact JSON of the list from cached fragments, or None if it was changed."""
        if list.__ne__(self, self.sources):  # an item replaced, added, removed or edited
            # (at any depth: the sources share nothing with the items)
            return None
        parts = []
        for entry in self.entries:
            fragment = entry.json
            if fragment is None:
                pristine = entry if entry.pristine is None else entry.pristine
                fragment = entry.json = ",".join([_compact(m) for m in pristine])
            if fragment:
                parts.append(fragment)
        return "[" + ",".join(parts) + "]"


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# Stands for the messages while the rest of the body is encoded (NULs never occur in a
# model name or setting, and only the first occurrence, the "messages" value, is replaced).
_HOLE = "\x00agentkit:messages\x00"
_HOLE_JSON = _compact(_HOLE)


def encode_body(body: Mapping[str, object]) -> bytes:
    """``dumps(body)``, reusing the cached JSON of the history's messages.

    Byte for byte what ``agentkit.models._http.dumps`` gives; the messages' JSON is
    reused only while ``body["messages"]`` is the unchanged :func:`format_messages` result.
    """
    messages = body.get("messages")
    if type(messages) is WireMessages:
        text = messages.json_text()
        if text is not None:
            encoded = _compact({**body, "messages": _HOLE})
            return encoded.replace(_HOLE_JSON, text, 1).encode()
    return _compact(body).encode()


def format_messages_uncached(
    messages: Sequence[Msg], *, reasoning: bool = False
) -> list[dict[str, object]]:
    """:func:`format_messages` without the cache (the reference the cache must equal)."""
    out: list[dict[str, object]] = []
    for msg in messages:
        out += _format_one(msg, reasoning)
    return out


def _format_one(msg: Msg, reasoning: bool) -> list[dict[str, object]]:
    if isinstance(msg.content, str):
        # An empty system or assistant message is not sent (``sys_prompt=""``); an empty
        # user turn still is: it stands for something the user did.
        if msg.content or msg.role == "user":
            return [{"role": msg.role, "content": msg.content}]
        return []
    return _convert(msg.role, msg.content, reasoning)


def _snapshot(content: str | list[ContentBlock]) -> str | list[dict[str, object]]:
    """What a message's wire form depends on, compared to the live content in C.

    A copy of the blocks down to their strings (see ``copy_json``): a block replaced,
    added or removed, or a value changed at any depth (a tool call's input, a tool result's
    output list, an image's source), makes the content differ. The strings are shared, so
    the comparison of unchanged content finds them identical without reading them.
    """
    if isinstance(content, str):
        return content
    return cast("list[dict[str, object]]", copy_json(content))


def _nested(wire: list[dict[str, object]]) -> bool:
    """Whether a message of ``wire`` holds a dict or list (a loop: no generator to build)."""
    for message in wire:
        for value in message.values():
            if type(value) in _CONTAINERS:
                return True
    return False


class _Entry(list[dict[str, object]]):
    """One cached wire form: the list of its wire messages, and what it was made from.

    The entry is that list itself rather than an object holding it: the collector tracks
    one object per cached message, not two (a full collection walks all 8,192).
    """

    __slots__ = (
        "content",
        "expires",
        "json",
        "msg",
        "pristine",
        "reasoning",
        "role",
        "snapshot",
    )

    def __init__(
        self,
        msg: Msg,
        reasoning: bool,
        role: str,
        content: str | list[ContentBlock],
        snapshot: str | list[dict[str, object]],
        wire: list[dict[str, object]],
    ) -> None:
        super().__init__(wire)  # its nested values are shared with the bodies handed out
        self.msg = msg
        self.reasoning = reasoning
        self.role = role
        self.content = content
        self.snapshot = snapshot
        # A private copy to check the handed-out forms against; only a form with nested
        # values needs one (the bodies hold copies of the message dicts themselves). None:
        # the entry is its own (not ``self``: that would be a cycle, which only the cycle
        # collector frees).
        nested = _nested(wire)
        self.pristine = cast("list[dict[str, object]]", copy_json(wire)) if nested else None
        self.json: str | None = None  # the compact JSON of the private form, made when first sent
        # When an audio id it replays expires: the wire form then holds the transcript.
        self.expires = audio_expiry(content)


class _WireCache:
    """Wire forms of recently sent messages, by message id, bounded (oldest out first).

    An entry holds the message itself, so a message id can only hit for the very object
    that was encoded, checked against its role, content and :func:`_snapshot`. The
    bound caps what the cache keeps alive, whatever the number of conversations.
    """

    __slots__ = ("entries", "max_entries")

    def __init__(self, max_entries: int = 8192) -> None:
        self.max_entries = max_entries
        # Ordered: evicting the oldest is O(1) (a plain dict's first key is found by
        # scanning past the slots of the keys deleted before it).
        self.entries: OrderedDict[str, _Entry] = OrderedDict()

    def get(self, msg: Msg, reasoning: bool) -> _Entry | None:
        """The entry of ``msg``, if its wire form is still valid."""
        entry = self.entries.get(msg.id)
        if (
            entry is None
            or entry.msg is not msg
            or entry.reasoning != reasoning
            or entry.role != msg.role
            or entry.content is not msg.content
            or entry.snapshot != msg.content
            or (entry.pristine is not None and list.__ne__(entry, entry.pristine))  # body edited
            or (entry.expires is not None and time.time() >= entry.expires)
        ):
            return None
        return entry

    def put(self, msg: Msg, reasoning: bool, wire: list[dict[str, object]]) -> _Entry:
        entries = self.entries
        entries.pop(msg.id, None)
        if len(entries) >= self.max_entries:
            entries.popitem(last=False)
        content = msg.content
        entry = _Entry(msg, reasoning, msg.role, content, _snapshot(content), wire)
        entries[msg.id] = entry
        return entry

    def clear(self) -> None:
        self.entries.clear()


_CACHE = _WireCache()


def _convert(role: str, blocks: list[ContentBlock], reasoning: bool) -> list[dict[str, object]]:
    """One stored message as wire messages, in an order that keeps every call answered.

    Results of earlier calls come first; then the message's own text (and its calls, in
    one assistant message); then the results of its own calls; images that the role cannot
    carry follow in a user message.
    """
    others, results = split_tool_results(blocks)
    own_ids = {b["id"] for b in others if b["type"] == "tool_use"}
    out = _tool_messages([r for r in results if r["id"] not in own_ids])
    own_results = _tool_messages([r for r in results if r["id"] in own_ids])
    calls = [b for b in others if b["type"] == "tool_use"]
    spoken = [b for b in others if is_audio_output(b)] if role == "assistant" else []
    media = [b for b in others if b["type"] in ("image", "audio") and not is_audio_output(b)]
    texts = [b for b in others if b["type"] in ("text", "thinking")]
    if role == "user":
        message = _user_message([b for b in others if b["type"] != "tool_use"])
        out += [message] if message is not None else []
        media = []
    elif role == "system":
        text = "\n".join(b["text"] for b in texts if b["type"] == "text")
        out += [{"role": "system", "content": text}] if text else []
    if role == "assistant":
        message = _assistant_message([*texts, *calls, *spoken], reasoning)
    else:
        message = _assistant_message(calls, reasoning=False)
    out += [message] if message is not None else []
    out += own_results
    extra = _user_message(media)
    return out + ([extra] if extra is not None else [])


def format_tool_choice(choice: str) -> str | dict[str, object]:
    """``"auto"``/``"none"``/``"required"`` or a tool name, in OpenAI's format."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}

"""Conversion between agentkit messages and the Anthropic Messages wire format.

Pure functions on dicts: no SDK import. Redacted thinking is kept in agentkit as a thinking
block with an empty ``thinking`` and the opaque payload under ``redacted_data``, so it can be
sent back verbatim.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TypeAlias, TypedDict, cast

from agentkit._ids import new_id
from agentkit._text import StreamText
from agentkit.exceptions import UnsupportedContentError
from agentkit.messages import ContentBlock, Msg, ToolResultBlock
from agentkit.models._base import ChatResponse, ChatUsage, PromptCache, ToolDefinition
from agentkit.models._common import (
    ANTHROPIC_STOP_REASONS,
    clean_body,
    finish_metadata,
    split_tool_results,
    tool_use_block,
)
from agentkit.models._json import JSONObject, JSONValue, arr, count, obj
from agentkit.models._openai_audio import is_audio_output

PROVIDER_ITEMS = "anthropic"
"""The ``provider`` of the ``provider_item`` blocks this format keeps and replays."""

__all__ = [
    "AnthropicStreamState",
    "format_messages",
    "format_tool_choice",
    "format_tools",
    "mark_cache_points",
    "parse_message",
]

WireBlock: TypeAlias = dict[str, object]
"""A block (or tool, or tool choice) as the Messages API takes it; built, then serialized."""


class Turn(TypedDict):
    """One ``messages`` item."""

    role: str
    content: list[WireBlock]


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


def _source(block: Mapping[str, object]) -> WireBlock:
    source = cast("Mapping[str, str]", block["source"])
    if source["type"] == "url":
        return {"type": "url", "url": source["url"]}
    # base64, or a document's plain text (``{"type": "text", "media_type": "text/plain"}``)
    return {"type": source["type"], "media_type": source["media_type"], "data": source["data"]}


def _no_audio(where: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"Anthropic does not accept audio blocks ({where}); transcribe the audio first",
        provider="anthropic",
    )


def _media(block: ContentBlock) -> WireBlock:
    """An image or document block (a document keeps its title)."""
    extra = cast("Mapping[str, object]", block)  # read by key: documents carry options
    out: WireBlock = {"type": extra["type"], "source": _source(extra)}
    if extra["type"] == "document":
        # Document options: a title, extra context, citations on.
        out.update({k: extra[k] for k in ("title", "context", "citations") if k in extra})
    return _with_cache(out, block)


def _with_cache(out: WireBlock, block: Mapping[str, object]) -> WireBlock:
    if "cache_control" in block:  # a prompt-caching hint stored on the block
        out["cache_control"] = block["cache_control"]
    return out


Loads: TypeAlias = Mapping[str, Sequence[str]]
"""Tool result id -> the deferred tools that result loaded (``DeferredTools.loads``)."""


def _result(result: ToolResultBlock, loads: Loads) -> WireBlock:
    output = result["output"]
    content: str | list[WireBlock]
    loaded = loads.get(result["id"])
    if loaded:
        # A tool search's answer: references the API resolves to the deferred definitions
        # (sent with the tools, kept out of the prompt until referenced here).
        content = [{"type": "tool_reference", "tool_name": name} for name in loaded]
    elif isinstance(output, str):
        content = output
    else:
        content = []
        for block in output:
            if block["type"] == "text":
                if block["text"]:
                    content.append({"type": "text", "text": block["text"]})
            elif block["type"] in ("image", "document"):
                content.append(_media(block))
            else:
                raise _no_audio("in a tool result")
    out: WireBlock = {
        "type": "tool_result",
        "tool_use_id": _wire_id(result["id"]),
        "content": content,
    }
    if result.get("is_error"):
        out["is_error"] = True
    return _with_cache(out, cast("Mapping[str, object]", result))


def _block(block: ContentBlock, role: str) -> WireBlock | None:
    extra = cast("Mapping[str, object]", block)  # provider keys (citations...) read by key
    if block["type"] == "text":
        text = block["text"]
        if not text:
            return None
        out_text: WireBlock = {"type": "text", "text": text}
        if extra.get("citations") and role == "assistant":  # replayed as the model cited
            out_text["citations"] = extra["citations"]
        return _with_cache(out_text, extra)
    if block["type"] == "provider_item":
        if block["provider"] != PROVIDER_ITEMS or role != "assistant":
            return None  # another provider's server-side tool: meaningless here
        return dict(block["item"])
    if block["type"] == "thinking":
        if role != "assistant":
            return None
        if "redacted_data" in extra:
            return {"type": "redacted_thinking", "data": extra["redacted_data"]}
        signature = block.get("signature")
        if not signature:
            return None  # thinking from another provider cannot be verified: drop it
        return {"type": "thinking", "thinking": block["thinking"], "signature": signature}
    if block["type"] == "tool_use":
        # Malformed arguments (raw_input) go as {}, keeping the call paired with its error
        # result; the model sees the error and retries.
        arguments = {} if "raw_input" in block else block["input"]
        call_id = _wire_id(block["id"])
        out: WireBlock = {
            "type": "tool_use",
            "id": call_id,
            "name": block["name"],
            "input": arguments,
        }
        return _with_cache(out, extra)
    if block["type"] in ("image", "document"):
        return _media(block)
    if block["type"] == "audio":
        raise _no_audio(f"in a {role} message")
    return None


def _append(turns: list[Turn], role: str, blocks: list[WireBlock]) -> None:
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
    messages: Sequence[Msg], loads: Loads | None = None
) -> tuple[list[WireBlock], list[Turn]]:
    """Convert a conversation to Anthropic's ``(system, messages)``.

    Leading system messages become the ``system`` parameter; a system message later in the
    conversation becomes user text at its place. Blocks are converted by type wherever they
    are stored, whatever the role of the message holding them: tool calls go into assistant
    turns, tool results and images into user turns (a ``role="system"`` message holding
    results, as AgentScope stores them, included); consecutive same-role turns are merged.
    A tool result named in ``loads`` becomes ``tool_reference`` blocks to the tools it
    loaded (native tool search).
    """
    loads = loads or {}
    system: list[WireBlock] = []
    turns: list[Turn] = []
    for msg in messages:
        blocks = msg.get_content_blocks()
        if msg.role == "system" and not turns:
            system += [b for b in (_block(x, "user") for x in blocks) if b and b["type"] == "text"]
            blocks = [b for b in blocks if b["type"] not in ("text", "thinking")]
        _add_message(turns, "assistant" if msg.role == "assistant" else "user", blocks, loads)
    if turns and turns[-1]["role"] == "assistant":
        _trim_prefill(turns)
    return system, turns


def _add_message(turns: list[Turn], role: str, blocks: list[ContentBlock], loads: Loads) -> None:
    """One stored message as turns, in an order that keeps every call answered.

    Results of earlier calls come first; then the message's own content (its calls in an
    assistant turn); then the results of its own calls; images of an assistant message
    follow in a user turn, since assistant turns cannot carry them.
    """
    others, results = split_tool_results(blocks)
    own_ids = {b["id"] for b in others if b["type"] == "tool_use"}
    _append(turns, "user", [_result(r, loads) for r in results if r["id"] not in own_ids])
    calls = [b for b in others if b["type"] == "tool_use"]
    if role == "assistant":
        # Audio a model spoke (OpenAI Chat audio output) is left out: its transcript is a
        # text block beside it.
        others = [b for b in others if not is_audio_output(b)]
        media = [b for b in others if b["type"] in ("image", "audio")]
        kept = [b for b in others if b["type"] not in ("image", "audio")]
        _append(turns, "assistant", _blocks(kept, "assistant"))
    else:
        media = []
        _append(turns, "user", _blocks([b for b in others if b["type"] != "tool_use"], "user"))
        _append(turns, "assistant", _blocks(calls, "assistant"))
    _append(turns, "user", [_result(r, loads) for r in results if r["id"] in own_ids])
    _append(turns, "user", _blocks(media, "user"))


def _blocks(blocks: Sequence[ContentBlock], role: str) -> list[WireBlock]:
    return [b for b in (_block(x, role) for x in blocks) if b is not None]


def _trim_prefill(turns: list[Turn]) -> None:
    """Trim the trailing whitespace of a final assistant turn.

    Such a turn is a prefill the model continues (e.g. a partial answer kept by an
    interrupt), and the API rejects one that ends in whitespace.
    """
    blocks = turns[-1]["content"]
    if blocks and blocks[-1]["type"] == "text":
        text = str(blocks[-1]["text"]).rstrip()
        if text:
            blocks[-1] = {**blocks[-1], "text": text}
        else:
            blocks.pop()
    if not blocks:
        turns.pop()


def format_tools(
    tools: Sequence[ToolDefinition],
    builtin: Sequence[Mapping[str, object]] = (),
    deferred: Sequence[ToolDefinition] = (),
) -> list[WireBlock]:
    """Function tools as Anthropic tool definitions, then the server tools as given.

    A server tool spec (``web_search_20250305``...) is sent unchanged. ``deferred`` tools
    follow, marked ``defer_loading: true``: the API keeps them out of the prompt until a
    ``tool_reference`` in a tool result loads them. They come last so that the offered
    tools' bytes, and so a cache point after them, do not depend on them.
    """
    out: list[WireBlock] = []
    for tool in tools:
        out.append(_tool(tool))
    out += [dict(spec) for spec in builtin]
    offered = {tool.name for tool in tools}
    out += [{**_tool(t), "defer_loading": True} for t in deferred if t.name not in offered]
    return out


def _tool(tool: ToolDefinition) -> WireBlock:
    schema = tool.parameters or {"type": "object", "properties": {}}
    converted: WireBlock = {"name": tool.name, "input_schema": schema}
    if tool.description:
        converted["description"] = tool.description
    return converted


MAX_CACHE_POINTS = 4
"""Cache breakpoints one Messages request may hold (the API refuses a fifth)."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def _count_marks(value: object) -> int:
    """The ``cache_control`` breakpoints in ``value`` (blocks, tools, nested tool results)."""
    if isinstance(value, list):
        return sum(_count_marks(item) for item in value)
    if not isinstance(value, dict):
        return 0
    own = 1 if "cache_control" in value else 0
    content = value.get("content")
    return own + (_count_marks(content) if isinstance(content, list) else 0)


def _markable(block: object) -> bool:
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))  # empty text takes none


def mark_cache_points(body: dict[str, object], cache: PromptCache) -> None:
    """Put ``cache`` as ``cache_control`` breakpoints into a Messages request ``body``.

    In the API's prefix order: after the last tool, after the system prompt, then on the
    last block of the last two user turns. The last user turn's point is where the next
    request reads from; the one before it is where this request's previous one put its
    point, left in place so that the serialized request up to it stays byte-identical (and
    so that a tool loop adding more than the API's 20-block lookback still hits it).
    Breakpoints the caller put on blocks count against the limit of four; ours that do not
    fit are left out, the latest user turn's kept first. Wire blocks may be shared with a
    cache of formatted messages: marked ones are copied, never changed in place.
    """
    points = cache.get("points", ("tools", "system", "messages"))
    control: WireBlock = {"type": "ephemeral"}
    if cache.get("ttl") == "1h":
        control["ttl"] = "1h"
    tools, system, turns = body.get("tools"), body.get("system"), body.get("messages")
    free = MAX_CACHE_POINTS - _count_marks([tools, system, turns])
    free -= 1 if "cache_control" in body else 0  # automatic caching's breakpoint
    places: list[tuple[list[object], int]] = []  # (list, index of the block to mark)
    for name, blocks in (("tools", tools), ("system", system)):
        if name not in points or not isinstance(blocks, list):
            continue
        # Deferred tools (``defer_loading``) are not part of the prompt's prefix: the
        # tools' point goes on the last tool that is.
        at = next(
            (
                i
                for i in range(len(blocks) - 1, -1, -1)
                if not (isinstance(blocks[i], dict) and blocks[i].get("defer_loading"))
            ),
            None,
        )
        if at is not None and _markable(blocks[at]) and "cache_control" not in blocks[at]:
            places.append((blocks, at))
    if "messages" in points and isinstance(turns, list):
        user = [i for i, t in enumerate(turns) if isinstance(t, dict) and t["role"] == "user"]
        for i in reversed(user[-2:]):  # the latest first: it matters most
            content = turns[i]["content"]
            last = next((j for j in range(len(content) - 1, -1, -1) if _markable(content[j])), None)
            if last is not None and "cache_control" not in content[last]:
                turns[i] = {**turns[i], "content": list(content)}  # a copy of the turn
                places.append((turns[i]["content"], last))
    if len(places) > free:  # tools and system first: the latest user turn before the older
        places = places[: max(free, 0)]
    for blocks, index in places:
        blocks[index] = {**cast(WireBlock, blocks[index]), "cache_control": dict(control)}


def format_tool_choice(choice: str | None, parallel: bool | None) -> WireBlock | None:
    """Map a tool choice (and ``parallel_tool_calls=False``) to Anthropic's ``tool_choice``."""
    if choice is None and parallel is not False:
        return None
    mapping = {None: "auto", "auto": "auto", "none": "none", "required": "any"}
    out: WireBlock = (
        {"type": mapping[choice]} if choice in mapping else {"type": "tool", "name": choice}
    )
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _usage(data: JSONObject, elapsed: float) -> ChatUsage:
    counts = {key: count(data.get(key), f"usage.{key}") for key in _USAGE_KEYS}
    # ``cache_creation`` splits the writes by lifetime (a one-hour write costs more).
    split = obj(data.get("cache_creation"))
    long_writes = count(
        split.get("ephemeral_1h_input_tokens"), "usage.cache_creation.ephemeral_1h_input_tokens"
    )
    return ChatUsage(
        sum(counts.values()) - counts["output_tokens"],  # cache reads and writes included
        counts["output_tokens"],
        elapsed,
        cache_read_tokens=counts["cache_read_input_tokens"],
        cache_write_tokens=counts["cache_creation_input_tokens"],
        cache_write_1h_tokens=min(long_writes, counts["cache_creation_input_tokens"]),
    )


_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _content_block(block: JSONObject) -> ContentBlock | None:
    kind = block.get("type")
    if kind == "text":
        text: dict[str, object] = {"type": "text", "text": block.get("text") or ""}
        if block.get("citations"):
            text["citations"] = block["citations"]
        return cast(ContentBlock, text)
    if kind == "thinking":
        out: dict[str, object] = {"type": "thinking", "thinking": block.get("thinking") or ""}
        if block.get("signature"):
            out["signature"] = block["signature"]
        return cast(ContentBlock, out)
    if kind == "redacted_thinking":
        redacted = {"type": "thinking", "thinking": "", "redacted_data": block.get("data", "")}
        return cast(ContentBlock, redacted)
    if kind == "tool_use":
        value = block.get("input")
        raw = json.dumps(value) if not isinstance(value, dict) else ""
        call_id = block.get("id")
        name = str(block.get("name") or "")
        result = tool_use_block(None if call_id is None else str(call_id), name, raw, final=True)
        if isinstance(value, dict):
            result["input"] = value
        return result
    if isinstance(kind, str) and kind not in _TRANSIENT:
        # Server tools (web search, code execution, MCP connector...) and future types:
        # kept verbatim and replayed, so the model sees what its own tools did.
        item = {k: v for k, v in block.items() if k != "raw"}
        return cast(
            ContentBlock, {"type": "provider_item", "provider": PROVIDER_ITEMS, "item": item}
        )
    return None


_TRANSIENT = frozenset(("ping",))


def parse_message(data: JSONObject, elapsed: float) -> ChatResponse:
    """Build a ``ChatResponse`` from a non-streaming ``message`` body."""
    data = obj(clean_body(data))
    blocks = (_content_block(obj(b)) for b in arr(data.get("content")))
    content = [b for b in blocks if b is not None]
    return ChatResponse(
        content=content,
        usage=_usage(obj(data.get("usage")), elapsed),
        id=str(data.get("id") or new_id()),
        metadata=finish_metadata(data.get("stop_reason"), ANTHROPIC_STOP_REASONS),
    )


class AnthropicStreamState:
    """Accumulates Messages stream events into cumulative snapshots."""

    __slots__ = ("blocks", "finish_reason", "id", "stopped", "texts", "usage_data")

    def __init__(self) -> None:
        self.id = new_id()
        # index -> mutable Anthropic-style block; tool_use blocks accumulate "raw"
        self.blocks: dict[int, JSONObject] = {}
        self.stopped: set[int] = set()
        # (index, "text" | "thinking") -> the streamed text, joined as valid Unicode
        self.texts: dict[tuple[int, str], StreamText] = {}
        self.finish_reason: str | None = None
        self.usage_data: JSONObject = {}

    def feed(self, event: JSONObject) -> bool:
        """Apply one event; return whether the visible content changed."""
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(_index(event.get("index", 0)), obj(event.get("delta")))
        if kind == "content_block_start":
            block = obj(clean_body(dict(obj(event.get("content_block")))))
            start_input = block.get("input")
            # The API starts tool input at {} and streams it; a proxy may send it whole here.
            block["raw"] = (
                json.dumps(start_input) if isinstance(start_input, dict) and start_input else ""
            )
            self.blocks[_index(event.get("index", len(self.blocks)))] = block
            return True
        if kind == "content_block_stop":
            index = _index(event.get("index", 0))
            self.stopped.add(index)
            return self.blocks.get(index, {}).get("type") == "tool_use"
        if kind == "message_start":
            message = obj(event.get("message"))
            self.id = str(message.get("id") or self.id)
            self.usage_data.update(obj(message.get("usage")))
        elif kind == "message_delta":
            reason = obj(event.get("delta")).get("stop_reason")
            self.finish_reason = str(reason) if reason else self.finish_reason
            usage = obj(event.get("usage"))
            self.usage_data.update({k: v for k, v in usage.items() if v is not None})
        return False

    def _delta(self, index: int, delta: JSONObject) -> bool:
        block = self.blocks.get(index)
        if block is None:
            return False
        kind = delta.get("type")
        if kind in ("text_delta", "thinking_delta"):
            key = "text" if kind == "text_delta" else "thinking"
            stream = self.texts.get((index, key))
            if stream is None:
                stream = self.texts[(index, key)] = StreamText()
                stream.add(str(block.get(key) or ""))
            stream.add(str(delta.get(key) or ""))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature", "")
            return False
        elif kind == "input_json_delta":
            block["raw"] = str(block["raw"]) + str(delta.get("partial_json", ""))
            if block.get("type") != "tool_use":  # a server tool's input: shown when complete
                return False
        elif kind == "citations_delta":
            citations = block.setdefault("citations", [])
            if not isinstance(citations, list):
                raise TypeError("citations is not a list")
            citations.append(delta.get("citation"))
        else:
            return False
        return True

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The cumulative response so far (``final`` adds usage and finish reason)."""
        content: list[ContentBlock] = []
        for (index, key), stream in self.texts.items():
            self.blocks[index][key] = stream.value(final=final)
        for index in sorted(self.blocks):
            block = self.blocks[index]
            raw = str(block.get("raw") or "")
            if block.get("type") == "tool_use":
                done = final or index in self.stopped
                call_id = block.get("id")
                content.append(
                    tool_use_block(
                        None if call_id is None else str(call_id),
                        str(block.get("name") or ""),
                        raw,
                        final=done,
                    )
                )
            else:
                if raw and "input" in block:  # a server tool's streamed input
                    with contextlib.suppress(ValueError):
                        block["input"] = json.loads(raw)
                converted = _content_block(block)
                if converted is not None:
                    content.append(converted)
        response = ChatResponse(content=content, id=self.id)
        if final:
            response.usage = _usage(self.usage_data, elapsed)
            response.metadata = finish_metadata(self.finish_reason, ANTHROPIC_STOP_REASONS)
        return response


def _index(value: JSONValue) -> int:
    if isinstance(value, int):
        return value
    raise TypeError(f"expected an index, got {type(value).__name__}")

"""Conversion between agentkit messages and Amazon Bedrock's Converse format.

Requests are built as the AWS SDK's parameter dicts (camelCase keys, blobs as ``bytes``:
botocore base64-encodes them on the wire). Answers are read from the SDK's parsed dicts: a
``Converse`` output, or the events of a ``ConverseStream`` (one dict per event-stream frame,
keyed by the event type).

Reasoning is kept as agentkit ``thinking`` blocks: ``reasoningText.signature`` as the block's
``signature``, ``redactedContent`` as an empty block with the bytes under ``redacted_data``
(base64), the shape the Anthropic adapter uses, so both replay what the model sent.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypedDict, cast

from agentkit._text import clean_text
from agentkit.exceptions import ModelResponseError, UnsupportedContentError
from agentkit.messages import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Msg,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentkit.models._base import ChatResponse, ChatUsage, PromptCache, ToolChoice, ToolDefinition
from agentkit.models._common import finish_metadata, tool_use_block
from agentkit.models._json import count

__all__ = [
    "CONVERSE_FINISH_REASONS",
    "ConverseState",
    "add_cache_points",
    "format_messages",
    "format_tool_config",
]

Wire: TypeAlias = dict[str, object]

# Converse's stopReason -> agentkit's finish_reason.
_FINISH: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    # The model's answer did not parse (as Gemini's MALFORMED_FUNCTION_CALL reads).
    "malformed_tool_use": "malformed_function_call",
    "malformed_model_output": "error",
}
CONVERSE_FINISH_REASONS = frozenset(_FINISH.values())
"""The finish reasons ``BedrockConverseModel`` reports (any other value reads ``"other"``)."""

_IMAGE_FORMATS = {"png", "jpeg", "gif", "webp"}
_DOC_FORMATS = {"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"}
_DOC_MIME = {
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "text/html": "html",
    "application/msword": "doc",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}


# -- requests -------------------------------------------------------------------------------
def _bytes(data: str, kind: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as err:
        raise UnsupportedContentError(f"bedrock: a {kind} block's data is not base64") from err


def _media_source(source: Mapping[str, str], kind: str) -> Wire:
    if source["type"] == "url":
        url = source["url"]
        if not url.startswith("s3://"):
            # Converse takes bytes or an S3 location, never an http(s) URL.
            raise UnsupportedContentError(
                f"bedrock: a {kind} by URL must be an s3:// location (got {url[:60]!r})"
            )
        return {"s3Location": {"uri": url}}
    return {"bytes": _bytes(source["data"], kind)}


def _media(block: ImageBlock | AudioBlock | DocumentBlock, index: int) -> Wire:
    """An image or document block as a Converse content block."""
    kind = block["type"]
    source = cast("Mapping[str, str]", block["source"])
    mime = source.get("media_type") or mimetypes.guess_type(source.get("url", ""))[0] or ""
    if kind == "image":
        fmt = mime.rpartition("/")[2] if mime else "png"
        fmt = "jpeg" if fmt == "jpg" else fmt
        if fmt not in _IMAGE_FORMATS:
            raise UnsupportedContentError(f"bedrock: image type {mime!r} is not accepted")
        return {"image": {"format": fmt, "source": _media_source(source, "image")}}
    if kind == "document":
        name = _document_name(block, index)
        if source["type"] == "text":
            return {"document": {"format": "txt", "name": name, "source": {"text": source["data"]}}}
        fmt = _DOC_MIME.get(mime, mime.rpartition("/")[2] if mime else "pdf")
        if fmt not in _DOC_FORMATS:
            raise UnsupportedContentError(f"bedrock: document type {mime!r} is not accepted")
        return {"document": {"format": fmt, "name": name, "source": _media_source(source, kind)}}
    raise UnsupportedContentError(f"bedrock: Converse takes no {kind} blocks")


def _document_name(block: Mapping[str, object], index: int) -> str:
    """A document name as Converse allows it (letters, digits, single spaces, ``-()[]``)."""
    raw = str(block.get("title") or "")
    if not raw and block.get("filename"):
        filename = str(block["filename"])
        raw = filename.rpartition(".")[0] or filename  # the format says the extension
    kept = "".join(c if c.isalnum() or c in " -()[]" else "-" for c in raw)
    name = " ".join(kept.split())[:200]
    return name or f"document-{index}"


def _result(block: ToolResultBlock, index: int) -> Wire:
    output = block["output"]
    content: list[Wire] = []
    if isinstance(output, str):
        content.append({"text": output})
    else:
        for item in output:
            if item["type"] == "text":
                content.append({"text": item["text"]})
            else:
                content.append(_media(item, index))
    result: Wire = {"toolUseId": block["id"], "content": content or [{"text": ""}]}
    result["status"] = "error" if block.get("is_error") else "success"
    return {"toolResult": result}


def _thinking(block: ThinkingBlock) -> Wire | None:
    extra = cast("Mapping[str, object]", block)
    redacted = extra.get("redacted_data")
    if isinstance(redacted, str) and redacted:
        return {"reasoningContent": {"redactedContent": _bytes(redacted, "thinking")}}
    signature = block.get("signature")
    if not signature:
        return None  # another provider's (or unsigned) thinking: the API would refuse it
    return {
        "reasoningContent": {"reasoningText": {"text": block["thinking"], "signature": signature}}
    }


def _call(block: ToolUseBlock) -> Wire:
    arguments = {} if "raw_input" in block else block["input"]
    return {"toolUse": {"toolUseId": block["id"], "name": block["name"], "input": arguments}}


def _blocks(blocks: Sequence[ContentBlock], role: str, counter: list[int]) -> list[Wire]:
    out: list[Wire] = []
    for block in blocks:
        if block["type"] == "text":
            if block["text"]:
                out.append({"text": block["text"]})
        elif block["type"] == "thinking":
            wire = _thinking(block) if role == "assistant" else None
            if wire is not None:
                out.append(wire)
        elif block["type"] == "tool_use":
            if role == "assistant":
                out.append(_call(block))
        elif block["type"] == "tool_result":
            if role != "user":
                continue
            counter[0] += 1
            out.append(_result(block, counter[0]))
        elif block["type"] == "image" or block["type"] == "document":
            counter[0] += 1
            out.append(_media(block, counter[0]))
        elif block["type"] == "audio":
            raise UnsupportedContentError("bedrock: Converse takes no audio input")
        # provider items of other providers: left out
    return out


class Turn(TypedDict):
    """A Converse ``Message``: a role and its content blocks."""

    role: str
    content: list[Wire]


def _append(turns: list[Turn], role: str, content: list[Wire]) -> None:
    if not content:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(content)
    else:
        turns.append({"role": role, "content": content})


def format_messages(messages: Sequence[Msg]) -> tuple[list[Wire], list[Turn]]:
    """A conversation as Converse's ``(system, messages)``.

    Leading system messages become ``system`` text blocks (none when empty); a later system
    message is user text at its place. Tool calls go into ``assistant`` turns and tool
    results (wherever they are stored) into ``user`` turns, results first; consecutive
    turns of one role are merged (Converse requires alternating roles).
    """
    system: list[Wire] = []
    turns: list[Turn] = []
    counter = [0]
    for msg in messages:
        blocks = msg.get_content_blocks()
        results = [b for b in blocks if b["type"] == "tool_result"]
        others = [b for b in blocks if b["type"] != "tool_result"]
        if msg.role == "system" and not turns:
            system.extend({"text": b["text"]} for b in others if b["type"] == "text" and b["text"])
            _append(turns, "user", _blocks(results, "user", counter))
        elif msg.role == "assistant":
            _append(turns, "assistant", _blocks(others, "assistant", counter))
            _append(turns, "user", _blocks(results, "user", counter))
        else:
            calls = [b for b in others if b["type"] == "tool_use"]
            _append(turns, "assistant", _blocks(calls, "assistant", counter))
            rest = [b for b in others if b["type"] != "tool_use"]
            _append(
                turns, "user", _blocks(results, "user", counter) + _blocks(rest, "user", counter)
            )
    return system, turns


def format_tool_config(
    tools: Sequence[ToolDefinition],
    choice: ToolChoice | None,
    builtin: Sequence[Mapping[str, object]] = (),
) -> Wire | None:
    """Tools and ``tool_choice`` as Converse's ``toolConfig`` (None: no tools, or ``none``).

    Converse has no "none" choice: with ``tool_choice="none"`` the tools are not sent (a
    conversation that already holds tool blocks keeps them, which the API accepts only
    with a ``toolConfig``, so then the tools are sent with ``auto``). A built-in spec
    (``{"systemTool": {...}}``, ``{"cachePoint": {...}}``) is sent as it is, after the
    function tools.
    """
    specs: list[Wire] = []
    for tool in tools:
        spec: Wire = {"name": tool.name, "inputSchema": {"json": dict(tool.parameters)}}
        if tool.description:
            spec["description"] = tool.description
        if tool.strict is not None:
            spec["strict"] = tool.strict
        specs.append({"toolSpec": spec})
    specs += [dict(b) for b in builtin]
    if not specs:
        return None
    config: Wire = {"tools": specs}
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice not in (None, "auto", "none"):
        config["toolChoice"] = {"tool": {"name": choice}}
    return config


MAX_CACHE_POINTS = 4
"""``cachePoint`` blocks one Converse request may hold."""


def _points_in(blocks: object) -> int:
    return (
        sum(1 for b in blocks if isinstance(b, dict) and "cachePoint" in b)
        if isinstance(blocks, list)
        else 0
    )


def add_cache_points(params: dict[str, Any], cache: PromptCache, model_id: str) -> None:
    """Put ``cache`` as ``cachePoint`` blocks into Converse ``params``.

    In Converse's prefix order: after the tools (``toolConfig.tools``), after the system
    prompt, then at the end of the last two user turns: the latest is where the next request
    reads from, the one before is where the previous request put its point (left in place,
    so the request up to it stays byte-identical). Amazon Nova models cache the system
    prompt and messages but not tools: no tools point for them. Points already in the
    request count against the limit of four; ours that do not fit are left out, the latest
    user turn's kept first. Turns are copied before a point is added, never changed in place.
    """
    wanted = cache.get("points", ("tools", "system", "messages"))
    point: Wire = {"type": "default"}
    if cache.get("ttl") == "1h":
        point["ttl"] = "1h"
    tool_config = params.get("toolConfig")
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    system, turns = params.get("system"), params.get("messages")
    user = [i for i, t in enumerate(turns or []) if t.get("role") == "user" and t["content"]]
    used = _points_in(tools) + _points_in(system)
    used += sum(_points_in(t.get("content")) for t in turns or [])
    free = MAX_CACHE_POINTS - used
    places: list[str | int] = []  # "tools", "system", or the index of a user turn
    nova = "nova" in model_id.lower()  # Nova caches system and messages, not tools
    if "tools" in wanted and tools and not nova and "cachePoint" not in tools[-1]:
        places.append("tools")
    if "system" in wanted and system and "cachePoint" not in system[-1]:
        places.append("system")
    if "messages" in wanted and isinstance(turns, list):
        for i in reversed(user[-2:]):  # the latest first: it matters most
            if "cachePoint" not in turns[i]["content"][-1]:
                places.append(i)
    for place in places[: max(free, 0)]:
        block: Wire = {"cachePoint": dict(point)}
        if place == "tools" and isinstance(tool_config, dict) and tools:
            params["toolConfig"] = {**tool_config, "tools": [*tools, block]}
        elif place == "system" and system:
            params["system"] = [*system, block]
        elif isinstance(place, int) and isinstance(turns, list):
            turns[place] = {**turns[place], "content": [*turns[place]["content"], block]}


# -- answers --------------------------------------------------------------------------------
def _usage(data: Mapping[str, Any], elapsed: float) -> ChatUsage:
    """Converse usage: ``inputTokens`` leaves the cached tokens out; agentkit counts them in.

    ``cacheDetails`` splits the writes by lifetime (``[{"ttl": "1h", "inputTokens": n}]``).
    """
    plain = count(data.get("inputTokens"), "usage.inputTokens")
    output = count(data.get("outputTokens"), "usage.outputTokens")
    read = count(data.get("cacheReadInputTokens"), "usage.cacheReadInputTokens")
    write = count(data.get("cacheWriteInputTokens"), "usage.cacheWriteInputTokens")
    details = data.get("cacheDetails")
    long_writes = sum(
        count(d.get("inputTokens"), "usage.cacheDetails.inputTokens")
        for d in (details if isinstance(details, list) else [])
        if isinstance(d, dict) and d.get("ttl") == "1h"
    )
    return ChatUsage(
        plain + read + write,
        output,
        elapsed,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_1h_tokens=min(long_writes, write),
    )


# ConverseStream events and the members the API reference marks required.
_EVENT_MEMBERS: dict[str, tuple[str, ...]] = {
    "messageStart": ("role",),
    "contentBlockStart": ("start", "contentBlockIndex"),
    "contentBlockDelta": ("delta", "contentBlockIndex"),
    "contentBlockStop": ("contentBlockIndex",),
    "messageStop": ("stopReason",),
    "metadata": ("usage",),
}


def _require(data: object, members: Sequence[str], what: str) -> None:
    missing = [m for m in members if not isinstance(data, Mapping) or m not in data]
    if missing:
        raise ModelResponseError(
            f"{what} lacks {', '.join(missing)} (a body or event that is not the API's JSON)"
        )


class ConverseState:
    """Accumulates a Converse answer (whole, or ConverseStream events) into ``ChatResponse``s."""

    def __init__(self) -> None:
        self.blocks: dict[int, ContentBlock] = {}
        self.arguments: dict[int, str] = {}
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.metrics: Mapping[str, Any] | None = None
        self.trace: Mapping[str, Any] | None = None
        self.extra: Mapping[str, Any] | None = None
        self.stopped = False

    # -- a whole Converse answer ----------------------------------------------------------
    def feed_response(self, answer: Mapping[str, Any]) -> None:
        """Read a ``Converse`` output (the SDK's parsed dict).

        Raises:
            ModelResponseError: an answer without the members the API reference requires
                (``output``, ``stopReason``), as botocore leaves a body that is not JSON.
        """
        _require(answer, ("output", "stopReason"), "the Converse answer")
        message = (answer.get("output") or {}).get("message") or {}
        for index, block in enumerate(message.get("content") or ()):
            parsed = self._whole(block)
            if parsed is not None:
                self.blocks[index] = parsed
        self.finish_reason = answer.get("stopReason")
        self.usage = answer.get("usage")
        self.metrics = answer.get("metrics")
        self.trace = answer.get("trace")
        self.extra = answer.get("additionalModelResponseFields")
        self.stopped = True

    def _whole(self, block: Mapping[str, Any]) -> ContentBlock | None:
        if "text" in block:
            return {"type": "text", "text": clean_text(block["text"])}
        if "toolUse" in block:
            call = block["toolUse"]
            raw = json.dumps(call.get("input", {}), ensure_ascii=False)
            return tool_use_block(call.get("toolUseId"), call.get("name", ""), raw, final=True)
        if "reasoningContent" in block:
            reasoning = block["reasoningContent"]
            if "redactedContent" in reasoning:
                data = base64.b64encode(reasoning["redactedContent"]).decode("ascii")
                redacted = {"type": "thinking", "thinking": "", "redacted_data": data}
                return cast("ContentBlock", redacted)
            text = reasoning.get("reasoningText") or {}
            thinking: ThinkingBlock = {"type": "thinking", "thinking": text.get("text", "")}
            if text.get("signature"):
                thinking["signature"] = text["signature"]
            return thinking
        if "image" in block:
            image = block["image"]
            blob: object = (image.get("source") or {}).get("bytes")
            if isinstance(blob, bytes):
                source = {
                    "type": "base64",
                    "media_type": f"image/{image.get('format', 'png')}",
                    "data": base64.b64encode(blob).decode("ascii"),
                }
                return cast("ContentBlock", {"type": "image", "source": source})
        return None  # citations, guard content...: not shown

    # -- ConverseStream events ------------------------------------------------------------
    def feed(self, event: Mapping[str, Any]) -> bool:
        """Add one ConverseStream event; True when the answer shown changed.

        Raises:
            ModelResponseError: an event without its required members (botocore decodes
                an event whose payload is not JSON as an empty one).
        """
        for kind, members in _EVENT_MEMBERS.items():
            if kind in event:
                _require(event[kind], members, f"the {kind} event")
        if "contentBlockStart" in event:
            data = event["contentBlockStart"]
            start = data.get("start") or {}
            index = data.get("contentBlockIndex", len(self.blocks))
            if "toolUse" in start:
                call = start["toolUse"]
                self.arguments[index] = ""
                block = tool_use_block(call.get("toolUseId"), call.get("name", ""), "", final=False)
                self.blocks[index] = block
                return True
            return False
        if "contentBlockDelta" in event:
            data = event["contentBlockDelta"]
            return self._delta(data.get("contentBlockIndex", 0), data.get("delta") or {})
        if "contentBlockStop" in event:
            index = event["contentBlockStop"].get("contentBlockIndex", 0)
            if index in self.arguments:
                old = cast("ToolUseBlock", self.blocks[index])
                raw = self.arguments.pop(index)
                self.blocks[index] = tool_use_block(old["id"], old["name"], raw, final=True)
            return False
        if "messageStop" in event:
            data = event["messageStop"]
            self.finish_reason = data.get("stopReason")
            self.extra = data.get("additionalModelResponseFields")
            self.stopped = True
            return False
        if "metadata" in event:
            data = event["metadata"]
            self.usage = data.get("usage")
            self.metrics = data.get("metrics")
            self.trace = data.get("trace")
        return False

    def _delta(self, index: int, delta: Mapping[str, Any]) -> bool:
        if "text" in delta:
            text = clean_text(delta["text"])
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            if block["type"] == "text":
                block["text"] += text
            return bool(text)
        if "toolUse" in delta:
            if index not in self.arguments:
                return False  # a delta without its start: nothing to attach it to
            self.arguments[index] += delta["toolUse"].get("input", "")
            old = cast("ToolUseBlock", self.blocks[index])
            raw = self.arguments[index]
            self.blocks[index] = tool_use_block(old["id"], old["name"], raw, final=False)
            return True
        if "reasoningContent" in delta:
            reasoning = delta["reasoningContent"]
            block = self.blocks.setdefault(index, {"type": "thinking", "thinking": ""})
            if block["type"] != "thinking":
                return False
            if "text" in reasoning:
                block["thinking"] += clean_text(reasoning["text"])
                return bool(reasoning["text"])
            if "signature" in reasoning:
                block["signature"] = block.get("signature", "") + reasoning["signature"]
            if "redactedContent" in reasoning:
                data = base64.b64encode(reasoning["redactedContent"]).decode("ascii")
                extra = cast("dict[str, object]", block)
                extra["redacted_data"] = str(extra.get("redacted_data", "")) + data
        return False

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The answer so far (``final``: complete, with usage, finish reason and trace)."""
        content = [cast(ContentBlock, dict(self.blocks[i])) for i in sorted(self.blocks)]
        response = ChatResponse(content=content)
        if not final:
            return response
        if self.usage is not None:
            response.usage = _usage(self.usage, elapsed)
        reason = self.finish_reason
        mapped = _FINISH.get(reason, reason) if reason is not None else None
        metadata: dict[str, object] = dict(finish_metadata(mapped, CONVERSE_FINISH_REASONS))
        if reason is not None and reason not in ("end_turn", "tool_use"):
            metadata.setdefault("provider_finish_reason", reason)
        if self.trace:
            metadata["trace"] = dict(self.trace)
            if "guardrail" in self.trace:
                metadata["guardrail"] = self.trace["guardrail"]
        if self.metrics and "latencyMs" in self.metrics:
            metadata["latency_ms"] = self.metrics["latencyMs"]
        if self.extra:
            metadata["additional_model_response_fields"] = dict(self.extra)
        response.metadata = metadata
        return response

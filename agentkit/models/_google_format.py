"""Conversion between agentkit messages and Gemini's ``generateContent`` format.

Requests are built as the ``google-genai`` SDK's dict forms (snake_case keys; the SDK turns
them into the REST JSON). Answers are read from the SDK's typed ``GenerateContentResponse``
objects, one per streamed chunk (a non-streamed answer is one chunk).

Gemini's ``thought_signature`` (opaque bytes on a part, which must be sent back on that same
part in later turns) is kept on agentkit blocks as
``extra_content = {"google": {"thought_signature": "<base64>"}}``: the key and shape the
Gemini OpenAI-compatible endpoint uses, so a conversation moves between the two adapters
with its signatures.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NotRequired, TypeAlias, TypedDict, cast

from agentkit._text import clean_text
from agentkit.exceptions import UnsupportedContentError
from agentkit.messages import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
)
from agentkit.models._base import ChatResponse, ChatUsage, ToolChoice, ToolDefinition
from agentkit.models._common import finish_metadata, tool_use_block
from agentkit.models._json import count

if TYPE_CHECKING:
    from google.genai import types

__all__ = [
    "GEMINI_FINISH_REASONS",
    "SKIP_SIGNATURE",
    "GoogleStreamState",
    "format_contents",
    "format_tool_config",
    "format_tools",
    "signature_of",
    "use_cached_content",
]

WirePart: TypeAlias = dict[str, object]
"""A ``Part`` in the SDK's dict form."""
_IN_THE_CACHE = ("system_instruction", "tools", "tool_config")
"""What a ``CachedContent`` holds and a request that uses one must not set again."""


def use_cached_content(config: dict[str, object]) -> None:
    """Leave out of ``config`` what its explicit cache (``cached_content``) already holds.

    Gemini's explicit caches (``client.caches.create(...)``) hold the system instruction,
    the tools and the tool config; the API refuses a request that names a cache and sets
    any of them again (400 "CachedContent can not be used with GenerateContent request
    setting system_instruction, tools or tool_config"). Without ``cached_content`` nothing
    changes: Gemini's implicit caching needs no marks.
    """
    if config.get("cached_content"):
        for key in _IN_THE_CACHE:
            config.pop(key, None)


class WireContent(TypedDict):
    """A ``Content`` (``{"role": ..., "parts": [...]}``) in the SDK's dict form."""

    parts: list[WirePart]
    role: NotRequired[str]  # none on the system instruction


SKIP_SIGNATURE = b"skip_thought_signature_validator"
"""The placeholder signature Google documents for function calls that did not come from
Gemini (a conversation started with another provider): Gemini 3 rejects a model turn whose
first function call has no signature."""

# Gemini's finish reasons -> what agentkit reports (``finish_reason``); the provider's own
# value is kept as ``provider_finish_reason`` for every reason that is not a plain stop.
_FINISH: dict[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "MALFORMED_FUNCTION_CALL": "malformed_function_call",
    "UNEXPECTED_TOOL_CALL": "malformed_function_call",
    "TOO_MANY_TOOL_CALLS": "malformed_function_call",
    "MISSING_THOUGHT_SIGNATURE": "error",
    "NO_IMAGE": "stop",
    "OTHER": "other",
    "IMAGE_OTHER": "other",
}
GEMINI_FINISH_REASONS = frozenset(
    ("stop", "length", "tool_calls", "content_filter", "malformed_function_call", "error")
)
"""The finish reasons ``GoogleModel`` reports (any other Gemini value reads ``"other"``)."""


# -- requests -------------------------------------------------------------------------------
def signature_of(block: Mapping[str, object]) -> bytes | None:
    """The Gemini thought signature a block carries (None: none, or not a valid one)."""
    extra = block.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    value = google.get("thought_signature") if isinstance(google, dict) else None
    if not isinstance(value, str) or not value:
        return None
    # Either alphabet: the SDK sends bytes URL-safe, the OpenAI-compatible endpoint not.
    altchars = b"-_" if ("-" in value or "_" in value) else None
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=altchars)
    except (binascii.Error, ValueError):
        return None


def _with_signature(block: ContentBlock, signature: bytes | None) -> None:
    if signature is not None:
        text = base64.b64encode(signature).decode("ascii")
        cast("dict[str, object]", block)["extra_content"] = {"google": {"thought_signature": text}}


def _mime_of(source: Mapping[str, str], fallback: str) -> str:
    if source.get("media_type"):
        return source["media_type"]
    guessed, _ = mimetypes.guess_type(source.get("url", ""))
    return guessed or fallback


def _media(block: ImageBlock | AudioBlock | DocumentBlock) -> WirePart:
    """An image, audio clip or document: inline bytes, a file URI, or (plain text) text."""
    source = cast("Mapping[str, str]", block["source"])
    kind = block["type"]
    fallback = {"image": "image/png", "audio": "audio/wav"}.get(kind, "application/pdf")
    if source["type"] == "url":
        return {"file_data": {"file_uri": source["url"], "mime_type": _mime_of(source, fallback)}}
    if source["type"] == "text":
        return {"text": source["data"]}
    try:
        data = base64.b64decode(source["data"], validate=True)
    except (binascii.Error, ValueError) as err:
        raise UnsupportedContentError(f"google: a {kind} block's data is not base64") from err
    return {"inline_data": {"mime_type": _mime_of(source, fallback), "data": data}}


def _result_parts(result: ToolResultBlock) -> list[WirePart]:
    """A tool result: a ``function_response`` part, then the media it returned."""
    output = result["output"]
    media: list[WirePart] = []
    if isinstance(output, str):
        text = output
    else:
        texts = []
        for item in output:
            if item["type"] == "text":
                texts.append(item["text"])
            else:
                media.append(_media(item))
        text = "\n".join(texts)
    # Gemini's documented convention: "output" for a result, "error" for a failure.
    key = "error" if result.get("is_error") else "output"
    response: WirePart = {
        "function_response": {"id": result["id"], "name": result["name"], "response": {key: text}}
    }
    return [response, *media]


def _assistant_parts(blocks: Sequence[ContentBlock]) -> list[WirePart]:
    parts: list[WirePart] = []
    signed_call = False
    for block in blocks:
        extra = cast("Mapping[str, object]", block)
        signature = signature_of(extra)
        if block["type"] == "text":
            if not block["text"] and signature is None:
                continue
            part: WirePart = {"text": block["text"]}
        elif block["type"] == "thinking":
            if signature is None:
                continue  # a summary (or another provider's thinking): not needed back
            part = {"text": block["thinking"], "thought": True}
        elif block["type"] == "tool_use":
            arguments = {} if "raw_input" in block else block["input"]
            part = {"function_call": {"id": block["id"], "name": block["name"], "args": arguments}}
            if signature is None and not signed_call:
                signature = SKIP_SIGNATURE  # not Gemini's call: see SKIP_SIGNATURE
            signed_call = True
        elif block["type"] in ("image", "audio", "document"):
            part = _media(block)
        else:
            continue  # provider items of other providers, stray results
        if signature is not None:
            part["thought_signature"] = signature
        parts.append(part)
    return parts


def _user_parts(blocks: Sequence[ContentBlock]) -> list[WirePart]:
    results: list[WirePart] = []
    parts: list[WirePart] = []
    for block in blocks:
        if block["type"] == "tool_result":
            results.extend(_result_parts(block))
        elif block["type"] == "text":
            if block["text"]:
                parts.append({"text": block["text"]})
        elif block["type"] in ("image", "audio", "document"):
            parts.append(_media(block))
        # thinking and calls in a user message are not the user's: left out
    return results + parts  # function responses first, as they answer the previous turn


def _append(contents: list[WireContent], role: str, parts: list[WirePart]) -> None:
    if not parts:
        return
    if contents and contents[-1].get("role") == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def format_contents(messages: Sequence[Msg]) -> tuple[WireContent | None, list[WireContent]]:
    """A conversation as Gemini's ``(system_instruction, contents)``.

    Leading system messages become the system instruction (none when their text is empty);
    a later system message becomes user text at its place. Tool calls go into ``model``
    turns, tool results (wherever they are stored) into ``user`` turns as
    ``function_response`` parts; consecutive turns of one role are merged.
    """
    system: list[str] = []
    contents: list[WireContent] = []
    for msg in messages:
        blocks = msg.get_content_blocks()
        if msg.role == "system" and not contents:
            system.extend(b["text"] for b in blocks if b["type"] == "text" and b["text"])
            results = [b for b in blocks if b["type"] == "tool_result"]
            _append(contents, "user", _user_parts(results))
            continue
        if msg.role == "assistant":
            calls = [b for b in blocks if b["type"] != "tool_result"]
            _append(contents, "model", _assistant_parts(calls))
            results = [b for b in blocks if b["type"] == "tool_result"]
            _append(contents, "user", _user_parts(results))
        else:
            calls = [b for b in blocks if b["type"] == "tool_use"]
            _append(contents, "model", _assistant_parts(calls))
            _append(contents, "user", _user_parts(blocks))
    text = "\n\n".join(system)
    instruction: WireContent | None = {"parts": [{"text": text}]} if text else None
    return instruction, contents


def format_tools(
    tools: Sequence[ToolDefinition], builtin: Sequence[Mapping[str, object]] = ()
) -> list[dict[str, object]]:
    """Function tools and built-in tool specs as Gemini ``tools``.

    Function tools become one tool of ``function_declarations`` (their JSON schema sent as
    ``parameters_json_schema``, which takes full JSON Schema); a built-in tool spec
    (``{"google_search": {}}``, ``{"code_execution": {}}``) is sent as its own tool.
    """
    declarations: list[dict[str, object]] = []
    for tool in tools:
        declaration: dict[str, object] = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        if tool.parameters.get("properties"):
            declaration["parameters_json_schema"] = tool.parameters
        declarations.append(declaration)
    out: list[dict[str, object]] = []
    if declarations:
        out.append({"function_declarations": declarations})
    return out + [dict(spec) for spec in builtin]


def format_tool_config(choice: ToolChoice | None) -> dict[str, object] | None:
    """``tool_choice`` as Gemini's ``tool_config`` (None: the API's default, ``AUTO``)."""
    if choice is None:
        return None
    if choice == "auto":
        config: dict[str, object] = {"mode": "AUTO"}
    elif choice == "none":
        config = {"mode": "NONE"}
    elif choice == "required":
        config = {"mode": "ANY"}
    else:
        config = {"mode": "ANY", "allowed_function_names": [choice]}
    return {"function_calling_config": config}


# -- answers --------------------------------------------------------------------------------
def _usage(meta: types.GenerateContentResponseUsageMetadata, elapsed: float) -> ChatUsage:
    """Gemini's usage as agentkit counts it.

    ``candidates_token_count`` leaves out thinking, which is billed as output: output is
    candidates + thoughts. ``prompt_token_count`` includes the cached tokens; the prompt of
    built-in tool calls (``tool_use_prompt_token_count``) is input too.
    """
    prompt = count(meta.prompt_token_count, "usage_metadata.prompt_token_count")
    tool_prompt = count(meta.tool_use_prompt_token_count, "usage_metadata.tool_use_prompt_tokens")
    answer = count(meta.candidates_token_count, "usage_metadata.candidates_token_count")
    thoughts = count(meta.thoughts_token_count, "usage_metadata.thoughts_token_count")
    cached = count(meta.cached_content_token_count, "usage_metadata.cached_content_token_count")
    audio = 0
    for detail in meta.prompt_tokens_details or ():
        if detail.modality is not None and str(detail.modality.value) == "AUDIO":
            audio += count(detail.token_count, "usage_metadata.prompt_tokens_details.token_count")
    return ChatUsage(
        input_tokens=prompt + tool_prompt,
        output_tokens=answer + thoughts,
        time=elapsed,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
        input_audio_tokens=audio,
    )


class GoogleStreamState:
    """Accumulates ``GenerateContentResponse`` chunks into cumulative ``ChatResponse``s.

    A streamed text part is a delta of the text so far; a function call comes whole in one
    part. A thought signature may come on a part of its own with empty text (the last
    chunk of a stream): it belongs to the text before it.
    """

    def __init__(self) -> None:
        self.content: list[ContentBlock] = []
        self.finish_reason: str | None = None
        self.block_reason: str | None = None
        self.usage: types.GenerateContentResponseUsageMetadata | None = None
        self.response_id: str | None = None
        self.model_version: str | None = None
        self.safety: list[dict[str, object]] = []

    def feed(self, chunk: types.GenerateContentResponse) -> bool:
        """Add one chunk; True when the answer shown changed."""
        if chunk.response_id:
            self.response_id = chunk.response_id
        if chunk.model_version:
            self.model_version = chunk.model_version
        if chunk.usage_metadata is not None:
            self.usage = chunk.usage_metadata  # cumulative: the latest is the total
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.block_reason = str(feedback.block_reason.value)
            self.finish_reason = "content_filter"
        changed = False
        for candidate in (chunk.candidates or [])[:1]:
            parts = candidate.content.parts if candidate.content is not None else None
            for part in parts or ():
                changed = self._part(part) or changed
            if candidate.finish_reason is not None:
                self.finish_reason = str(candidate.finish_reason.value)
            if candidate.safety_ratings:
                self.safety = [
                    r.model_dump(mode="json", exclude_none=True) for r in candidate.safety_ratings
                ]
        return changed

    def _part(self, part: types.Part) -> bool:
        signature = part.thought_signature
        last = self.content[-1] if self.content else None
        if part.function_call is not None:
            call = part.function_call
            raw = json.dumps(call.args or {}, ensure_ascii=False)
            block = tool_use_block(call.id, call.name or "", raw, final=True)
            _with_signature(block, signature)
            self.content.append(block)
            return True
        if part.inline_data is not None and part.inline_data.data is not None:
            data = base64.b64encode(part.inline_data.data).decode("ascii")
            mime = part.inline_data.mime_type or "application/octet-stream"
            kind = "audio" if mime.startswith("audio/") else "image"
            media = {"type": kind, "source": {"type": "base64", "media_type": mime, "data": data}}
            _with_signature(cast("ContentBlock", media), signature)
            self.content.append(cast("ContentBlock", media))
            return True
        if part.text is None:
            if signature is not None and last is not None and signature_of(last) is None:
                _with_signature(last, signature)  # a signature on a part of its own
            return False
        text = clean_text(part.text)
        kind = "thinking" if part.thought else "text"
        if (
            last is not None
            and last["type"] == kind
            and (signature is None or signature_of(last) is None)
        ):
            if kind == "thinking":
                thinking = cast("ThinkingBlock", last)
                thinking["thinking"] += text
            else:
                prose = cast("TextBlock", last)
                prose["text"] += text
            _with_signature(last, signature)
            return bool(text)
        new: ContentBlock
        if kind == "thinking":
            new = {"type": "thinking", "thinking": text}
        else:
            new = {"type": "text", "text": text}
        _with_signature(new, signature)
        self.content.append(new)
        return bool(text) or signature is not None

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The answer so far (``final``: complete, with usage and finish reason)."""
        content = [cast(ContentBlock, dict(b)) for b in self.content]
        response = ChatResponse(content=content)
        if self.response_id:
            response.id = self.response_id
        if not final:
            return response
        if self.usage is not None:
            response.usage = _usage(self.usage, elapsed)
        reason = self.finish_reason
        if reason == "STOP" and any(b["type"] == "tool_use" for b in content):
            reason = "tool_calls"
        mapped = _FINISH.get(reason, reason) if reason is not None else None
        metadata: dict[str, object] = dict(finish_metadata(mapped, GEMINI_FINISH_REASONS))
        if reason is not None and reason not in ("STOP", "tool_calls", "content_filter"):
            metadata.setdefault("provider_finish_reason", reason)
        if self.block_reason is not None:
            metadata["block_reason"] = self.block_reason
        if self.safety and metadata["finish_reason"] == "content_filter":
            metadata["safety_ratings"] = self.safety
        if self.model_version:
            metadata["model_version"] = self.model_version
        response.metadata = metadata
        return response

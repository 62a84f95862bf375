"""Conversion between agentkit messages and the OpenAI Responses API wire format.

Pure functions on dicts: no SDK import. A reasoning item becomes a ``thinking`` block that
keeps what is needed to send it back (``reasoning_id``, ``encrypted_content``, ``summary``),
so a reasoning model keeps its chain of thought across tool calls while the conversation
state stays in agentkit's memory (``store=False``). Thinking from other providers has no
Responses form and is not sent.

With a client-executed tool search (``ClientSearch``: the agent's ``search_tools`` sent as
the API's ``{"type": "tool_search", "execution": "client"}``), the search tool's calls and
results travel as ``tool_search_call`` / ``tool_search_output`` items; in agentkit's memory
they stay an ordinary ``tool_use`` and ``tool_result`` pair (``client_search_calls`` maps
the model's ``tool_search_call`` to one), so a conversation replays the same on any adapter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias, cast

from agentkit._ids import new_id
from agentkit.exceptions import UnsupportedContentError
from agentkit.messages import (
    Base64Source,
    ContentBlock,
    DocumentBlock,
    Msg,
    ProviderItemBlock,
    ThinkingBlock,
    ToolResultBlock,
    URLSource,
)
from agentkit.models._base import ChatResponse, ChatUsage, ToolDefinition
from agentkit.models._common import (
    RESPONSES_FINISH_REASONS,
    finish_metadata,
    split_tool_results,
    tool_use_block,
)
from agentkit.models._json import JSONObject, JSONValue, arr, count, obj
from agentkit.models._openai_audio import is_audio_output

__all__ = [
    "ClientSearch",
    "ResponsesStreamState",
    "client_search_calls",
    "format_input",
    "format_tool_choice",
    "format_tools",
    "parse_response",
    "response_usage",
]

PROVIDER = "openai-responses"
_encode = json.JSONEncoder(ensure_ascii=False).encode
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _unsupported(kind: str, where: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"the OpenAI Responses API does not accept {kind} blocks {where}", provider=PROVIDER
    )


Item: TypeAlias = dict[str, object]
"""An ``input`` item, content part or tool as the Responses API takes it."""


def _data_url(source: Base64Source | URLSource) -> str:
    if source["type"] == "url":
        return str(source["url"])
    return f"data:{source['media_type']};base64,{source['data']}"


def _file_part(block: DocumentBlock) -> Item:
    source = block["source"]
    if source["type"] == "url":
        return {"type": "input_file", "file_url": source["url"]}
    if source["type"] == "text":  # a document's plain text: OpenAI's advice is to send text
        return {"type": "input_text", "text": source["data"]}
    name = block.get("filename") or block.get("title") or "document.pdf"
    return {"type": "input_file", "filename": name, "file_data": _data_url(source)}


def _input_part(block: ContentBlock, where: str) -> Item:
    """One user-side content part (in a user message or a tool result)."""
    if block["type"] == "text":
        return {"type": "input_text", "text": block["text"]}
    if block["type"] == "image":
        url = _data_url(block["source"])
        detail = cast("Mapping[str, object]", block).get("detail", "auto")
        return {"type": "input_image", "image_url": url, "detail": detail}
    if block["type"] == "document":
        return _file_part(block)
    kind = block["type"]
    if block["type"] == "audio" and where == "in a user message":
        source = block["source"]
        if source["type"] == "base64":
            media = source["media_type"]
            fmt = _AUDIO_FORMATS.get(media, media.split("/")[-1])
            return {"type": "input_audio", "input_audio": {"data": source["data"], "format": fmt}}
    detail = " by URL" if kind == "audio" and where == "in a user message" else ""
    raise _unsupported(f"{kind}{detail}", where)


def _user_item(role: str, blocks: list[ContentBlock]) -> Item | None:
    parts = [
        _input_part(b, "in a user message")
        for b in blocks
        if b["type"] not in ("thinking", "tool_use")  # no user-side form, as in Chat
    ]
    if not parts:
        return None
    if all(p["type"] == "input_text" for p in parts):
        return {"role": role, "content": "\n".join(str(p["text"]) for p in parts)}
    return {"role": role, "content": parts}


@dataclass(frozen=True, slots=True)
class ClientSearch:
    """A client-executed tool search: how the agent's search tool goes on the wire.

    Attributes:
        name: The agent's search tool (``DeferredTools.search_tool``): it is sent as the
            ``tool_search`` tool, its calls as ``tool_search_call`` items and its results
            as ``tool_search_output`` items.
        loads: Each search result (by call id) -> the specs of the deferred tools it loaded
            (as ``format_tools`` sends them), in order.
    """

    name: str
    loads: Mapping[str, Sequence[Item]]


_CLIENT = {"execution": "client", "status": "completed"}


def _result_item(result: ToolResultBlock, search: ClientSearch | None = None) -> Item:
    if search is not None and result["name"] == search.name:
        # The loaded tools' definitions, which the API appends at the end of the context; a
        # search that loaded nothing (no match, an error) answers with none.
        tools = [dict(spec) for spec in search.loads.get(result["id"], ())]
        return {"type": "tool_search_output", "call_id": result["id"], **_CLIENT, "tools": tools}
    output = result["output"]
    value: str | list[Item]
    if isinstance(output, str):
        value = output
    else:
        parts = [_input_part(b, "in a tool result") for b in output]
        if all(p["type"] == "input_text" for p in parts):
            value = "\n".join(str(p["text"]) for p in parts)
        else:
            value = parts
    return {"type": "function_call_output", "call_id": result["id"], "output": value}


def _reasoning_item(block: ThinkingBlock) -> Item:
    extra = cast("Mapping[str, object]", block)  # reasoning_id, summary, encrypted_content
    summary = extra.get("summary")
    if not isinstance(summary, list):
        summary = [block["thinking"]] if block["thinking"] else []
    item: Item = {
        "type": "reasoning",
        "id": extra["reasoning_id"],
        "summary": [{"type": "summary_text", "text": s} for s in summary],
    }
    if extra.get("encrypted_content"):
        item["encrypted_content"] = extra["encrypted_content"]
    return item


def _assistant_items(blocks: list[ContentBlock], search: ClientSearch | None) -> list[Item]:
    """Assistant blocks as output items, in the order the model produced them."""
    items: list[Item] = []
    texts: list[str] = []
    phase: object = None

    def flush() -> None:
        if texts:
            message: Item = {"role": "assistant", "content": "\n".join(texts)}
            if phase is not None:
                message["phase"] = phase
            items.append(message)
            texts.clear()

    for block in blocks:
        extra = cast("Mapping[str, object]", block)  # provider keys (phase...) read by key
        if block["type"] == "text":
            if extra.get("phase") != phase:
                flush()
                phase = extra.get("phase")
            if block["text"]:
                texts.append(block["text"])
            continue
        flush()
        if block["type"] == "thinking":
            if extra.get("reasoning_id"):  # other providers' thinking cannot be sent back
                items.append(_reasoning_item(block))
        elif block["type"] == "provider_item":
            if block["provider"] == PROVIDER:  # a built-in tool call: replayed as it came
                items.append(dict(block["item"]))
        elif block["type"] == "tool_use" and search is not None and block["name"] == search.name:
            # Malformed arguments go as {}: the call stays paired with its (error) result.
            arguments: object = {} if "raw_input" in block else block["input"]
            items.append(
                {
                    "type": "tool_search_call",
                    "call_id": block["id"],
                    **_CLIENT,
                    "arguments": arguments,
                }
            )
        elif block["type"] == "tool_use":
            raw = block.get("raw_input")
            arguments = raw if raw is not None else _encode(block["input"])
            items.append(
                {
                    "type": "function_call",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": arguments,
                }
            )
        else:
            raise _unsupported(block["type"], "in an assistant message")
    flush()
    return items


def format_input(messages: Sequence[Msg], search: ClientSearch | None = None) -> list[Item]:
    """Convert a conversation to the Responses ``input`` items.

    System messages stay in place as ``role=system`` messages. Tool results become
    ``function_call_output`` items wherever they are stored. With ``search``, the search
    tool's calls and results become ``tool_search_call`` and ``tool_search_output`` items.

    Raises:
        UnsupportedContentError: for a block the Responses API cannot take where it sits
            (audio in a tool result, an image in an assistant turn...).
    """
    out: list[Item] = []
    for msg in messages:
        if isinstance(msg.content, str):
            if msg.content or msg.role == "user":  # no empty system prompt (as in Chat)
                out.append({"role": msg.role, "content": msg.content})
            continue
        others, results = split_tool_results(msg.content)
        if msg.role == "assistant":
            # Audio a model spoke (OpenAI Chat audio output): its transcript is a text block.
            out += _assistant_items([b for b in others if not is_audio_output(b)], search)
            out += [_result_item(r, search) for r in results]
            continue
        out += [_result_item(r, search) for r in results]
        if msg.role == "system":
            text = "\n".join(b["text"] for b in others if b["type"] == "text")
            if text:
                out.append({"role": "system", "content": text})
            continue
        item = _user_item("user", others)
        if item is not None:
            out.append(item)
    return _without_orphan_reasoning(out)


def _without_orphan_reasoning(items: list[Item]) -> list[Item]:
    """``items`` without the reasoning items not directly followed by their output item.

    The API answers 400 ("provided without its required following item") to a reasoning
    item sent back alone: the answer that followed it was cut off (an interrupt, a stream
    broken after the reasoning), or left out of the conversation. Its thinking text stays in
    agentkit's memory; only the replay of the lone item is dropped.
    """
    if not any(item.get("type") == "reasoning" for item in items):
        return items
    kept: list[Item] = []
    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else None
        if item.get("type") == "reasoning" and (following is None or not _is_output(following)):
            continue
        kept.append(item)
    return kept


def _is_output(item: Item) -> bool:
    """Whether an input item is one the model produced (the item a reasoning item precedes)."""
    if "role" in item:
        return item["role"] == "assistant"
    return item.get("type") not in ("reasoning", "function_call_output", "tool_search_output")


def format_tools(
    tools: Sequence[ToolDefinition],
    builtin: Sequence[Mapping[str, object]] = (),
    *,
    search: str | None = None,
    deferred: Sequence[ToolDefinition] = (),
) -> list[Item]:
    """Function tools as Responses function tools, then the built-in tools as given.

    ``strict`` is sent explicitly (the Responses API defaults to strict schemas, which
    would reject ordinary optional parameters); a tool may opt in with ``strict=True``.
    The tool named ``search`` is sent, in its place, as a client-executed ``tool_search``
    with its description and parameters. ``deferred`` tools follow, marked
    ``defer_loading: true`` (the API shows the model their names and descriptions, not
    their parameters, until a ``tool_search_output`` loads them); last, so that the
    offered tools' bytes do not depend on them.
    """
    out: list[Item] = []
    for tool in tools:
        if tool.name == search:
            out.append(
                {
                    "type": "tool_search",
                    "execution": "client",
                    "description": tool.description,
                    "parameters": _schema(tool),
                }
            )
        else:
            out.append(function_tool(tool))
    out += [dict(spec) for spec in builtin]  # built-in tools (web_search...) as they are
    offered = {tool.name for tool in tools}
    out += [function_tool(t, deferred=True) for t in deferred if t.name not in offered]
    return out


def function_tool(tool: ToolDefinition, *, deferred: bool = False) -> Item:
    """One function tool's spec (``deferred``: marked ``defer_loading: true``)."""
    spec: Item = {
        "type": "function",
        "name": tool.name,
        "parameters": _schema(tool),
        "strict": bool(tool.strict),
    }
    if tool.description:
        spec["description"] = tool.description
    if deferred:
        spec["defer_loading"] = True
    return spec


def _schema(tool: ToolDefinition) -> Mapping[str, object]:
    """The tool's argument schema: shared, not copied (a tool's schema is built once)."""
    return tool.parameters or {"type": "object", "properties": {}}


def format_tool_choice(choice: str) -> str | Item:
    """``"auto"``/``"none"``/``"required"`` or a tool name, in the Responses format."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "name": choice}


def response_usage(data: JSONValue, elapsed: float) -> ChatUsage | None:
    """``ChatUsage`` from a Responses ``usage`` object (cached and reasoning tokens too)."""
    if not isinstance(data, dict):
        return None
    cached = obj(data.get("input_tokens_details")).get("cached_tokens")
    reasoning = obj(data.get("output_tokens_details")).get("reasoning_tokens")
    return ChatUsage(
        input_tokens=count(data.get("input_tokens"), "usage.input_tokens"),
        output_tokens=count(data.get("output_tokens"), "usage.output_tokens"),
        time=elapsed,
        cache_read_tokens=count(cached, "usage.input_tokens_details.cached_tokens"),
        reasoning_tokens=count(reasoning, "usage.output_tokens_details.reasoning_tokens"),
    )


def _texts(parts: JSONValue) -> list[str]:
    """The ``text`` of each object part."""
    return [str(p.get("text") or "") for p in arr(parts) if isinstance(p, dict)]


def _thinking(item: JSONObject) -> ContentBlock:
    summary = _texts(item.get("summary"))
    text = "\n\n".join(s for s in summary if s)
    if not text:  # open-weight models (gpt-oss) return the raw reasoning text instead
        text = "".join(_texts(item.get("content")))
    block: dict[str, object] = {"type": "thinking", "thinking": text, "summary": summary}
    if item.get("id"):
        block["reasoning_id"] = item["id"]
    if item.get("encrypted_content"):
        block["encrypted_content"] = item["encrypted_content"]
    return cast(ContentBlock, block)


def _message_blocks(item: JSONObject, refusals: list[str]) -> list[ContentBlock]:
    texts: list[str] = []
    annotations: list[JSONValue] = []
    for value in arr(item.get("content")):
        part = obj(value)
        if part.get("type") == "refusal":
            refusals.append(str(part.get("refusal") or ""))
            texts.append(str(part.get("refusal") or ""))
        elif part.get("type") == "output_text":
            texts.append(str(part.get("text") or ""))
            annotations += arr(part.get("annotations"))
    text = "".join(texts)
    if not text:
        return []
    block: dict[str, object] = {"type": "text", "text": text}
    if annotations:
        block["annotations"] = annotations
    if item.get("phase"):
        block["phase"] = item["phase"]
    return [cast(ContentBlock, block)]


def output_blocks(
    items: Sequence[JSONObject], refusals: list[str], *, done: set[int] | None = None
) -> list[ContentBlock]:
    """Content blocks of output items (``done``: indices whose arguments are complete)."""
    content: list[ContentBlock] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning":
            block = _thinking(item)
            if done is not None and index not in done:
                # Still streaming: not replayable yet (a stream cut here, by an interrupt,
                # keeps the text but must not send an incomplete item back).
                extra = cast("dict[str, object]", block)
                extra.pop("reasoning_id", None)
                extra.pop("encrypted_content", None)
            content.append(block)
        elif kind == "message":
            content += _message_blocks(item, refusals)
        elif kind == "function_call":
            final = done is None or index in done
            raw = str(item.get("arguments") or "")
            call_id = item.get("call_id") or item.get("id")
            name = str(item.get("name") or "")
            call = tool_use_block(None if call_id is None else str(call_id), name, raw, final=final)
            content.append(call)
        elif isinstance(kind, str) and (done is None or index in done):
            # Built-in tools (web_search_call, file_search_call...): kept verbatim, replayed.
            kept = ProviderItemBlock(type="provider_item", provider=PROVIDER, item=dict(item))
            content.append(kept)
    return content


def client_search_calls(response: ChatResponse, name: str) -> ChatResponse:
    """``response`` with its client-executed ``tool_search_call`` items as calls of ``name``.

    The model's call to the ``tool_search`` tool (parsed, like any item agentkit has no
    block for, as a ``provider_item``) becomes a ``tool_use`` of the agent's search tool,
    with the call's ``call_id`` and ``arguments``: the agent runs the search and stores its
    result, and ``format_input`` sends the pair back as ``tool_search_call`` and
    ``tool_search_output``. Server-executed searches stay provider items, replayed as
    they came.
    """
    content: list[ContentBlock] = []
    changed = False
    for block in response.content:
        if block["type"] == "provider_item" and _is_client_search(block):
            item = block["item"]
            arguments = item.get("arguments")
            raw = _encode(arguments) if isinstance(arguments, dict) else str(arguments or "")
            call_id = item.get("call_id") or item.get("id")
            content.append(
                tool_use_block(None if call_id is None else str(call_id), name, raw, final=True)
            )
            changed = True
        else:
            content.append(block)
    if not changed:
        return response
    metadata = response.metadata
    if metadata is not None and metadata.get("finish_reason") == "stop":
        metadata = {**metadata, "finish_reason": "tool_calls"}  # a call, not an answer
    return replace(response, content=content, metadata=metadata)


def _is_client_search(block: ProviderItemBlock) -> bool:
    item = block["item"]
    return (
        block["provider"] == PROVIDER
        and item.get("type") == "tool_search_call"
        and item.get("execution") == "client"
    )


def finish_reason(data: JSONObject, content: Sequence[ContentBlock]) -> str | None:
    """A Chat Completions-style finish reason for a response body."""
    status = data.get("status")
    if status == "incomplete":
        reason = obj(data.get("incomplete_details")).get("reason")
        return "length" if reason in (None, "max_output_tokens") else str(reason)
    if any(b["type"] == "tool_use" for b in content):
        return "tool_calls"
    return "stop" if status in (None, "completed") else str(status)


def parse_response(data: JSONObject, elapsed: float) -> ChatResponse:
    """Build a ``ChatResponse`` from a ``response`` object."""
    refusals: list[str] = []
    items = [i for i in arr(data.get("output")) if isinstance(i, dict)]
    content = output_blocks(items, refusals)
    metadata = finish_metadata(finish_reason(data, content), RESPONSES_FINISH_REASONS)
    if refusals:
        metadata["refusal"] = "".join(refusals)
    return ChatResponse(
        content=content,
        usage=response_usage(data.get("usage"), elapsed),
        id=str(data.get("id") or new_id()),
        metadata=metadata,
    )


class ResponsesStreamState:
    """Accumulates Responses stream events into cumulative snapshots."""

    __slots__ = ("done", "final", "finish_reason", "id", "items")

    def __init__(self) -> None:
        self.id: str | None = None
        self.items: dict[int, JSONObject] = {}  # output_index -> item being built
        self.done: set[int] = set()
        self.final: JSONObject | None = None  # the response.completed response
        self.finish_reason: str | None = None

    def feed(self, event: JSONObject) -> bool:
        """Apply one event; return whether the visible content changed."""
        kind = event.get("type")
        index = _index(event.get("output_index", 0))
        item = self.items.get(index)
        delta = str(event.get("delta") or "")
        if kind == "response.output_text.delta" and item is not None:
            item["_text"] = str(item.get("_text", "")) + delta
        elif kind == "response.refusal.delta" and item is not None:
            item["_refusal"] = str(item.get("_refusal", "")) + delta
        elif kind == "response.function_call_arguments.delta" and item is not None:
            item["arguments"] = str(item.get("arguments") or "") + delta
        elif kind == "response.reasoning_summary_text.delta" and item is not None:
            summary = _list_in(item, "summary")
            position = _index(event.get("summary_index", 0))
            while len(summary) <= position:
                summary.append({"type": "summary_text", "text": ""})
            _append_text(summary[position], delta)
        elif kind == "response.reasoning_text.delta" and item is not None:
            content = _list_in(item, "content")
            if not content:
                content.append({"type": "reasoning_text", "text": ""})
            _append_text(content[-1], delta)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            return self._item(str(kind), index, event.get("item"))
        elif kind in ("response.created", "response.completed", "response.incomplete"):
            return self._response(str(kind), obj(event.get("response")))
        else:
            return False
        return True

    def _item(self, kind: str, index: int, item: JSONValue) -> bool:
        if not isinstance(item, dict):
            return False
        self.items[index] = dict(item)
        if kind.endswith(".done"):
            self.done.add(index)
        return True

    def _response(self, kind: str, response: JSONObject) -> bool:
        if self.id is None and response.get("id"):
            self.id = str(response["id"])
        if kind == "response.created":
            return False
        self.final = response
        output = response.get("output")
        if isinstance(output, list) and output:  # the complete items: authoritative
            self.items = {i: dict(obj(item)) for i, item in enumerate(output)}
            self.done = set(self.items)
        self.finish_reason = "completed"
        return True

    def _visible_items(self) -> list[JSONObject]:
        out: list[JSONObject] = []
        for index in sorted(self.items):
            item = self.items[index]
            if item.get("type") == "message" and index not in self.done:
                # Parts still streaming: build them from the accumulated deltas.
                parts: list[JSONValue] = [{"type": "output_text", "text": item.get("_text", "")}]
                if item.get("_refusal"):
                    parts.append({"type": "refusal", "refusal": item["_refusal"]})
                item = {**item, "content": parts}
            out.append(item)
        return out

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The cumulative response so far (``final`` adds usage and finish reason)."""
        items = self._visible_items()
        positions = sorted(self.items)
        done = {n for n, index in enumerate(positions) if final or index in self.done}
        refusals: list[str] = []
        content = output_blocks(items, refusals, done=done)
        if self.id is None:
            self.id = new_id()
        response = ChatResponse(content=content, id=self.id)
        if final:
            data = self.final or {}
            response.usage = response_usage(data.get("usage"), elapsed) or ChatUsage(time=elapsed)
            reason = finish_reason(data, content)
            response.metadata = finish_metadata(reason, RESPONSES_FINISH_REASONS)
            if refusals:
                response.metadata["refusal"] = "".join(refusals)
        return response


def _index(value: JSONValue) -> int:
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected an index, got {type(value).__name__}")


def _list_in(item: JSONObject, key: str) -> list[JSONValue]:
    """``item[key]`` as a list stored in ``item`` (created when missing or empty)."""
    value = item.get(key)
    if not value:
        value = item[key] = []
    if not isinstance(value, list):
        raise TypeError(f"{key} is not a list")
    return value


def _append_text(part: JSONValue, delta: str) -> None:
    if not isinstance(part, dict):
        raise TypeError("a text part is not an object")
    part["text"] = str(part.get("text") or "") + delta

"""Conversions between MCP wire types and agentkit blocks (no ``mcp`` import at load time).

Tool results: text, image and audio content become blocks; an embedded text resource becomes a
text block naming its URI; an embedded blob becomes an image/audio/document (PDF) block when
its MIME type says so, else a text note; a resource link becomes a text line.
``structuredContent`` is kept as JSON text (when the server sent no text) and in
``metadata["structured_content"]``; ``isError`` gives an error response.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentkit._text import clean_text
from agentkit.messages import (
    AudioBlock,
    Base64Source,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Msg,
    TextBlock,
)
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from mcp_types import (
        BlobResourceContents,
        CallToolResult,
        SamplingMessage,
        SamplingMessageContentBlock,
        TextResourceContents,
    )
    from mcp_types import ContentBlock as MCPContent

__all__ = ["content_to_blocks", "result_to_response", "sampling_messages_to_msgs"]


def _text(text: str) -> TextBlock:
    # A server's text may hold lone surrogates (JSON escapes): valid Unicode from here on.
    return TextBlock(type="text", text=clean_text(text))


def _media(kind: str, mime: str, data: str) -> ImageBlock | AudioBlock:
    source: Base64Source = {"type": "base64", "media_type": mime, "data": data}
    if kind == "image":
        return ImageBlock(type="image", source=source)
    return AudioBlock(type="audio", source=source)


def _resource_to_block(resource: TextResourceContents | BlobResourceContents) -> ToolResultContent:
    """An embedded resource's contents (text or blob) as one block."""
    uri = str(resource.uri)
    mime = resource.mime_type or ""
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return _text(f"[resource {uri}]\n{text}")
    blob = getattr(resource, "blob", "")
    blob = blob if isinstance(blob, str) else ""
    for kind in ("image", "audio"):
        if mime.startswith(f"{kind}/"):
            return _media(kind, mime, blob)
    if mime == "application/pdf":  # the document type every document-taking provider reads
        source: Base64Source = {"type": "base64", "media_type": mime, "data": blob}
        return DocumentBlock(type="document", source=source, filename=uri.rsplit("/", 1)[-1])
    size = len(blob) * 3 // 4
    return _text(f"[binary resource {uri} ({mime or 'unknown type'}, about {size} bytes)]")


def content_to_blocks(content: list[MCPContent]) -> list[ToolResultContent]:
    """Convert MCP content blocks to agentkit tool-result blocks.

    Args:
        content: ``CallToolResult.content`` (or prompt/resource content) items.
    """
    from mcp_types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    blocks: list[ToolResultContent] = []
    for item in content:
        known: object = item  # a newer SDK may carry content types not listed here
        if isinstance(known, TextContent):
            blocks.append(_text(known.text))
        elif isinstance(known, ImageContent | AudioContent):
            blocks.append(_media(known.type, known.mime_type, known.data))
        elif isinstance(known, EmbeddedResource):
            blocks.append(_resource_to_block(known.resource))
        elif isinstance(known, ResourceLink):
            note = f" - {known.description}" if known.description else ""
            blocks.append(_text(f"[resource link {known.name}: {known.uri}{note}]"))
        else:  # a future content type: keep it visible rather than dropping it
            blocks.append(_text(json.dumps(item.model_dump(mode="json", by_alias=True))))
    return blocks


def result_to_response(result: CallToolResult, server: str, tool: str) -> ToolResponse:
    """Turn a ``CallToolResult`` into the final ``ToolResponse`` of a call.

    Args:
        result: What the server answered.
        server: The client name, recorded in metadata.
        tool: The server-side tool name, recorded in metadata.
    """
    blocks = content_to_blocks(list(result.content))
    metadata: dict[str, object] = {"mcp_server": server, "mcp_tool": tool}
    # Content annotations (audience, priority...), aligned with the blocks.
    notes: list[dict[str, object] | None] = [
        i.annotations.model_dump(mode="json", exclude_none=True) if i.annotations else None
        for i in result.content
    ]
    structured = result.structured_content
    if structured is not None:
        metadata["structured_content"] = structured
        if not any(b["type"] == "text" for b in blocks):
            blocks.insert(0, _text(json.dumps(structured, ensure_ascii=False)))
            notes.insert(0, None)
    if any(notes):
        metadata["content_annotations"] = notes
    # Protocol stamps (io.modelcontextprotocol/*) are transport detail, not tool output.
    meta = {k: v for k, v in (result.meta or {}).items() if not k.startswith("io.modelcontext")}
    if meta:
        metadata["mcp_meta"] = meta
    if not blocks:
        blocks.append(_text("(no output)" if not result.is_error else "tool failed"))
    return ToolResponse(content=blocks, metadata=metadata, is_error=bool(result.is_error))


def _sampling_block(block: SamplingMessageContentBlock) -> ContentBlock:
    """One sampling message content item as an agentkit block."""
    from mcp_types import (
        AudioContent,
        ImageContent,
        TextContent,
        ToolUseContent,
    )
    from mcp_types import ToolResultContent as MCPToolResult

    known: object = block  # a newer SDK may carry content types not listed here
    if isinstance(known, TextContent):
        return _text(known.text)
    if isinstance(known, ImageContent | AudioContent):
        return _media(known.type, known.mime_type, known.data)
    if isinstance(known, ToolUseContent):
        return {"type": "tool_use", "id": known.id, "name": known.name, "input": known.input}
    if isinstance(known, MCPToolResult):
        output = content_to_blocks(list(known.content))
        return {
            "type": "tool_result",
            "id": known.tool_use_id,
            "name": "",
            "output": output,
            "is_error": bool(known.is_error),
        }
    return _text(json.dumps(block.model_dump(mode="json", by_alias=True)))


def sampling_messages_to_msgs(
    messages: list[SamplingMessage], system_prompt: str | None, server: str
) -> list[Msg]:
    """Convert a ``sampling/createMessage`` conversation into agentkit messages.

    Args:
        messages: The server's sampling messages.
        system_prompt: The server's system prompt, if any (becomes a system message).
        server: Name used as the author of the server's messages.
    """
    msgs: list[Msg] = []
    if system_prompt:
        msgs.append(Msg(name="system", content=system_prompt, role="system"))
    for message in messages:
        blocks = [_sampling_block(b) for b in message.content_as_list]
        if message.role == "assistant":
            msgs.append(Msg(name="assistant", content=blocks, role="assistant"))
        else:
            msgs.append(Msg(name=server, content=blocks, role="user"))
    return msgs

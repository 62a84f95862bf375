"""Turn whatever a tool returns into ``ToolResponse`` content.

- ``ToolResponse``: used as is.
- ``str``: one text block.
- ``bytes``: an image block when the bytes are a PNG, JPEG, GIF or WEBP image; otherwise a
  short text note (raw binary means nothing to a model).
- ``bytes`` of a PDF: a document block.
- a content block (``{"type": "text" | "image" | "audio" | "document", ...}``) or a list of
  them: as is.
- ``None``: the text ``"Done."`` (an empty result confuses models and some providers
  reject it).
- dict, list, tuple, set, pydantic models, dataclasses, numbers, bools: JSON text.
- anything else: ``str(value)``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import pathlib
import uuid
from collections.abc import Iterable
from typing import TypeGuard

from agentkit.messages import Base64Source, DocumentBlock, ImageBlock, TextBlock
from agentkit.tools._response import ToolResponse, ToolResultContent

__all__ = ["DONE_TEXT", "ChunkCollector", "merge_content", "to_content", "truncate"]

DONE_TEXT = "Done."
_BLOCK_TYPES = frozenset(("text", "image", "audio", "document"))


def to_content(value: object) -> list[ToolResultContent]:
    """Convert a tool's return value (or one yielded item) into content blocks."""
    if isinstance(value, str):
        return [TextBlock(type="text", text=value)]
    if value is None:
        return [TextBlock(type="text", text=DONE_TEXT)]
    if isinstance(value, ToolResponse):
        return value.content
    if isinstance(value, bytes | bytearray | memoryview):
        return [_bytes_block(bytes(value))]
    if _is_block(value):
        return [value]
    if isinstance(value, list) and value and all(_is_block(v) for v in value):
        return list(value)
    return [TextBlock(type="text", text=_to_text(value))]


def _is_block(value: object) -> TypeGuard[ToolResultContent]:
    if not isinstance(value, dict) or value.get("type") not in _BLOCK_TYPES:
        return False
    if value["type"] == "text":
        return isinstance(value.get("text"), str)
    return isinstance(value.get("source"), dict)


def _to_text(value: object) -> str:
    if hasattr(value, "model_dump_json") and callable(value.model_dump_json):
        return str(value.model_dump_json())  # pydantic model, without importing pydantic
    if isinstance(value, dict | list | tuple | set | frozenset | int | float | bool) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        try:
            return json.dumps(value, ensure_ascii=False, default=_json_default)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def _json_default(value: object) -> object:
    """``json.dumps`` fallback for the values tools commonly return."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, pathlib.PurePath | uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def _image_type(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _bytes_block(data: bytes) -> ToolResultContent:
    media_type = _image_type(data)
    if media_type is None and data.startswith(b"%PDF-"):
        pdf = base64.b64encode(data).decode("ascii")
        source: Base64Source = {"type": "base64", "media_type": "application/pdf", "data": pdf}
        return DocumentBlock(type="document", source=source)
    if media_type is None:
        return TextBlock(
            type="text",
            text=f"[the tool returned {len(data)} bytes of binary data that is not an image "
            "(PNG, JPEG, GIF or WEBP); binary data cannot be shown]",
        )
    encoded = base64.b64encode(data).decode("ascii")
    return ImageBlock(
        type="image", source={"type": "base64", "media_type": media_type, "data": encoded}
    )


def merge_content(chunks: Iterable[list[ToolResultContent]]) -> list[ToolResultContent]:
    """Concatenate incremental chunks, joining adjacent text blocks into one."""
    out: list[ToolResultContent] = []
    for content in chunks:
        for block in content:
            last = out[-1] if out else None
            if block["type"] == "text" and last is not None and last["type"] == "text":
                out[-1] = TextBlock(type="text", text=last["text"] + block["text"])
            else:
                out.append(block)
    return out


def truncate(content: list[ToolResultContent], limit: int) -> list[ToolResultContent]:
    """Cut the text of ``content`` to ``limit`` characters in all, with a note saying so."""
    if len(content) == 1 and content[0]["type"] == "text" and len(content[0]["text"]) <= limit:
        return content  # most results: one short text, no sum over a generator
    total = sum(len(b["text"]) for b in content if b["type"] == "text")
    if total <= limit:
        return content
    out: list[ToolResultContent] = []
    left = limit
    for block in content:
        if block["type"] != "text":
            out.append(block)
        elif left > 0:
            out.append(TextBlock(type="text", text=block["text"][:left]))
            left -= len(block["text"])
    note = (
        f"\n\n[output truncated: showing the first {limit} of {total} characters. "
        "If you need the rest, ask for a smaller part (a narrower query, a range, a page).]"
    )
    out.append(TextBlock(type="text", text=note))
    return merge_content([out])


class ChunkCollector:
    """What a stream of chunks adds up to: nothing a tool yields is lost.

    The rule (one place, used by generator tools and by the Toolkit for every ``Tool``):
    the stream is consumed to its end; a chunk marked final (``is_last=True``, the
    ``ToolResponse`` default) is held back until the next one arrives, so every chunk but
    the last streams as progress; the result is the last chunk when it is the only one
    marked final (a generator ending with its own final response), otherwise the
    concatenation of everything yielded (adjacent text joined), with the metadata merged
    and ``is_error`` set if any final-marked chunk had it.
    """

    __slots__ = ("_error", "_finals", "_held", "_metadata", "chunks")

    def __init__(self) -> None:
        self.chunks: list[list[ToolResultContent]] = []
        self._held: ToolResponse | None = None
        self._finals = 0
        self._error = False
        self._metadata: dict[str, object] | None = None

    def add(self, chunk: ToolResponse) -> list[ToolResponse]:
        """Take the next chunk; return the progress chunks to stream now."""
        out: list[ToolResponse] = []
        held = self._held
        if held is not None:  # not the last after all: it streams as progress
            out.append(ToolResponse(content=held.content, metadata=held.metadata, is_last=False))
            self._held = None
        self.chunks.append(chunk.content)
        if chunk.metadata:
            self._metadata = {**(self._metadata or {}), **chunk.metadata}
        if chunk.is_last:
            self._finals += 1
            self._error = self._error or chunk.is_error
            self._held = chunk
        else:
            out.append(chunk)
        return out

    def partial(self) -> list[ToolResultContent]:
        """Everything yielded so far, concatenated (for a call cut short by an error)."""
        return merge_content(self.chunks)

    def result(self) -> ToolResponse:
        """The final response, once the stream has ended."""
        if self._held is not None and self._finals == 1:
            return self._held
        content = merge_content(self.chunks) or to_content(None)
        return ToolResponse(content=content, metadata=self._metadata, is_error=self._error)

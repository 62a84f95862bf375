"""``ToolResponse``: what a tool call yields.

A call yields zero or more *progress* chunks (``is_last=False``: incremental, for display
only) and exactly one *final* chunk (``is_last=True``) whose ``content`` is the complete
result that goes into memory. For a generator tool the Toolkit builds the final chunk by
concatenating what the generator yielded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from agentkit._ids import new_id
from agentkit._text import clean_json, clean_text, is_clean
from agentkit.messages import AudioBlock, DocumentBlock, ImageBlock, TextBlock, text_of

__all__ = ["ToolResponse", "ToolResultContent"]

ToolResultContent = TextBlock | ImageBlock | AudioBlock | DocumentBlock


@dataclass(slots=True)
class ToolResponse:
    """One chunk of a tool call's output.

    Attributes:
        content: Text, image or audio blocks.
        metadata: JSON-safe extra data (MCP ``structuredContent``, timings...).
        is_last: True on the final chunk of a call.
        is_error: The call failed; ``content`` says why, in words meant for the model.
        is_interrupted: The call was cancelled before it finished (interrupt or shutdown).
        id: Chunk id.
    """

    content: list[ToolResultContent] = field(default_factory=list)
    metadata: dict[str, object] | None = None
    is_last: bool = True
    is_error: bool = False
    is_interrupted: bool = False
    id: str = field(default_factory=new_id)

    def __post_init__(self) -> None:
        self.clean()

    def clean(self) -> None:
        """Make the content's text and the metadata valid Unicode (lone surrogates replaced).

        Tool output comes from outside (files, processes, servers); see ``agentkit._text``.
        The Toolkit calls it again on every final chunk, in case the content was replaced.
        """
        self.content = [_clean_block(b) for b in self.content]
        if self.metadata:
            self.metadata = clean_json(self.metadata)

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> ToolResponse:
        """Build a response holding one text block."""
        return cls(content=[TextBlock(type="text", text=text)], **kwargs)

    @classmethod
    def error(cls, text: str, **kwargs: Any) -> ToolResponse:
        """Build a final error response holding one text block."""
        return cls(content=[TextBlock(type="text", text=text)], is_error=True, **kwargs)

    def get_text(self) -> str:
        """Join the text blocks."""
        return text_of(self.content)


def _clean_block(block: ToolResultContent) -> ToolResultContent:
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        if isinstance(text, str) and not is_clean(text):
            return cast(ToolResultContent, {**block, "text": clean_text(text)})
    return block

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
        The Toolkit checks every final chunk again (``validate_block``), in case the
        content was replaced. The content list is this response's own (a copy).
        """
        # Inline, not a helper per block: every chunk of every tool call passes here.
        self.content = content = list(self.content)
        for i, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str) and not (text.isascii() or is_clean(text)):
                    content[i] = cast(ToolResultContent, {**block, "text": clean_text(text)})
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

"""The provider-neutral model interface: ``ChatModel``, ``ChatResponse``, ``ChatUsage``.

A model is called with agentkit ``Msg``s and OpenAI-style function schemas. With
``stream=False`` the call returns one ``ChatResponse``; with ``stream=True`` it returns an
async iterator of *cumulative* ``ChatResponse`` chunks (each chunk holds everything received
so far; the last chunk is the complete answer). Consumers that need deltas diff consecutive
chunks, so a dropped chunk never corrupts the final result.

While a tool call's arguments are still streaming, its ``tool_use`` block carries
``raw_input`` (the JSON text so far) and is not executable; see ``ToolUseBlock``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from agentkit.messages import ContentBlock, Msg

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["ChatModel", "ChatResponse", "ChatUsage", "ModelOutput", "ToolChoice"]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``"auto"``, ``"none"``, ``"required"``, or the name of one tool to force."""


@dataclass(slots=True)
class ChatUsage:
    """Token usage, wall time and cost of one model call (or a sum of calls).

    Attributes:
        input_tokens: Prompt tokens billed (cache reads and writes included).
        output_tokens: Completion tokens billed.
        time: Seconds from sending the request to the last byte.
        cache_read_tokens: Of ``input_tokens``, those read from the provider's prompt cache.
        cache_write_tokens: Of ``input_tokens``, those written to the prompt cache.
        cost: USD, from the price table (``agentkit.models.prices``); None when the price
            is unknown. A sum is None as soon as one of its non-empty parts is.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    time: float = 0.0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: ChatUsage) -> ChatUsage:
        return ChatUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.time + other.time,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            _sum_cost(self, other),
        )

    def _is_empty(self) -> bool:
        return not (self.input_tokens or self.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (cache counts and cost only when there are some)."""
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "time": self.time,
        }
        if self.cache_read_tokens:
            out["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        if self.cost is not None:
            out["cost"] = self.cost
        return out


def _sum_cost(a: ChatUsage, b: ChatUsage) -> float | None:
    """The cost of two usages together: unknown if a part with tokens has an unknown cost.

    An empty usage (no tokens, e.g. a run's starting total) counts as free, so a sum of
    priced calls stays priced; one unpriced call makes the total unknown, never too low.
    """
    if (a.cost is None and not a._is_empty()) or (b.cost is None and not b._is_empty()):
        return None
    if a.cost is None and b.cost is None:
        return None
    return (a.cost or 0.0) + (b.cost or 0.0)


@dataclass(slots=True)
class ChatResponse:
    """One model answer (or, when streaming, the cumulative answer so far).

    Attributes:
        content: Text, thinking and tool_use blocks in the order the model produced them.
        usage: Token usage, filled on the final chunk when the provider reports it.
        id: Provider response id (generated when the provider gives none).
        metadata: Extra data: ``finish_reason``, ``structured_output``...
    """

    content: list[ContentBlock]
    usage: ChatUsage | None = None
    id: str = field(default_factory=lambda: os.urandom(16).hex())
    metadata: dict[str, Any] | None = None

    def get_text(self) -> str:
        """Join the text blocks."""
        return "".join(b["text"] for b in self.content if b["type"] == "text")

    @property
    def tool_calls(self) -> list[Any]:
        """The ``tool_use`` blocks, in order."""
        return [b for b in self.content if b["type"] == "tool_use"]


ModelOutput: TypeAlias = ChatResponse | AsyncIterator[ChatResponse]


class ChatModel(ABC):
    """Base class of every model adapter and test double.

    Args:
        model_name: The provider's model name.
        stream: Return an async iterator of cumulative chunks instead of one response.
    """

    provider: str = "unknown"

    def __init__(self, model_name: str, stream: bool = False) -> None:
        self.model_name = model_name
        self.stream = stream

    @abstractmethod
    async def __call__(
        self,
        messages: Sequence[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        structured_model: type[BaseModel] | None = None,
        **kwargs: Any,
    ) -> ModelOutput:
        """Ask the model for the next assistant turn.

        Args:
            messages: The conversation, system message first if any.
            tools: OpenAI-style function schemas (``{"type": "function", "function": {...}}``).
            tool_choice: How the model may use the tools.
            structured_model: Ask for an answer matching this pydantic model; the validated
                value is put in ``response.metadata["structured_output"]``.
            **kwargs: Provider-specific generation arguments.

        Returns:
            A ``ChatResponse``, or an async iterator of cumulative chunks when streaming.

        Raises:
            ModelError: a subclass describing the failure.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, deliberately not abstract
        """Release network resources (HTTP clients). Safe to call more than once."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r}, stream={self.stream})"

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
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

from agentkit.messages import ContentBlock, Msg

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "ChatModel",
    "ChatResponse",
    "ChatUsage",
    "ModelOutput",
    "ModelSettings",
    "ToolChoice",
    "ToolDefinition",
]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``"auto"``, ``"none"``, ``"required"``, or the name of one tool to force."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as offered to a model, in no provider's shape.

    ``Tool.definition`` builds one; adapters turn it into their provider's format
    (:meth:`to_openai` for OpenAI-compatible APIs).

    Attributes:
        name: The tool's name.
        description: What it does (the model reads it).
        parameters: The JSON schema of its arguments (an object schema).
        strict: Ask the provider to enforce the schema exactly (None: provider default).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    strict: bool | None = None

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI function-tool form ``{"type": "function", "function": {...}}``."""
        parameters = self.parameters  # shared, not copied: a tool's schema is built once
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": parameters if isinstance(parameters, dict) else dict(parameters),
        }
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}

    @classmethod
    def from_openai(cls, schema: Mapping[str, Any]) -> ToolDefinition:
        """Read an OpenAI function-tool dict (with or without the ``function`` wrapper)."""
        function = schema.get("function", schema)
        return cls(
            name=function["name"],
            description=function.get("description", ""),
            parameters=function.get("parameters", {"type": "object", "properties": {}}),
            strict=function.get("strict"),
        )


class ModelSettings(TypedDict, total=False):
    """Generation settings for one request; every key is optional.

    Keys an adapter does not know are sent to the provider as body fields.
    """

    tool_choice: ToolChoice
    parallel_tool_calls: bool
    temperature: float
    top_p: float
    max_tokens: int
    stop: list[str]
    seed: int


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
        reasoning_tokens: Of ``output_tokens``, those spent on hidden reasoning.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    time: float = 0.0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None
    reasoning_tokens: int = 0

    def __add__(self, other: ChatUsage) -> ChatUsage:
        return ChatUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.time + other.time,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=_sum_cost(self, other),
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    def _is_empty(self) -> bool:
        return not (self.input_tokens or self.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (token details and cost only when there are some)."""
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "time": self.time,
        }
        if self.cache_read_tokens:
            out["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
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
    offline: bool = False
    """True for models that never reach a network (test doubles): not blocked by
    ``agentkit.testing.block_model_requests``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        call = cls.__dict__.get("__call__")
        if call is not None and not cls.offline:
            name = "__call__"  # replaced on the class, like a decorator would
            setattr(cls, name, _guarded(call))

    def __init__(self, model_name: str, stream: bool = False) -> None:
        self.model_name = model_name
        self.stream = stream

    @abstractmethod
    async def __call__(  # the adapters' hook; request()/request_stream() are the typed API
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

    async def request(
        self,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None = None,
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Ask for the next assistant turn and wait for the whole answer.

        Args:
            messages: The conversation, system message first if any.
            tools: The tools the model may call.
            settings: Generation settings (``tool_choice``, ``temperature``...).

        Returns:
            The complete answer (a streaming model's last chunk).

        Raises:
            ModelError: a subclass describing the failure.
        """
        output = await self(messages, **_call_args(tools, settings))
        if isinstance(output, ChatResponse):
            return output
        last = ChatResponse(content=[])
        async for chunk in output:
            last = chunk
        return last

    async def request_stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ChatResponse, None]:
        """Ask for the next assistant turn as cumulative chunks (the last one is complete).

        A model built with ``stream=False`` yields its one answer as a single chunk. Same
        arguments and errors as :meth:`request`.
        """
        output = await self(messages, **_call_args(tools, settings))
        if isinstance(output, ChatResponse):
            yield output
            return
        try:
            async for chunk in output:
                yield chunk
        finally:
            aclose = getattr(output, "aclose", None)
            if aclose is not None:
                await aclose()

    async def aclose(self) -> None:  # noqa: B027 - optional hook, deliberately not abstract
        """Release network resources (HTTP clients). Safe to call more than once."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r}, stream={self.stream})"


def _call_args(
    tools: Sequence[ToolDefinition] | None, settings: ModelSettings | None
) -> dict[str, Any]:
    """``__call__`` keyword arguments for typed tools and settings."""
    args: dict[str, Any] = dict(settings or {})
    if tools:
        args["tools"] = [t.to_openai() for t in tools]
    return args


BLOCKED: list[str] = []
"""Reasons real model requests are blocked now (``agentkit.testing.block_model_requests``)."""


def _guarded(call: Any) -> Any:
    """Wrap an adapter's ``__call__`` so it refuses while model requests are blocked."""
    import functools

    @functools.wraps(call)
    async def guarded(self: ChatModel, *args: Any, **kwargs: Any) -> Any:
        if BLOCKED:
            from agentkit.exceptions import ModelRequestsBlocked

            raise ModelRequestsBlocked(
                f"{type(self).__name__}({self.model_name!r}) was asked for an answer while "
                f"model requests are blocked ({BLOCKED[-1]}); use a test double from "
                "agentkit.testing (ScriptedModel, FunctionModel, TestModel)",
                provider=self.provider,
            )
        return await call(self, *args, **kwargs)

    return guarded

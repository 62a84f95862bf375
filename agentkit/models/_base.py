"""The provider-neutral model interface: ``ChatModel``, ``ModelRequest``, ``ChatResponse``.

A model is asked with one ``ModelRequest`` (agentkit ``Msg``s, ``ToolDefinition``s, a
provider's built-in tool specs, settings, the structured output asked for); each adapter
builds its provider's wire form from it. ``model.request(request)`` returns one
``ChatResponse``; ``model.request_stream(request)`` yields *cumulative* ``ChatResponse``
chunks (each chunk holds everything received so far; the last chunk is the complete
answer). Consumers that need deltas diff consecutive chunks, so a dropped chunk never
corrupts the final result.

While a tool call's arguments are still streaming, its ``tool_use`` block carries
``raw_input`` (the JSON text so far) and is not executable; see ``ToolUseBlock``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

from agentkit._ids import new_id
from agentkit.messages import ContentBlock, Msg, ToolUseBlock, text_of

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "AudioOutput",
    "CachePoint",
    "ChatModel",
    "ChatResponse",
    "ChatUsage",
    "DeferredTools",
    "ModelRequest",
    "ModelSettings",
    "OutputSpec",
    "PromptCache",
    "ToolChoice",
    "ToolDefinition",
]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``"auto"``, ``"none"``, ``"required"``, or the name of one tool to force."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as offered to a model, in no provider's shape.

    ``Tool.definition`` builds one; each adapter turns it into its provider's format
    (:meth:`to_openai` is the OpenAI-compatible one).

    Attributes:
        name: The tool's name.
        description: What it does (the model reads it).
        parameters: The JSON schema of its arguments (an object schema).
        strict: Ask the provider to enforce the schema exactly (None: provider default).
        native: A provider's built-in tool spec (``{"type": "web_search_20250305", ...}``)
            offered through a toolkit (None for function tools): the agent's loop puts it in
            the request's ``builtin_tools``, which every adapter sends as it is.
    """

    name: str
    description: str
    parameters: Mapping[str, object]
    strict: bool | None = None
    native: Mapping[str, object] | None = None

    @staticmethod
    def split(
        tools: Sequence[ToolDefinition] | None,
    ) -> tuple[list[ToolDefinition], list[dict[str, object]]]:
        """``tools`` as a request's ``(tools, builtin_tools)``: function tools, built-in specs."""
        functions = [t for t in tools or () if t.native is None]
        return functions, [dict(t.native) for t in tools or () if t.native is not None]

    def to_openai(self) -> dict[str, object]:
        """The OpenAI function-tool form ``{"type": "function", "function": {...}}``.

        A built-in tool (``native``) is given back as it is.
        """
        if self.native is not None:
            return dict(self.native)
        parameters = self.parameters  # shared, not copied: a tool's schema is built once
        function: dict[str, object] = {
            "name": self.name,
            "description": self.description,
            "parameters": parameters if isinstance(parameters, dict) else dict(parameters),
        }
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


class AudioOutput(TypedDict):
    """How a spoken answer sounds and is encoded (OpenAI Chat Completions ``audio``)."""

    voice: str | dict[str, str]
    """A built-in voice (``"alloy"``, ``"coral"``...) or ``{"id": "voice_..."}``."""
    format: Literal["wav", "aac", "mp3", "flac", "opus", "pcm16"]
    """The clip's encoding; streamed answers need ``"pcm16"`` on OpenAI."""


CachePoint: TypeAlias = Literal["tools", "system", "messages"]
"""Where a prompt-cache point goes: after the tool definitions, after the system prompt, or at
the end of the conversation (the last two user turns: the previous request's point and this
one's)."""


class PromptCache(TypedDict, total=False):
    """Prompt caching asked for one request (``ModelSettings["cache"]``); every key optional.

    Each adapter turns it into its provider's form: ``cache_control`` blocks (Anthropic, on
    Bedrock and Vertex too), ``cachePoint`` blocks (Bedrock Converse), ``prompt_cache_key`` and
    ``prompt_cache_retention`` (OpenAI, both APIs). Gemini caches implicitly: nothing is sent.
    ``{}`` asks for caching with the defaults.
    """

    points: list[CachePoint]
    """Where cache points go (default: all three). A point the caller already put on a block
    counts against the provider's limit of four."""
    ttl: Literal["5m", "1h"]
    """How long the cache should live: ``"1h"`` is Anthropic's and Bedrock's one-hour cache
    (writes cost 2x the input price instead of 1.25x) and OpenAI's extended retention
    (``prompt_cache_retention: "24h"``); ``"5m"`` (the default) sends no lifetime."""
    key: str
    """OpenAI's ``prompt_cache_key``: requests with one key are routed to the same cache
    (one per conversation or per user, say)."""


class ModelSettings(TypedDict, total=False):
    """Generation settings for one request; every key is optional.

    Keys an adapter does not know are sent to the provider as body fields; ``extra_body``
    is the typed way.
    """

    tool_choice: ToolChoice
    parallel_tool_calls: bool
    temperature: float
    top_p: float
    max_tokens: int
    stop: list[str]
    seed: int
    timeout: float
    """Seconds for this request (HTTP adapters)."""
    extra_headers: dict[str, str]
    """HTTP headers added to this request."""
    extra_body: dict[str, object]
    """Provider-specific body fields, sent as they are."""
    modalities: list[Literal["text", "audio"]]
    """``["text", "audio"]`` with ``audio`` asks for a spoken answer (OpenAI Chat
    Completions audio models); APIs without audio output raise ``UnsupportedContentError``."""
    audio: AudioOutput
    """Voice and format of a spoken answer (see ``modalities``)."""
    cache: PromptCache
    """Prompt caching: explicit cache points and their lifetime (see ``PromptCache``); the
    ``PromptCaching`` capability sets it on every request of an agent."""
    service_tier: str
    """The provider's processing tier, sent as it names it: OpenAI ``service_tier``
    (``"auto"``, ``"default"``, ``"flex"``, ``"priority"``), Anthropic ``service_tier``
    (``"auto"``, ``"standard_only"``), Gemini ``service_tier`` (``"standard"``, ``"flex"``,
    ``"priority"``), Bedrock Converse ``serviceTier.type`` (``"default"``, ``"priority"``,
    ``"flex"``)."""


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """The structured answer a request asks for.

    Attributes:
        model: The pydantic model the answer must match.
        mode: How it is asked for: ``"tool"``, a response tool the model calls with the
            answer as arguments (its definition is among the request's ``tools``);
            ``"native"``, the provider's JSON-schema mode (the adapters read it, and put the
            validated value in ``response.metadata["structured_output"]``); ``"prompted"``,
            the schema in the system message and the answer read from the text.
    """

    model: type[BaseModel]
    mode: Literal["tool", "native", "prompted"] = "tool"
    members: tuple[type[BaseModel], ...] = ()
    """A union's members (``A | B``, tool mode: one response tool each), ``model`` being
    the first; empty for one model."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model request, as the agent's loop builds it (a capability may replace it).

    Attributes:
        messages: The prompt: the system message first, then the conversation's view.
        tools: The function tools offered.
        builtin_tools: A provider's built-in tool specs, sent as they are
            (``{"type": "web_search_20250305", ...}``).
        settings: Generation settings (``tool_choice``, ``parallel_tool_calls``...).
        output: The structured answer asked for (None: free text).
        deferred: Tools the model may load on demand (``ToolSearch``); None: none.
    """

    messages: list[Msg]
    tools: list[ToolDefinition] = field(default_factory=list)
    builtin_tools: list[dict[str, object]] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    output: OutputSpec | None = None
    deferred: DeferredTools | None = None

    @property
    def tool_names(self) -> list[str]:
        """The names of the function tools offered."""
        return [tool.name for tool in self.tools]

    @property
    def native_output(self) -> type[BaseModel] | None:
        """The pydantic model of a native-mode answer (the provider's JSON-schema mode)."""
        output = self.output
        return output.model if output is not None and output.mode == "native" else None


@dataclass(frozen=True, slots=True)
class DeferredTools:
    """Tools a request does not offer up front but the model may load on demand.

    ``ToolSearch`` fills this in. An adapter whose provider loads tools natively (Anthropic:
    ``defer_loading`` tools and ``tool_reference`` blocks) sends every deferred definition
    marked deferred, which the provider keeps out of the prompt, and turns each loading
    tool result into references to the tools it loaded: the request's tools never change
    and a load is appended at the end of the conversation, so the cached prefix stays
    byte-identical. ``OpenAIResponsesModel(native_tool_search=True)`` does the same with the
    API's client-executed ``tool_search`` (loads as ``tool_search_output`` items). Every
    other adapter ignores it: the loading tool result itself carries the definitions (in the
    message stream, where appending leaves the prefix untouched).

    Attributes:
        tools: The deferred tools' definitions (not in the request's ``tools``).
        loads: For each loading tool result (by its ``tool_result`` id), the names of the
            tools it loaded, in order.
        search_tool: The name of the tool whose results are the loads (one of the
            request's ``tools``). An adapter whose provider runs the search as a tool of
            its own (OpenAI Responses ``tool_search`` with ``execution: "client"``) sends
            that tool, its calls and results in the provider's form.
    """

    tools: tuple[ToolDefinition, ...] = ()
    loads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    search_tool: str = "search_tools"


@dataclass(slots=True)
class ChatUsage:
    """Token usage, wall time and cost of one model call (or a sum of calls).

    Attributes:
        input_tokens: Prompt tokens billed (cache reads and writes included).
        output_tokens: Completion tokens billed.
        time: Seconds from sending the request to the last byte.
        cache_read_tokens: Of ``input_tokens``, those read from the provider's prompt cache.
        cache_write_tokens: Of ``input_tokens``, those written to the prompt cache.
        cache_write_1h_tokens: Of ``cache_write_tokens``, those written to a one-hour cache
            (priced higher than the default five-minute one).
        cost: USD, from the price table (``agentkit.models._prices``); None when the price
            is unknown. A sum is None as soon as one of its non-empty parts is.
        reasoning_tokens: Of ``output_tokens``, those spent on hidden reasoning.
        input_audio_tokens: Of ``input_tokens``, those of audio (priced apart).
        output_audio_tokens: Of ``output_tokens``, those of audio (priced apart).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    time: float = 0.0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None
    reasoning_tokens: int = 0
    input_audio_tokens: int = 0
    output_audio_tokens: int = 0
    cache_write_1h_tokens: int = 0

    def __add__(self, other: ChatUsage) -> ChatUsage:
        return ChatUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.time + other.time,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=_sum_cost(self, other),
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            input_audio_tokens=self.input_audio_tokens + other.input_audio_tokens,
            output_audio_tokens=self.output_audio_tokens + other.output_audio_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    @property
    def is_empty(self) -> bool:
        """Whether no token was counted (a run's starting total, a scripted answer)."""
        return not (self.input_tokens or self.output_tokens)

    def to_dict(self) -> dict[str, float]:
        """Return a JSON-safe dict (token details and cost only when there are some)."""
        out: dict[str, float] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "time": self.time,
        }
        if self.cache_read_tokens:
            out["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        if self.cache_write_1h_tokens:
            out["cache_write_1h_tokens"] = self.cache_write_1h_tokens
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        if self.input_audio_tokens:
            out["input_audio_tokens"] = self.input_audio_tokens
        if self.output_audio_tokens:
            out["output_audio_tokens"] = self.output_audio_tokens
        if self.cost is not None:
            out["cost"] = self.cost
        return out


def _sum_cost(a: ChatUsage, b: ChatUsage) -> float | None:
    """The cost of two usages together: unknown if a part with tokens has an unknown cost.

    An empty usage (no tokens, e.g. a run's starting total) counts as free, so a sum of
    priced calls stays priced; one unpriced call makes the total unknown, never too low.
    """
    if (a.cost is None and not a.is_empty) or (b.cost is None and not b.is_empty):
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
    id: str = field(default_factory=new_id)
    metadata: dict[str, Any] | None = None

    def get_text(self) -> str:
        """Join the text blocks."""
        return text_of(self.content)

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        """The ``tool_use`` blocks, in order."""
        return [b for b in self.content if b["type"] == "tool_use"]


class ChatModel:
    """Base class of every model adapter and test double.

    Callers ask :meth:`request` (one whole answer) or :meth:`request_stream` (cumulative
    chunks), both with one :class:`ModelRequest`. An adapter implements :meth:`_request`
    and :meth:`_request_stream`; the public methods refuse first while real model requests
    are blocked (``agentkit.testing.block_model_requests``, unless the class is
    ``offline``), so no adapter can forget that check.

    Args:
        model_name: The provider's model name.
        stream: Whether the agent streams this model's answers (:meth:`request_stream`).
    """

    provider: str = "unknown"
    native_output: bool = False
    """True for adapters that can ask their provider for JSON matching a schema
    (``OutputSpec`` mode ``"native"``; ``NativeOutput`` needs it)."""
    offline: bool = False
    """True for models that never reach a network (test doubles): not blocked by
    ``agentkit.testing.block_model_requests``."""

    def __init__(self, model_name: str, stream: bool = False) -> None:
        self.model_name = model_name
        self.stream = stream

    def request(self, request: ModelRequest) -> Coroutine[Any, Any, ChatResponse]:
        """Ask for the next assistant turn and wait for the whole answer (await the result).

        Args:
            request: The messages, tools, settings and structured output asked for.

        Returns:
            The adapter's coroutine, whose result is the complete answer.

        Raises:
            ModelRequestsBlocked: real model requests are blocked now (raised here, before
                any coroutine is made).
            ModelError: a subclass describing the failure (raised by the coroutine).
        """
        self._check_allowed()
        # The adapter's coroutine itself, not one that awaits it: a request waiting for its
        # answer holds one coroutine less, which the collector would walk all that time.
        return self._request(request)

    def request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Ask for the next assistant turn as cumulative chunks (the last one is complete).

        Same argument and errors as :meth:`request`; a blocked request is refused here,
        before the stream is made (so before any connection).
        """
        self._check_allowed()
        return self._request_stream(request)

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """The adapter's implementation of :meth:`request` (every adapter has one)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _request()")

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """The adapter's implementation of :meth:`request_stream`.

        This default, for an adapter without streaming, yields the whole answer as one chunk.
        """
        yield await self._request(request)

    def _check_allowed(self) -> None:
        if BLOCKED and not self.offline:
            from agentkit.exceptions import ModelRequestsBlocked

            raise ModelRequestsBlocked(
                f"{type(self).__name__}({self.model_name!r}) was asked for an answer while "
                f"model requests are blocked ({BLOCKED[-1]}); use a test double from "
                "agentkit.testing (ScriptedModel, FunctionModel, TestModel)",
                provider=self.provider,
            )

    async def aclose(self) -> None:
        """Release network resources (HTTP clients). Safe to call more than once."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r}, stream={self.stream})"


BLOCKED: list[str] = []
"""Reasons real model requests are blocked now (``agentkit.testing.block_model_requests``)."""

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

import contextvars
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, TypeVar, cast

from agentkit.messages import ContentBlock, Msg, ToolUseBlock, text_of

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "AudioOutput",
    "CachePoint",
    "ChatModel",
    "ChatResponse",
    "ChatUsage",
    "ModelOutput",
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

    ``Tool.definition`` builds one; adapters turn it into their provider's format
    (:meth:`to_openai` for OpenAI-compatible APIs).

    Attributes:
        name: The tool's name.
        description: What it does (the model reads it).
        parameters: The JSON schema of its arguments (an object schema).
        strict: Ask the provider to enforce the schema exactly (None: provider default).
        native: A provider's built-in tool spec (``{"type": "web_search_20250305", ...}``),
            sent as it is instead of a function tool (None for function tools).
    """

    name: str
    description: str
    parameters: Mapping[str, object]
    strict: bool | None = None
    native: Mapping[str, object] | None = None

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

    @classmethod
    def from_openai(cls, schema: Mapping[str, Any]) -> ToolDefinition:
        """Read an OpenAI function-tool dict (with or without the ``function`` wrapper).

        A dict with another ``type`` (a provider's built-in tool) or with keys of its own
        (``cache_control``...) is also kept as ``native``, and sent back as it is.
        """
        kind = schema.get("type", "function")
        if "function" not in schema and kind != "function":
            return cls(str(schema.get("name", kind)), "", {}, native=schema)
        function = schema.get("function", schema)
        extra = set(schema) - _OUTER_KEYS or set(function) - _FUNCTION_KEYS
        return cls(
            name=function["name"],
            description=function.get("description", ""),
            parameters=function.get("parameters", {"type": "object", "properties": {}}),
            strict=function.get("strict"),
            native=schema if extra else None,
        )


_OUTER_KEYS = frozenset({"type", "function", "name", "description", "parameters", "strict"})
_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})


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

    Keys an adapter does not know are sent to the provider as body fields (the
    compatibility path of ``model(..., some_field=...)``); ``extra_body`` is the typed way.
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
    output_type: type[BaseModel]
    """Ask for an answer matching this pydantic model (the provider's native structured
    output); the validated value is put in ``response.metadata["structured_output"]``."""
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
            ``"native"``, the provider's JSON-schema mode (the model is also in
            ``settings["output_type"]``, which the adapters read); ``"prompted"``, the
            schema in the system message and the answer read from the text.
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
    """

    messages: list[Msg]
    tools: list[ToolDefinition] = field(default_factory=list)
    builtin_tools: list[dict[str, object]] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    output: OutputSpec | None = None

    def tool_definitions(self) -> list[ToolDefinition] | None:
        """Every tool as the adapters take them today (None: no tools).

        The one place where a request becomes the adapters' arguments: built-in tools
        travel as ``ToolDefinition.native``, after the function tools.
        """
        if not self.builtin_tools:
            return self.tools or None
        builtin = [ToolDefinition.from_openai(spec) for spec in self.builtin_tools]
        return [*self.tools, *builtin]


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
    id: str = field(default_factory=lambda: os.urandom(16).hex())
    metadata: dict[str, Any] | None = None

    def get_text(self) -> str:
        """Join the text blocks."""
        return text_of(self.content)

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        """The ``tool_use`` blocks, in order."""
        return [b for b in self.content if b["type"] == "tool_use"]


ModelOutput: TypeAlias = ChatResponse | AsyncIterator[ChatResponse]


class ChatModel:
    """Base class of every model adapter and test double.

    An adapter implements :meth:`request` (one whole answer) and :meth:`request_stream`
    (cumulative chunks), both taking typed tools and settings. ``await model(...)`` is
    the compatibility form (AgentScope's): it turns its arguments into those and calls one
    of them. A subclass written against older agentkit versions that implements only
    ``__call__`` keeps working: ``request``/``request_stream`` then call it.

    Args:
        model_name: The provider's model name.
        stream: Whether ``await model(...)`` returns an async iterator of cumulative chunks
            instead of one response (and whether the agent streams).
    """

    provider: str = "unknown"
    native_output: bool = False
    """True for adapters that can ask their provider for JSON matching a schema
    (``settings["output_type"]``; ``NativeOutput`` needs it)."""
    offline: bool = False
    """True for models that never reach a network (test doubles): not blocked by
    ``agentkit.testing.block_model_requests``."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "__call__" in own and "request" not in own and "request_stream" not in own:
            parent = cls.__mro__[1]
            if issubclass(parent, ChatModel) and _implements_request(parent):
                _route_through_call(cls, parent)
        if cls.offline:
            return
        for name in ("request", "request_stream", "__call__"):
            method = cls.__dict__.get(name)
            if method is not None:
                setattr(cls, name, _guarded(method, stream=name == "request_stream"))

    def __init__(self, model_name: str, stream: bool = False) -> None:
        self.model_name = model_name
        self.stream = stream

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
            The complete answer.

        Raises:
            ModelError: a subclass describing the failure.
        """
        output = await self._legacy_call(messages, tools, settings)
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

        Same arguments and errors as :meth:`request`. This default (for an adapter with a
        ``request`` only) yields the whole answer as one chunk.
        """
        if not _implements_call(type(self)):
            yield await self.request(messages, tools, settings)
            return
        async for chunk in self._legacy_stream(messages, tools, settings):
            yield chunk

    async def _legacy_stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None,
        settings: ModelSettings | None,
        *,
        routed: bool = False,
    ) -> AsyncGenerator[ChatResponse, None]:
        """The chunks of an older adapter's ``__call__``; its stream is closed however it ends."""
        output = await self._legacy_call(messages, tools, settings, routed=routed)
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

    async def _legacy_call(
        self,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None,
        settings: ModelSettings | None,
        *,
        routed: bool = False,
    ) -> ModelOutput:
        """Call the ``__call__`` of a subclass that implements only that (older adapters).

        ``routed``: the call comes from :func:`_route_through_call`, so the override's
        ``super().__call__`` must reach the parent's ``request`` (see there).
        """
        if not _implements_call(type(self)):
            raise NotImplementedError(
                f"{type(self).__name__} implements neither request() nor __call__()"
            )
        args: dict[str, Any] = dict(settings or {})
        if tools:
            args["tools"] = [t.to_openai() for t in tools]
        if "output_type" in args:
            args["structured_model"] = args.pop("output_type")
        token = _ROUTED.set(self) if routed else None
        try:
            return await self(messages, **args)
        finally:
            if token is not None:
                _ROUTED.reset(token)

    async def __call__(
        self,
        messages: Sequence[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        structured_model: type[BaseModel] | None = None,
        **kwargs: Any,
    ) -> ModelOutput:
        """Ask the model for the next assistant turn (the compatibility form).

        Args:
            messages: The conversation, system message first if any.
            tools: OpenAI-style function schemas (``{"type": "function", "function": {...}}``).
            tool_choice: How the model may use the tools.
            structured_model: Ask for an answer matching this pydantic model; the validated
                value is put in ``response.metadata["structured_output"]``.
            **kwargs: Settings (``ModelSettings`` keys) and provider body fields;
                ``stream`` overrides the model's ``stream``.

        Returns:
            A ``ChatResponse``, or an async iterator of cumulative chunks when streaming
            (the request is sent, and its first chunk received, before this returns, so
            errors are raised here).

        Raises:
            ModelError: a subclass describing the failure.
        """
        stream = bool(kwargs.pop("stream", self.stream))
        settings = cast(ModelSettings, kwargs)
        if tool_choice is not None:
            settings["tool_choice"] = tool_choice
        if structured_model is not None:
            settings["output_type"] = structured_model
        definitions = [ToolDefinition.from_openai(t) for t in tools] if tools else None
        if not stream:
            return await self.request(messages, definitions, settings)
        return await _started(self.request_stream(messages, definitions, settings))

    async def aclose(self) -> None:
        """Release network resources (HTTP clients). Safe to call more than once."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r}, stream={self.stream})"


def _implements_request(cls: type[ChatModel]) -> bool:
    """Whether ``cls`` has typed request methods of its own (not the base's defaults)."""
    return cls.request is not _BASE_REQUEST and not _implements_call(cls)


_ROUTED: contextvars.ContextVar[object] = contextvars.ContextVar("agentkit_routed", default=None)


def _route_through_call(cls: type[ChatModel], parent: type[ChatModel]) -> None:
    """Make ``request``/``request_stream`` of ``cls`` go through its own ``__call__``.

    For an older-style subclass of a typed adapter that overrides only ``__call__``
    (to log, or to change arguments) and calls ``super().__call__``: the agent asks
    ``request``, which must not skip that override. The override's ``super().__call__``
    reaches the base shim, which asks ``request`` again: that inner call goes to the
    parent's implementation (marked by a context variable), so nothing loops.
    """

    async def request(
        self: ChatModel,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None = None,
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        if _ROUTED.get() is self:
            return await parent.request(self, messages, tools, settings)
        token = _ROUTED.set(self)
        try:
            return await ChatModel.request(self, messages, tools, settings)
        finally:
            _ROUTED.reset(token)

    def request_stream(
        self: ChatModel,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ChatResponse, None]:
        if _ROUTED.get() is self:
            return parent.request_stream(self, messages, tools, settings)
        return self._legacy_stream(messages, tools, settings, routed=True)

    for name, method in (("request", request), ("request_stream", request_stream)):
        setattr(cls, name, method)  # set on the class as its own methods


def _implements_call(cls: type[ChatModel]) -> bool:
    """Whether ``cls`` (an older-style adapter) implements ``__call__`` itself."""
    return getattr(cls.__call__, "__wrapped__", cls.__call__) is not _BASE_CALL


async def _started(
    chunks: AsyncGenerator[ChatResponse, None],
) -> AsyncGenerator[ChatResponse, None]:
    """``chunks`` with its first chunk already received (errors raised now, not later)."""
    try:
        first = await anext(chunks)
    except StopAsyncIteration:
        first = None
    except BaseException:
        await chunks.aclose()
        raise
    return _resumed(first, chunks)


async def _resumed(
    first: ChatResponse | None, rest: AsyncGenerator[ChatResponse, None]
) -> AsyncGenerator[ChatResponse, None]:
    try:
        if first is None:
            return
        yield first
        async for chunk in rest:
            yield chunk
    finally:
        await rest.aclose()


_BASE_CALL = ChatModel.__call__
_BASE_REQUEST = ChatModel.request

BLOCKED: list[str] = []
"""Reasons real model requests are blocked now (``agentkit.testing.block_model_requests``)."""


def _check_blocked(model: ChatModel) -> None:
    if BLOCKED:
        from agentkit.exceptions import ModelRequestsBlocked

        raise ModelRequestsBlocked(
            f"{type(model).__name__}({model.model_name!r}) was asked for an answer while "
            f"model requests are blocked ({BLOCKED[-1]}); use a test double from "
            "agentkit.testing (ScriptedModel, FunctionModel, TestModel)",
            provider=model.provider,
        )


_Method = TypeVar("_Method", bound=Callable[..., object])


def _guarded(method: _Method, *, stream: bool) -> _Method:
    """Wrap an adapter's request method so it refuses while model requests are blocked.

    ``request_stream`` (an async generator function) refuses when called, before its
    generator is made.
    """
    import functools

    if stream:

        @functools.wraps(method)
        def guarded_stream(self: ChatModel, *args: object, **kwargs: object) -> object:
            _check_blocked(self)
            return method(self, *args, **kwargs)

        return cast(_Method, guarded_stream)

    @functools.wraps(method)
    async def guarded(self: ChatModel, *args: object, **kwargs: object) -> object:
        _check_blocked(self)
        return await cast(Callable[..., Awaitable[object]], method)(self, *args, **kwargs)

    return cast(_Method, guarded)

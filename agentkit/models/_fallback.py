"""``FallbackModel``: try the next model when one fails (after its own retries).

Each model keeps its retry policy; only when a model gives up with one of the ``on`` errors
is the next one asked, with the same request. The answer says which model gave it
(``response.metadata["model"]``, so a trace's ``gen_ai.response.model``), and each model
that failed is an ``agentkit.fallback`` event on the request's span.

A streamed answer falls back only before its first chunk: once chunks have reached the
caller, a failure is the caller's (the text already shown cannot be taken back).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import agentkit._seams as seams
from agentkit.exceptions import ModelAPIError, ModelConnectionError
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest

__all__ = ["FallbackModel"]

DEFAULT_ON: tuple[type[BaseException], ...] = (ModelAPIError, ModelConnectionError)


def _mark(response: ChatResponse, model: ChatModel, failed: list[str]) -> ChatResponse:
    metadata = dict(response.metadata or {})
    metadata.setdefault("model", model.model_name)
    if failed:
        metadata["fallback_from"] = list(failed)
    response.metadata = metadata
    return response


class FallbackModel(ChatModel):
    """Several models as one: the first that answers wins.

    Args:
        models: The models, in order of preference (at least one).
        on: The errors that move on to the next model (default: API errors, including
            rate limits, and connection errors). Anything else propagates at once.

    Attributes:
        models: The models, in order.
        last_model: The model that gave the last answer (None before the first).

    Example:
        >>> from agentkit.models import FallbackModel, OpenAIChatModel, AnthropicChatModel
        >>> model = FallbackModel(  # doctest: +SKIP
        ...     [OpenAIChatModel("gpt-4o"), AnthropicChatModel("claude-sonnet-4-5")]
        ... )
    """

    offline = True
    """Its models check ``block_model_requests`` themselves (a scripted one still answers)."""

    def __init__(
        self,
        models: Sequence[ChatModel],
        *,
        on: tuple[type[BaseException], ...] = DEFAULT_ON,
    ) -> None:
        models = list(models)
        if not models:
            raise ValueError("FallbackModel needs at least one model")
        if not on or not all(isinstance(e, type) and issubclass(e, Exception) for e in on):
            raise TypeError("on= must be a non-empty tuple of exception classes")
        primary = models[0]
        super().__init__(primary.model_name, primary.stream)
        self.provider = primary.provider
        self.models = models
        self.on = on
        self.last_model: ChatModel | None = None

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """Ask each model in turn until one answers (see ``ChatModel.request``).

        Raises:
            ModelError: the last model's error when every model failed with an ``on``
                error; any other error as soon as it happens.
        """
        failed: list[str] = []
        for i, model in enumerate(self.models):
            try:
                response = await model.request(request)
            except self.on as exc:
                self._failed(model, exc, failed, last=i == len(self.models) - 1)
                continue
            self.last_model = model
            return _mark(response, model, failed)
        raise AssertionError("unreachable")  # pragma: no cover - the last model raises

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Stream from the first model whose stream starts (see ``ChatModel.request_stream``).

        A model whose stream fails before its first chunk is passed over; a failure after
        it is the caller's.
        """
        failed: list[str] = []
        for i, model in enumerate(self.models):
            stream = model.request_stream(request)
            try:
                first = await _first_chunk(stream)
            except self.on as exc:
                self._failed(model, exc, failed, last=i == len(self.models) - 1)
                continue
            self.last_model = model
            try:
                if first is None:
                    return
                yield _mark(first, model, failed)
                async for chunk in stream:
                    yield _mark(chunk, model, failed)
            finally:
                await stream.aclose()
            return

    def _failed(
        self, model: ChatModel, exc: BaseException, failed: list[str], *, last: bool
    ) -> None:
        """Record a model that failed with an ``on`` error; re-raise it for the last one."""
        if last:
            raise exc
        seams.fallback_attempt(model.model_name, exc)
        failed.append(model.model_name)

    async def aclose(self) -> None:
        """Close every model."""
        for model in self.models:
            await model.aclose()

    def __repr__(self) -> str:
        return f"FallbackModel({self.models!r})"


async def _first_chunk(stream: AsyncGenerator[ChatResponse, None]) -> ChatResponse | None:
    """The stream's first chunk (None for an empty stream); a failure closes the stream."""
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None
    except BaseException:
        await stream.aclose()
        raise

"""Public test doubles: drive an agent deterministically, without a network or an API key.

``ScriptedModel`` replays a script, one item per call; ``FunctionModel`` computes each answer
from the conversation. Both implement ``ChatModel`` exactly like the real providers, including
streaming of cumulative chunks (with partial tool-call arguments), so an agent under test
takes the same code paths as in production.

Example:
    >>> from agentkit.testing import ScriptedModel, tool_use
    >>> model = ScriptedModel([[tool_use("add", a=1, b=2)], "The sum is 3."])
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from agentkit.exceptions import ScriptExhaustedError, UsageError
from agentkit.messages import (
    ContentBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    validate_block,
)
from agentkit.models.base import ChatModel, ChatResponse, ChatUsage, ModelOutput, ToolChoice

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "FunctionModel",
    "ModelRequest",
    "ScriptItem",
    "ScriptedModel",
    "text",
    "thinking",
    "tool_use",
]

ScriptItem: TypeAlias = ChatResponse | str | list[ContentBlock] | dict[str, Any] | BaseException
"""One scripted answer: a response, a text answer, a list of blocks, one block, or an error."""


def tool_use(name: str, id: str | None = None, /, **arguments: Any) -> ToolUseBlock:
    """Build a ``tool_use`` block, generating an id when none is given."""
    return ToolUseBlock(
        type="tool_use", id=id or f"call_{uuid.uuid4().hex[:12]}", name=name, input=arguments
    )


def text(value: str) -> TextBlock:
    """Build a text block."""
    return TextBlock(type="text", text=value)


def thinking(value: str) -> ThinkingBlock:
    """Build a thinking block."""
    return ThinkingBlock(type="thinking", thinking=value)


@dataclass(slots=True)
class ModelRequest:
    """What a test double received in one call."""

    messages: list[Msg]
    tools: list[dict[str, Any]] | None
    tool_choice: ToolChoice | None = None
    structured_model: type[BaseModel] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered in this call."""
        return [t["function"]["name"] for t in self.tools or []]


def _to_response(item: ScriptItem, call_index: int) -> ChatResponse:
    """Normalise a script item into a ChatResponse (raising scripted exceptions)."""
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, ChatResponse):
        response = item
    elif isinstance(item, str):
        response = ChatResponse(content=[TextBlock(type="text", text=item)])
    elif isinstance(item, dict):
        response = ChatResponse(content=[validate_block(item, f"script[{call_index}]")])
    elif isinstance(item, list):
        blocks = [validate_block(b, f"script[{call_index}][{i}]") for i, b in enumerate(item)]
        response = ChatResponse(content=blocks)
    else:
        raise UsageError(f"script item {call_index} has unsupported type {type(item).__name__}")
    if response.usage is None:
        out = sum(len(json.dumps(b)) for b in response.content) // 4
        response.usage = ChatUsage(input_tokens=0, output_tokens=out)
    return response


def _split(value: str, parts: int) -> list[str]:
    """Cut ``value`` into at most ``parts`` prefixes of growing length (at least one)."""
    if not value:
        return [value]
    step = max(1, -(-len(value) // parts))
    return [value[: i + step] for i in range(0, len(value), step)]


def _stream_states(final: list[ContentBlock], parts: int) -> list[list[ContentBlock]]:
    """Cumulative content states that grow block by block to ``final``."""
    states: list[list[ContentBlock]] = []
    done: list[ContentBlock] = []
    for block in final:
        if block["type"] == "text":
            states += [
                [*done, TextBlock(type="text", text=p)] for p in _split(block["text"], parts)
            ]
        elif block["type"] == "thinking":
            for p in _split(block["thinking"], parts):
                states.append([*done, {**block, "thinking": p}])
        elif block["type"] == "tool_use":
            raw = json.dumps(block["input"])
            for p in _split(raw, parts)[:-1]:
                partial = ToolUseBlock(
                    type="tool_use", id=block["id"], name=block["name"], input={}, raw_input=p
                )
                states.append([*done, partial])
            states.append([*done, block])
        else:
            states.append([*done, block])
        done = states[-1] if states else [block]
    return states or [[]]


class _ScriptedBase(ChatModel):
    """Shared machinery: request recording, delays, streaming of cumulative chunks."""

    provider = "scripted"

    def __init__(
        self,
        model_name: str,
        stream: bool,
        delay: float,
        chunk_delay: float,
        chunks_per_block: int,
    ) -> None:
        super().__init__(model_name, stream)
        self.delay = delay
        self.chunk_delay = chunk_delay
        self.chunks_per_block = max(1, chunks_per_block)
        self.requests: list[ModelRequest] = []

    async def _next(self, request: ModelRequest) -> ChatResponse:
        raise NotImplementedError

    async def __call__(
        self,
        messages: Sequence[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        structured_model: type[BaseModel] | None = None,
        **kwargs: Any,
    ) -> ModelOutput:
        """Record the request and answer with the next response (see class docs)."""
        request = ModelRequest(list(messages), tools, tool_choice, structured_model, kwargs)
        self.requests.append(request)
        started = time.perf_counter()
        if self.delay:
            await anyio.sleep(self.delay)
        response = await self._next(request)
        if response.usage is not None:
            response.usage.time = time.perf_counter() - started
        if not self.stream:
            return response
        return self._stream(response)

    async def _stream(self, response: ChatResponse) -> AsyncIterator[ChatResponse]:
        states = _stream_states(response.content, self.chunks_per_block)
        for i, state in enumerate(states):
            if i and self.chunk_delay:
                await anyio.sleep(self.chunk_delay)
            last = i == len(states) - 1
            yield ChatResponse(
                content=response.content if last else state,
                usage=response.usage if last else None,
                id=response.id,
                metadata=response.metadata if last else None,
            )


class ScriptedModel(_ScriptedBase):
    """A model that replays ``responses`` in order, one per call.

    Args:
        responses: Script items: a ``ChatResponse``; a ``str`` (a text answer); a list of
            blocks (e.g. several ``tool_use`` blocks for parallel calls); one block dict;
            or an exception instance, raised by that call.
        stream: Return cumulative chunks like a streaming provider.
        model_name: Reported model name.
        delay: Seconds to wait before answering (cancellable), to test interrupts.
        chunk_delay: Seconds between streamed chunks (cancellable).
        chunks_per_block: How many pieces each text/thinking/tool-argument block streams in.

    Attributes:
        requests: One ``ModelRequest`` per call, in order.
    """

    def __init__(
        self,
        responses: Sequence[ScriptItem],
        stream: bool = False,
        *,
        model_name: str = "scripted",
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        chunks_per_block: int = 4,
    ) -> None:
        super().__init__(model_name, stream, delay, chunk_delay, chunks_per_block)
        self.responses: list[ScriptItem] = list(responses)
        self.calls = 0

    @property
    def remaining(self) -> int:
        """Scripted responses not yet used."""
        return len(self.responses) - self.calls

    async def _next(self, request: ModelRequest) -> ChatResponse:
        index = self.calls
        if index >= len(self.responses):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.model_name!r} ran out of responses: call {index + 1} "
                f"but only {len(self.responses)} scripted; add items to the script",
                provider=self.provider,
            )
        self.calls += 1
        return _to_response(self.responses[index], index)


ModelFunction: TypeAlias = Callable[
    [list[Msg], list[dict[str, Any]] | None], ScriptItem | Awaitable[ScriptItem]
]


class FunctionModel(_ScriptedBase):
    """A model whose every answer is computed by ``fn(messages, tools)``.

    Args:
        fn: Sync or async callable returning any ``ScriptItem`` form.
        stream: Return cumulative chunks like a streaming provider.
        model_name: Reported model name.
        delay: Seconds to wait before answering (cancellable).
        chunk_delay: Seconds between streamed chunks (cancellable).
        chunks_per_block: How many pieces each block streams in.
    """

    def __init__(
        self,
        fn: ModelFunction,
        stream: bool = False,
        *,
        model_name: str = "function",
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        chunks_per_block: int = 4,
    ) -> None:
        super().__init__(model_name, stream, delay, chunk_delay, chunks_per_block)
        self.fn = fn

    async def _next(self, request: ModelRequest) -> ChatResponse:
        item = self.fn(request.messages, request.tools)
        if inspect.isawaitable(item):
            item = await item
        return _to_response(item, len(self.requests) - 1)

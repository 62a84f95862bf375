"""Public test doubles: drive an agent deterministically, without a network or an API key.

``ScriptedModel`` replays a script, one item per call; ``FunctionModel`` computes each answer
from the conversation; ``TestModel`` calls every tool once with schema-valid arguments, then
answers. All implement ``ChatModel`` exactly like the real providers, including
streaming of cumulative chunks (with partial tool-call arguments), so an agent under test
takes the same code paths as in production.

``block_model_requests()`` makes every real model (an adapter that reaches a network)
refuse to answer, so a test suite cannot call a paid API by accident.

Example:
    >>> from agentkit.testing import ScriptedModel, tool_use
    >>> model = ScriptedModel([[tool_use("add", a=1, b=2)], "The sum is 3."])
"""

from __future__ import annotations

import contextlib
import inspect
import json
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from agentkit._ids import new_id
from agentkit._lazy import lazy_exports
from agentkit.exceptions import ScriptExhaustedError, UsageError
from agentkit.messages import (
    ContentBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    validate_block,
)
from agentkit.models._base import (
    BLOCKED,
    ChatModel,
    ChatResponse,
    ChatUsage,
    ModelRequest,
    ToolChoice,
    ToolDefinition,
)

if TYPE_CHECKING:
    from agentkit.testing._contracts import (
        AgentFactory,
        ContractFailure,
        ContractReport,
        check_contracts,
    )
    from agentkit.testing._durable_contracts import check_durable_contracts
    from agentkit.testing._served_contracts import check_served_contracts

__all__ = [
    "AgentFactory",
    "ContractFailure",
    "ContractReport",
    "FunctionModel",
    "RequestInfo",
    "ScriptItem",
    "ScriptedModel",
    "TestModel",
    "block_model_requests",
    "check_contracts",
    "check_durable_contracts",
    "check_served_contracts",
    "text",
    "thinking",
    "tool_use",
]

# The contract suite drives agents: imported on first use, so that a test importing only
# the models does not load the agent loop.
_CONTRACTS = "agentkit.testing._contracts"
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        __all__,
        {
            **dict.fromkeys(
                ("AgentFactory", "ContractFailure", "ContractReport", "check_contracts"),
                _CONTRACTS,
            ),
            "check_durable_contracts": "agentkit.testing._durable_contracts",
            "check_served_contracts": "agentkit.testing._served_contracts",
        },
    )

ScriptItem: TypeAlias = (
    ChatResponse | str | list[ContentBlock] | ContentBlock | dict[str, object] | BaseException
)
"""One scripted answer: a response, a text answer, a list of blocks, one block, or an error."""


def tool_use(name: str, id: str | None = None, /, **arguments: Any) -> ToolUseBlock:
    """Build a ``tool_use`` block, generating an id when none is given."""
    return ToolUseBlock(type="tool_use", id=id or new_id("call_", 6), name=name, input=arguments)


def text(value: str) -> TextBlock:
    """Build a text block."""
    return TextBlock(type="text", text=value)


def thinking(value: str) -> ThinkingBlock:
    """Build a thinking block."""
    return ThinkingBlock(type="thinking", thinking=value)


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
    offline = True

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

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """Record the request and answer with the next response (see class docs)."""
        return await self._answer(request)

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Like :meth:`request`, in cumulative chunks (one chunk when built unstreamed)."""
        response = await self._answer(request)
        if not self.stream:
            yield response
            return
        async for chunk in self._stream(response):
            yield chunk

    async def _answer(self, request: ModelRequest) -> ChatResponse:
        self.requests.append(request)
        started = time.perf_counter()
        if self.delay:
            await anyio.sleep(self.delay)
        response = await self._next(request)
        if response.usage is not None:
            response.usage.time = time.perf_counter() - started
        return response

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
        stream: Stream cumulative chunks like a streaming provider (``request_stream``).
        model_name: Reported model name.
        delay: Seconds to wait before answering (cancellable), to test interrupts.
        chunk_delay: Seconds between streamed chunks (cancellable).
        chunks_per_block: How many pieces each text/thinking/tool-argument block streams in.
        strict: Used as a context manager (``with ScriptedModel([...], strict=True) as
            model:``), check on exit that every response was used.

    Attributes:
        requests: The ``ModelRequest`` of each call, in order (``tools`` holds
            ``ToolDefinition``s, ``settings["tool_choice"]`` the choice, ``output`` the
            structured answer asked for).
    """

    native_output = True

    def __init__(
        self,
        responses: Sequence[ScriptItem],
        stream: bool = False,
        *,
        model_name: str = "scripted",
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        chunks_per_block: int = 4,
        strict: bool = False,
    ) -> None:
        super().__init__(model_name, stream, delay, chunk_delay, chunks_per_block)
        self.responses: list[ScriptItem] = list(responses)
        self.calls = 0
        self.strict = strict

    @property
    def remaining(self) -> int:
        """Scripted responses not yet used."""
        return len(self.responses) - self.calls

    def assert_complete(self) -> None:
        """Fail unless every scripted response was used.

        Raises:
            AssertionError: naming the unused responses (a test that stopped early, or a
                script longer than the conversation it meant to drive).
        """
        if self.remaining > 0:
            unused = [_describe(item) for item in self.responses[self.calls :]]
            raise AssertionError(
                f"ScriptedModel {self.model_name!r} used {self.calls} of "
                f"{len(self.responses)} responses; unused: {', '.join(unused)}"
            )

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """With ``strict=True``, check :meth:`assert_complete` (unless the block failed)."""
        if self.strict and exc_type is None:
            self.assert_complete()

    async def __aenter__(self) -> ScriptedModel:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Like ``__exit__``; the model has no connection to close."""
        self.__exit__(exc_type)

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


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a ``FunctionModel`` function learns about a request besides the messages.

    Attributes:
        tools: The function tools offered.
        tool_choice: How the model may use them (None: provider default).
        settings: The other generation settings (``parallel_tool_calls``...).
        request: The whole request (built-in tools and the structured output asked for
            too).
    """

    tools: list[ToolDefinition]
    tool_choice: ToolChoice | None
    settings: dict[str, Any]
    request: ModelRequest

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered."""
        return [t.name for t in self.tools]


ModelFunction: TypeAlias = Callable[[list[Msg], RequestInfo], ScriptItem | Awaitable[ScriptItem]]
"""``fn(messages, info)``: the conversation and what else the request holds."""


class FunctionModel(_ScriptedBase):
    """A model whose every answer is computed by ``fn(messages, info)``.

    Args:
        fn: Sync or async callable returning any ``ScriptItem`` form; ``info`` is a
            ``RequestInfo`` (tools, tool_choice, settings, the whole request).
        stream: Stream cumulative chunks like a streaming provider (``request_stream``).
        model_name: Reported model name.
        delay: Seconds to wait before answering (cancellable).
        chunk_delay: Seconds between streamed chunks (cancellable).
        chunks_per_block: How many pieces each block streams in.
    """

    native_output = True

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
        settings: dict[str, Any] = dict(request.settings)
        choice = settings.pop("tool_choice", None)
        info = RequestInfo(list(request.tools), choice, settings, request)
        item = self.fn(list(request.messages), info)
        if inspect.isawaitable(item):
            item = await item
        return _to_response(item, len(self.requests) - 1)


class TestModel(_ScriptedBase):
    """A model that calls every offered tool once, with schema-valid arguments, then answers.

    The first request calls all the tools in one turn (parallel calls); the next one
    answers: through ``generate_response`` with schema-valid arguments when structured
    output is asked for, else with ``text`` (default: the tool results as JSON). Good for
    smoke-testing a toolkit end to end without writing a script.

    Args:
        text: The final answer (None: a JSON object of the tool results by call id).
        call_tools: Names of the tools to call (None: all of them).
        stream: Stream cumulative chunks like a streaming provider (``request_stream``).
        model_name: Reported model name.
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self,
        text: str | None = None,
        *,
        call_tools: Sequence[str] | None = None,
        stream: bool = False,
        model_name: str = "test",
    ) -> None:
        super().__init__(model_name, stream, 0.0, 0.0, 4)
        self.text = text
        self.call_tools = None if call_tools is None else set(call_tools)
        self.called = False

    async def _next(self, request: ModelRequest) -> ChatResponse:
        tools = request.tools
        response = next((t for t in tools if t.name == "generate_response"), None)
        wanted = [
            t
            for t in tools
            if t is not response and (self.call_tools is None or t.name in self.call_tools)
        ]
        index = len(self.requests)
        if wanted and not self.called and request.settings.get("tool_choice") != "none":
            self.called = True
            return _to_response([_call(t, f"test_{index}_{i}") for i, t in enumerate(wanted)], 0)
        if response is not None:
            return _to_response([_call(response, f"test_{index}_r")], 0)
        return _to_response(self.text if self.text is not None else _results(request), 0)


def _call(tool: ToolDefinition, call_id: str) -> ToolUseBlock:
    arguments = example_value(tool.parameters, tool.parameters)
    # An object schema gives a dict; a tool's arguments are an object even when it is not.
    inputs = arguments if isinstance(arguments, dict) else {}
    return ToolUseBlock(type="tool_use", id=call_id, name=tool.name, input=inputs)


def _results(request: ModelRequest) -> str:
    found: dict[str, object] = {}
    for msg in request.messages:
        for block in msg.get_blocks("tool_result"):
            found[block["id"]] = block["output"]
    return json.dumps(found, ensure_ascii=False, default=str)


_FORMATS = {
    "date": "2026-01-31",
    "date-time": "2026-01-31T12:00:00Z",
    "time": "12:00:00",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def example_value(schema: object, root: object, depth: int = 0) -> object:
    """A value valid for the JSON ``schema`` (``root`` resolves ``$ref``); simple cases."""
    if not isinstance(schema, dict) or depth > 20:
        return None
    if "$ref" in schema:
        target = root
        for part in str(schema["$ref"]).lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return example_value(target, root, depth + 1)
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, []) if o.get("type") != "null"]
        if options:
            return example_value(options[0], root, depth + 1)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _scalar_or_container(kind, schema, root, depth)


def _scalar_or_container(
    kind: object, schema: Mapping[str, object], root: object, depth: int
) -> object:
    if kind == "object":
        props = schema.get("properties")
        required = schema.get("required")
        return {
            k: example_value(props.get(k) if isinstance(props, dict) else None, root, depth + 1)
            for k in (required if isinstance(required, list) else [])
        }
    if kind == "array":
        item = example_value(schema.get("items", {}), root, depth + 1)
        return [item] * int(_number(schema, "minItems") or 0)
    if kind == "string":
        fmt = schema.get("format")
        value = _FORMATS.get(fmt, "a") if isinstance(fmt, str) else "a"
        return value.ljust(int(_number(schema, "minLength") or 0), "a")
    if kind in ("integer", "number"):
        low = _number(schema, "minimum")
        if low is None:
            exclusive = _number(schema, "exclusiveMinimum")
            low = 0 if exclusive is None else exclusive + 1
        high = _number(schema, "maximum")
        number = max(low, 0) if high is None else min(max(low, 0), high)
        return int(number) if kind == "integer" else float(number)
    if kind == "boolean":
        return False
    return None


def _number(schema: Mapping[str, object], key: str) -> float | None:
    """``schema[key]`` when it is a number (``bool`` is not), else None."""
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _describe(item: ScriptItem) -> str:
    text_ = repr(item)
    return text_ if len(text_) <= 80 else text_[:77] + "..."


@contextlib.contextmanager
def block_model_requests(reason: str = "a test suite") -> Iterator[None]:
    """Make every real model refuse to answer inside the block.

    Adapters that reach a network (``OpenAIChatModel``, ``AnthropicChatModel``, any
    ``ChatModel`` subclass without ``offline = True``) raise ``ModelRequestsBlocked``;
    the test doubles of this module still answer. Use it in a ``conftest.py``::

        @pytest.fixture(autouse=True)
        def _no_real_models():
            with block_model_requests():
                yield

    Args:
        reason: Named in the error message.
    """
    BLOCKED.append(reason)
    try:
        yield
    finally:
        BLOCKED.remove(reason)

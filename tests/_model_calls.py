"""``ask``: one model request in a line, for the adapter tests.

It builds the ``ModelRequest`` the agent's loop would and asks ``request`` (the whole
answer) or, for a model built with ``stream=True``, ``request_stream`` with its first chunk
already received, so a failure to start is raised at ``await ask(...)`` as a test expects.
Tools given as OpenAI function dicts (how the wire tests read best) become
``ToolDefinition``s; any other dict is a provider's built-in tool, sent as it is.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel

from agentkit.messages import Msg
from agentkit.models import ChatModel, ChatResponse, ModelRequest, OutputSpec, ToolDefinition
from agentkit.models._base import ModelSettings

ToolSpec = ToolDefinition | Mapping[str, Any]


def request_of(
    messages: Sequence[Msg],
    tools: Sequence[ToolSpec] | None = None,
    tool_choice: str | None = None,
    *,
    output: type[BaseModel] | None = None,
    **settings: Any,
) -> ModelRequest:
    """The request: function tools and built-in tools apart, ``output`` in native mode."""
    functions: list[ToolDefinition] = []
    builtin: list[dict[str, object]] = []
    for tool in tools or ():
        if isinstance(tool, ToolDefinition):
            functions.append(tool)
        elif _is_function(tool):
            function = tool.get("function", tool)
            functions.append(
                ToolDefinition(
                    function["name"],
                    function.get("description", ""),
                    function.get("parameters", {"type": "object", "properties": {}}),
                    strict=function.get("strict"),
                )
            )
        else:
            builtin.append(dict(tool))
    if tool_choice is not None:
        settings["tool_choice"] = tool_choice
    spec = None if output is None else OutputSpec(output, "native")
    return ModelRequest(list(messages), functions, builtin, cast(ModelSettings, settings), spec)


def _is_function(tool: Mapping[str, Any]) -> bool:
    if "function" in tool:
        return True
    return (
        tool.get("type", "function") == "function" and "name" in tool and "input_schema" not in tool
    )


async def ask(
    model: ChatModel,
    messages: Sequence[Msg],
    tools: Sequence[ToolSpec] | None = None,
    tool_choice: str | None = None,
    *,
    output: type[BaseModel] | None = None,
    stream: bool | None = None,
    **settings: Any,
) -> Any:
    """The answer (``stream=False``) or the started stream of cumulative chunks."""
    request = request_of(messages, tools, tool_choice, output=output, **settings)
    if not (model.stream if stream is None else stream):
        return await model.request(request)
    return await started(model.request_stream(request))


async def started(
    chunks: AsyncGenerator[ChatResponse, None],
) -> AsyncGenerator[ChatResponse, None]:
    """``chunks`` with its first chunk received now (a failure to start raised here)."""
    try:
        first: ChatResponse | None = await anext(chunks)
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
        if first is not None:
            yield first
            async for chunk in rest:
                yield chunk
    finally:
        await rest.aclose()

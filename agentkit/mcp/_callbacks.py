"""Server-to-client features: sampling, elicitation, roots and logging callbacks.

Each factory returns a callback in the shape the ``mcp`` SDK expects. The same callbacks serve
both protocol eras: mid-call server requests (2025-11-25) and the ``InputRequiredResult``
rounds that ``mcp.Client`` drives for 2026-07-28 servers.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from agentkit.mcp._convert import sampling_messages_to_msgs
from agentkit.messages import Msg
from agentkit.models._base import (
    ChatModel,
    ChatResponse,
    ModelRequest,
    ModelSettings,
    ToolDefinition,
)

if TYPE_CHECKING:
    from mcp.client.session import (
        ClientRequestContext,
        ElicitationFnT,
        ListRootsFnT,
        LoggingFnT,
        SamplingFnT,
    )
    from mcp_types import (
        CreateMessageRequestParams,
        CreateMessageResultWithTools,
        ElicitRequestParams,
        LoggingMessageNotificationParams,
        ModelPreferences,
        SamplingMessageContentBlock,
    )

_T = TypeVar("_T")

__all__ = [
    "ElicitationCallback",
    "SamplingApproval",
    "SamplingModels",
    "make_elicitation_callback",
    "make_logging_callback",
    "make_roots_callback",
    "make_sampling_callback",
    "pick_model",
]

SamplingApproval: TypeAlias = Callable[[list[Msg]], Awaitable[bool] | bool]
"""``(messages) -> bool``: return False to refuse a server's sampling request."""

ElicitationAnswer: TypeAlias = dict[str, object] | Literal["decline", "cancel"] | None
ElicitationCallback: TypeAlias = Callable[
    [str, dict[str, object]], Awaitable[ElicitationAnswer] | ElicitationAnswer
]
"""``(message, json_schema) -> answer``: the answer (a dict), ``None`` or ``"decline"`` to
decline, ``"cancel"`` when the user dismissed the question without choosing."""

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


async def _maybe_await(value: Awaitable[_T] | _T) -> _T:
    if isinstance(value, Awaitable):
        result: _T = await value
        return result
    return value


def _generation_kwargs(model: ChatModel, params: CreateMessageRequestParams) -> dict[str, object]:
    """The server's ``maxTokens`` and ``temperature``, named as the model's API names them."""
    kwargs: dict[str, object] = {}
    max_tokens = getattr(params, "max_tokens", None)
    if isinstance(max_tokens, int):
        kind = type(model).__name__
        if "Responses" in kind:
            kwargs["max_output_tokens"] = max_tokens
        elif "OpenAI" in kind:
            kwargs["max_completion_tokens"] = max_tokens
        else:
            kwargs["max_tokens"] = max_tokens
    temperature = getattr(params, "temperature", None)
    if temperature is not None:
        kwargs["temperature"] = temperature
    return kwargs


SamplingModels: TypeAlias = ChatModel | Mapping[str, ChatModel]
"""One model, or ``{name: model}`` chosen by the server's ``modelPreferences.hints``."""


def pick_model(models: SamplingModels, preferences: ModelPreferences | None) -> ChatModel:
    """The model for one sampling request.

    A single model answers everything (preferences are advisory in MCP). With a mapping,
    the server's hints are tried in order (the spec's MUST): the first hint whose name is a
    case-insensitive substring of a mapping key or of a model's ``model_name`` wins; with
    no match (or no hints) the mapping's first model answers. The numeric priorities
    (cost, speed, intelligence) are not used: agentkit does not know model prices.
    """
    if isinstance(models, ChatModel):
        return models
    if not models:
        raise ValueError("sampling models: the mapping is empty")
    for hint in (preferences.hints or []) if preferences is not None else []:
        wanted = (hint.name or "").lower()
        if not wanted:
            continue
        for key, model in models.items():
            if wanted in key.lower() or wanted in model.model_name.lower():
                return model
    return next(iter(models.values()))


def _tool_definitions(params: CreateMessageRequestParams) -> list[ToolDefinition] | None:
    """The server's sampling ``tools`` as tool definitions for the model."""
    if not params.tools:
        return None
    return [
        ToolDefinition(tool.name, tool.description or "", dict(tool.input_schema))
        for tool in params.tools
    ]


def _name_tool_results(messages: list[Msg]) -> None:
    """Give the server's ``tool_result`` blocks the name of the ``tool_use`` they answer."""
    names: dict[str, str] = {}
    for msg in messages:
        for block in msg.content if isinstance(msg.content, list) else []:
            if block["type"] == "tool_use":
                names[block["id"]] = block["name"]
            elif block["type"] == "tool_result" and not block.get("name"):
                block["name"] = names.get(block["id"], "")


def _with_tools_result(response: ChatResponse, model: str) -> CreateMessageResultWithTools:
    """The answer to a sampling request that offered tools: text and ``tool_use`` blocks."""
    from mcp_types import CreateMessageResultWithTools, TextContent, ToolUseContent

    content: list[SamplingMessageContentBlock] = []
    for block in response.content:
        if block["type"] == "text" and block["text"]:
            content.append(TextContent(text=block["text"]))
        elif block["type"] == "tool_use":
            args = block["input"] if isinstance(block["input"], dict) else {}
            content.append(ToolUseContent(id=block["id"], name=block["name"], input=args))
    calls = any(isinstance(c, ToolUseContent) for c in content)
    return CreateMessageResultWithTools(
        role="assistant",
        content=content or [TextContent(text="")],
        model=model,
        stop_reason="toolUse" if calls else "endTurn",
    )


def make_sampling_callback(
    model: SamplingModels, approval: SamplingApproval | None, server: str
) -> SamplingFnT:
    """Serve ``sampling/createMessage`` with an agentkit ``ChatModel``.

    A request that offers ``tools`` gets them as tool definitions (``toolChoice`` as the
    model's ``tool_choice``); when the model calls one, the answer carries ``tool_use``
    content and ``stopReason: "toolUse"`` (the server runs the tool and samples again with
    the result).

    Args:
        model: The model answering the server's requests (non-streaming use), or
            ``{name: model}`` chosen per request by ``modelPreferences`` (:func:`pick_model`).
        approval: Optional gate; a refusal answers the server with an error.
        server: Client name, used as the author of the server's messages.
    """
    from mcp_types import CreateMessageResult, ErrorData, TextContent

    async def sampling(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        messages = sampling_messages_to_msgs(list(params.messages), params.system_prompt, server)
        _name_tool_results(messages)
        if approval is not None and not await _maybe_await(approval(messages)):
            return ErrorData(code=-1, message="The user declined the sampling request")
        chosen = pick_model(model, params.model_preferences)
        settings = cast(ModelSettings, _generation_kwargs(chosen, params))
        tools = _tool_definitions(params)
        if tools is not None:
            mode = params.tool_choice.mode if params.tool_choice is not None else None
            if mode is not None:
                settings["tool_choice"] = mode
        try:  # the whole answer, from a streaming model too
            response = await chosen.request(ModelRequest(messages, tools or [], settings=settings))
        except Exception as exc:  # the server gets an error answer, the call goes on
            logging.getLogger(f"agentkit.mcp.{server}").warning("sampling failed: %s", exc)
            return ErrorData(code=-32603, message=f"sampling failed: {exc}")
        if tools is not None or params.tool_choice is not None:
            return _with_tools_result(response, chosen.model_name)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text=response.get_text()),
            model=chosen.model_name,
            stop_reason="endTurn",
        )

    return sampling


def _with_defaults(answer: dict[str, Any], schema: dict[str, object]) -> dict[str, Any]:
    """Fill schema defaults for fields the user left out (the SDK does not)."""
    filled = dict(answer)
    properties = schema.get("properties")
    for key, prop in properties.items() if isinstance(properties, dict) else ():
        if key not in filled and isinstance(prop, dict) and "default" in prop:
            filled[key] = prop["default"]
    return filled


def make_elicitation_callback(callback: ElicitationCallback) -> ElicitationFnT:
    """Route ``elicitation/create`` to ``callback(message, schema)``.

    Form mode passes the requested JSON schema. URL mode passes the URL inside the message
    and a schema ``{"type": "object", "properties": {}, "x-url": url}``; returning any dict
    means the user agreed to open it.
    """
    from mcp_types import ElicitRequestURLParams, ElicitResult

    async def elicitation(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        if isinstance(params, ElicitRequestURLParams):
            schema: dict[str, object] = {"type": "object", "properties": {}, "x-url": params.url}
            message = f"{params.message}\n{params.url}"
        else:
            schema = dict(params.requested_schema)
            message = params.message
        answer = await _maybe_await(callback(message, schema))
        if answer is None or answer == "decline":
            return ElicitResult(action="decline")
        if answer == "cancel":
            return ElicitResult(action="cancel")
        if schema.get("x-url"):
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content=_with_defaults(dict(answer), schema))

    return elicitation


def _root_uri(root: str | os.PathLike[str]) -> str:
    text = os.fspath(root)
    if "://" in text:
        return text
    return pathlib.Path(text).expanduser().resolve().as_uri()


def make_roots_callback(
    roots: Sequence[str | os.PathLike[str]] | Callable[[], Sequence[str | os.PathLike[str]]],
) -> ListRootsFnT:
    """Answer ``roots/list`` with ``roots`` (paths become ``file://`` URIs).

    ``roots`` may be a callable, read at every request (roots that change).
    """
    from mcp_types import ListRootsResult, Root

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        current = roots() if callable(roots) else roots
        listed = [
            Root.model_validate({"uri": _root_uri(r), "name": pathlib.PurePath(_root_uri(r)).name})
            for r in current
        ]
        return ListRootsResult(roots=listed)

    return list_roots


def make_logging_callback(logger: logging.Logger) -> LoggingFnT:
    """Forward ``notifications/message`` to ``logger`` at the matching level."""

    async def log(params: LoggingMessageNotificationParams) -> None:
        level = _LEVELS.get(str(params.level), logging.INFO)
        source = f"[{params.logger}] " if params.logger else ""
        logger.log(level, "%s%s", source, params.data)

    return log

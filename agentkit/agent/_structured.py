"""Structured output: response tools offered for one reply, validated with pydantic.

For one pydantic model the model is offered one extra tool, ``generate_response``, whose
schema is the model's JSON schema. For a union (``output_type=A | B``) it is offered one
response tool per member, ``generate_response_A`` and ``generate_response_B``: the tool the
model calls names the member, so validation never has to guess which member arguments that
would fit several were meant for, and every tool's parameters stay a flat JSON object (what
every provider accepts, OpenAI's strict mode included), described by its member's
docstring. The union itself travels through the run as a small generated pydantic class
(:func:`output_model`) that lists its members, so the rest of the loop treats one model
and a union alike.

The tools are merged into the schema list at call time (the user's Toolkit is never
touched). An invalid call is answered with an error result carrying the validation
message, so the model can correct itself, up to ``MAX_STRUCTURED_RETRIES`` times.

Output modes: a bare model (or union) and ``ToolOutput(M)`` use the response tools above.
``NativeOutput(M)`` asks the provider for JSON matching the schema (OpenAI ``json_schema``,
Anthropic ``output_config.format``) and ``PromptedOutput(M)`` puts the schema in the
instructions; both read the answer from the reply's text, and an answer that is not valid
JSON for ``M`` is sent back to the model with the error, within the same retry budget.
Like a union, a text mode travels through the run as a small generated class standing for
``M`` (:func:`output_model`); :func:`output_mode` reads its mode.
"""

from __future__ import annotations

import json
import re
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar

from agentkit.exceptions import UsageError
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.messages import ToolUseBlock
    from agentkit.models._base import ChatModel, ChatResponse, ToolDefinition

__all__ = [
    "MAX_STRUCTURED_RETRIES",
    "RESPONSE_TOOL",
    "ModeOutput",
    "NativeOutput",
    "OutputMode",
    "PromptedOutput",
    "ToolOutput",
    "answer_model",
    "effective_mode",
    "forced_choice",
    "is_response",
    "output_mode",
    "output_model",
    "parse_answer",
    "partial_source",
    "prompt_instructions",
    "response_definitions",
    "union_members",
    "validate_response",
]

OutputMode: TypeAlias = Literal["tool", "native", "prompted"]
"""How a structured answer is asked for: a response tool, the provider's JSON-schema
mode, or the schema in the instructions."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolOutput(Generic[T]):
    """Ask for the answer as the arguments of a response tool (the default mode).

    ``output_type=ToolOutput(M)`` is ``output_type=M``, said explicitly. Works with every
    adapter that has tools, unions (``ToolOutput(A | B)``) included.

    Attributes:
        output_type: A pydantic model class, or a union of them.
    """

    output_type: type[T] | Any


@dataclass(frozen=True, slots=True)
class NativeOutput(Generic[T]):
    """Ask the provider itself for JSON matching the schema (its structured-output mode).

    OpenAI Chat Completions ``response_format={"type": "json_schema", ...}``, OpenAI
    Responses ``text.format``, Anthropic ``output_config.format``, Gemini
    ``responseJsonSchema``, Bedrock Converse ``outputConfig.textFormat``. An adapter without
    such a mode raises ``UsageError`` unless ``fallback`` names a mode to use instead.

    Attributes:
        output_type: A pydantic model class.
        fallback: ``"tool"`` or ``"prompted"``: the mode to use with a model that has no
            native mode (None: refuse).
    """

    output_type: type[T]
    fallback: Literal["tool", "prompted"] | None = None


@dataclass(frozen=True, slots=True)
class PromptedOutput(Generic[T]):
    """Put the schema in the instructions and read the answer as JSON from the reply text.

    For models with neither tools nor a native JSON mode; an answer that is not valid
    JSON for the model is sent back with the error, and the model answers again.

    Attributes:
        output_type: A pydantic model class.
    """

    output_type: type[T]


RESPONSE_TOOL = "generate_response"
MAX_STRUCTURED_RETRIES = 3

_MEMBERS = "__agentkit_union_members__"  # on a generated union class: its members
_NAMES = "__agentkit_union_tools__"  # and the response tool of each member, in order
_TARGET = "__agentkit_output_target__"  # on a text-mode stand-in: the model it stands for
_MODE = "__agentkit_output_mode__"  # and its mode ("native" / "prompted")
_FALLBACK = "__agentkit_output_fallback__"  # and NativeOutput's fallback mode

_UNIONS: dict[object, type[BaseModel]] = {}  # a union type -> its generated class
_MODES: dict[object, type[BaseModel]] = {}  # a NativeOutput/PromptedOutput -> its stand-in


def _is_union(output_type: object) -> bool:
    return typing.get_origin(output_type) in (typing.Union, types.UnionType)


def output_model(output_type: object) -> type[BaseModel] | None:
    """The pydantic model a run's answer must match (None or ``str``: plain text).

    A union of pydantic models (``A | B``, ``Union[A, B]``) becomes a generated class that
    stands for it in the run (cached: one class per union).

    Raises:
        UsageError: for anything else (a member that is not a pydantic model included).
    """
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, ToolOutput):
        return output_model(output_type.output_type)
    if isinstance(output_type, NativeOutput | PromptedOutput):
        return _mode_model(output_type)
    from pydantic import BaseModel  # only for structured runs: pydantic is not cheap

    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return output_type
    if not _is_union(output_type):
        raise UsageError(
            "output_type must be a pydantic model class, a union of them (A | B) or str, "
            f"got {output_type!r}"
        )
    cached = _UNIONS.get(output_type)
    if cached is not None:
        return cached
    members = typing.get_args(output_type)
    for member in members:
        if not (isinstance(member, type) and issubclass(member, BaseModel)):
            raise UsageError(
                f"every member of a union output_type must be a pydantic model class; "
                f"{output_type!r} has {member!r}"
            )
    name = " | ".join(m.__name__ for m in members)
    union: type[BaseModel] = types.new_class(name, (BaseModel,))
    setattr(union, _MEMBERS, tuple(members))
    setattr(union, _NAMES, _tool_names(members))
    union.__doc__ = f"One of: {name}."
    _UNIONS[output_type] = union
    return union


ModeOutput: TypeAlias = ToolOutput[T] | NativeOutput[T] | PromptedOutput[T]
"""An ``output_type`` that names its mode (``RunResult[T]`` for any of them)."""


def _mode_model(spec: NativeOutput[Any] | PromptedOutput[Any]) -> type[BaseModel]:
    """The stand-in class of a text mode: it carries the model, the mode and the fallback."""
    cached = _MODES.get(spec)
    if cached is not None:
        return cached
    from pydantic import BaseModel

    kind = type(spec).__name__
    target = spec.output_type
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        raise UsageError(
            f"{kind} takes one pydantic model class, got {target!r} "
            "(a union is answered through response tools: use ToolOutput(A | B))"
        )
    stand_in: type[BaseModel] = types.new_class(target.__name__, (BaseModel,))
    setattr(stand_in, _TARGET, target)
    setattr(stand_in, _MODE, "native" if isinstance(spec, NativeOutput) else "prompted")
    setattr(stand_in, _FALLBACK, spec.fallback if isinstance(spec, NativeOutput) else None)
    stand_in.__doc__ = target.__doc__
    _MODES[spec] = stand_in
    return stand_in


def output_mode(model: type[BaseModel]) -> OutputMode:
    """The mode ``model`` (a run's output class) asks for its answer in."""
    mode: OutputMode = getattr(model, _MODE, "tool")
    return mode


def answer_model(model: type[BaseModel]) -> type[BaseModel]:
    """The model a text-mode answer is validated against (``model`` itself otherwise)."""
    target: type[BaseModel] = getattr(model, _TARGET, model)
    return target


def effective_mode(model: type[BaseModel], chat_model: ChatModel) -> OutputMode:
    """The mode used with ``chat_model``: ``NativeOutput``'s fallback where it has no native mode.

    Raises:
        UsageError: for ``NativeOutput`` without a fallback on a model with no native mode.
    """
    mode = output_mode(model)
    if mode != "native" or chat_model.native_output:
        return mode
    fallback: OutputMode | None = getattr(model, _FALLBACK, None)
    if fallback is not None:
        return fallback
    raise UsageError(
        f"NativeOutput({answer_model(model).__name__}) asks for the provider's native "
        f"structured output (mode 'native'), which {type(chat_model).__name__} "
        f"({chat_model.model_name!r}) cannot give; use ToolOutput or PromptedOutput, or "
        "NativeOutput(..., fallback='tool')"
    )


def prompt_instructions(model: type[BaseModel]) -> str:
    """The instructions of ``PromptedOutput``: answer with JSON matching the schema."""
    target = answer_model(model)
    schema = target.model_json_schema()
    return (
        "Give your final answer as one JSON object matching this JSON schema, and nothing "
        "else: no text before or after it, no code fence.\n"
        + json.dumps(schema, ensure_ascii=False)
    )


def parse_answer(model: type[BaseModel], text: str) -> tuple[BaseModel | None, str]:
    """Read a text-mode answer: the JSON object in ``text``, validated against the model.

    A code fence or words around the object are tolerated (prompted answers have them).

    Returns:
        The validated instance and "", or None and the message telling the model what was
        wrong.
    """
    from pydantic import ValidationError

    target = answer_model(model)
    start = text.find("{")
    if start < 0:
        return None, "Your answer is not a JSON object."
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        return None, f"Your answer is not valid JSON: {exc}."
    try:
        return target.model_validate(data), ""
    except ValidationError as exc:
        return None, f"Your answer does not match the required schema:\n{exc}"


def partial_source(
    model: type[BaseModel], mode: OutputMode
) -> typing.Callable[[ChatResponse], tuple[type[BaseModel], object] | None]:
    """How to find the structured answer in a streamed chunk, for ``PartialTracker``.

    Tool mode: the first call of a response tool (its member, for a union), its JSON
    arguments so far; text modes: the reply's text.
    """
    if mode != "tool":
        target = answer_model(model)

        def text(chunk: ChatResponse) -> tuple[type[BaseModel], object] | None:
            value = chunk.get_text()
            return (target, value) if value else None

        return text
    tools = dict(_tools(model))

    def call(chunk: ChatResponse) -> tuple[type[BaseModel], object] | None:
        for block in chunk.content:
            if block["type"] == "tool_use" and block["name"] in tools:
                raw = block["raw_input"] if "raw_input" in block else block["input"]
                return tools[block["name"]], raw
        return None

    return call


def _tool_names(members: tuple[type[BaseModel], ...]) -> tuple[str, ...]:
    names: list[str] = []
    for member in members:
        base = f"{RESPONSE_TOOL}_{re.sub(r'[^A-Za-z0-9_-]', '_', member.__name__)}"[:60]
        name, n = base, 2
        while name in names:  # two members of the same name (from different modules)
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return tuple(names)


def union_members(model: type[BaseModel]) -> tuple[type[BaseModel], ...] | None:
    """The members of a generated union class (None for a plain model)."""
    members: tuple[type[BaseModel], ...] | None = getattr(model, _MEMBERS, None)
    return members


def _tools(model: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    model = answer_model(model)  # a text mode's stand-in, answered by tool (its fallback)
    members = union_members(model)
    if members is None:
        return [(RESPONSE_TOOL, model)]
    return list(zip(getattr(model, _NAMES), members, strict=True))


def is_response(model: type[BaseModel], name: str) -> bool:
    """Whether ``name`` is one of the response tools of ``model``."""
    return any(tool == name for tool, _ in _tools(model))


def forced_choice(model: type[BaseModel]) -> str:
    """The ``tool_choice`` that makes the model answer with a response tool."""
    model = answer_model(model)
    return RESPONSE_TOOL if union_members(model) is None else "required"


def response_definitions(model: type[BaseModel]) -> list[ToolDefinition]:
    """The provider-neutral definitions of the response tools of ``model``."""
    from agentkit.models._base import ToolDefinition

    definitions = []
    for name, member in _tools(model):
        parameters = member.model_json_schema()
        parameters.pop("title", None)
        description = (member.__doc__ or "").strip() or f"The final answer as {member.__name__}."
        if name != RESPONSE_TOOL:
            description = f"Use this function if the answer is a {member.__name__}. {description}"
        definitions.append(
            ToolDefinition(
                name,
                "Give your final answer by calling this function with arguments matching "
                f"its schema. {description}",
                parameters,
            )
        )
    return definitions


def validate_response(
    model: type[BaseModel], call: ToolUseBlock
) -> tuple[ToolResponse, BaseModel | None]:
    """Validate a call of a response tool (against the member that tool names).

    Returns:
        The tool result to store, and the validated instance (None when invalid).
    """
    from pydantic import ValidationError

    member: Any = dict(_tools(model)).get(call["name"], model)
    try:
        value = member.model_validate(call["input"])
    except ValidationError as exc:
        return (
            ToolResponse.error(
                f"The arguments do not match the required schema:\n{exc}\n"
                f"Call {call['name']} again with corrected arguments."
            ),
            None,
        )
    return ToolResponse.text("The structured response was accepted."), value

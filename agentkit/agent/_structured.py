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
"""

from __future__ import annotations

import re
import types
import typing
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from agentkit.exceptions import UsageError
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.messages import ToolUseBlock
    from agentkit.models._base import ToolDefinition

__all__ = [
    "MAX_STRUCTURED_RETRIES",
    "RESPONSE_TOOL",
    "forced_choice",
    "is_response",
    "output_model",
    "response_definitions",
    "response_schemas",
    "union_members",
    "validate_response",
]

RESPONSE_TOOL = "generate_response"
MAX_STRUCTURED_RETRIES = 3

_MEMBERS = "__agentkit_union_members__"  # on a generated union class: its members
_NAMES = "__agentkit_union_tools__"  # and the response tool of each member, in order

_SCHEMAS: WeakKeyDictionary[type[BaseModel], list[dict[str, object]]] = WeakKeyDictionary()
_UNIONS: dict[object, type[BaseModel]] = {}  # a union type -> its generated class


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
    members = union_members(model)
    if members is None:
        return [(RESPONSE_TOOL, model)]
    return list(zip(getattr(model, _NAMES), members, strict=True))


def is_response(model: type[BaseModel], name: str) -> bool:
    """Whether ``name`` is one of the response tools of ``model``."""
    return any(tool == name for tool, _ in _tools(model))


def forced_choice(model: type[BaseModel]) -> str:
    """The ``tool_choice`` that makes the model answer with a response tool."""
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


def response_schemas(model: type[BaseModel]) -> list[dict[str, object]]:
    """The OpenAI-style function schemas of the response tools (cached per model)."""
    schemas = _SCHEMAS.get(model)
    if schemas is None:
        schemas = _SCHEMAS[model] = [d.to_openai() for d in response_definitions(model)]
    return schemas


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

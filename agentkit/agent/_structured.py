"""Structured output: an extra ``generate_response`` tool offered for one reply.

The tool's schema is the pydantic model's JSON schema. It is merged into the schema list at
call time (the user's Toolkit is never touched). The model's call is validated with
pydantic; an invalid call is answered with an error result carrying the validation message,
so the model can correct itself, up to ``MAX_STRUCTURED_RETRIES`` times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.messages import ToolUseBlock
    from agentkit.models._base import ToolDefinition

__all__ = [
    "MAX_STRUCTURED_RETRIES",
    "RESPONSE_TOOL",
    "response_definition",
    "response_schema",
    "validate_response",
]

RESPONSE_TOOL = "generate_response"
MAX_STRUCTURED_RETRIES = 3

_SCHEMAS: WeakKeyDictionary[type[BaseModel], dict[str, object]] = WeakKeyDictionary()


def response_definition(model: type[BaseModel]) -> ToolDefinition:
    """The provider-neutral definition of the ``generate_response`` tool for ``model``."""
    from agentkit.models._base import ToolDefinition

    parameters = model.model_json_schema()
    parameters.pop("title", None)
    description = (model.__doc__ or "").strip() or f"The final answer as {model.__name__}."
    return ToolDefinition(
        RESPONSE_TOOL,
        "Give your final answer by calling this function with arguments matching its "
        f"schema. {description}",
        parameters,
    )


def response_schema(model: type[BaseModel]) -> dict[str, object]:
    """The OpenAI-style function schema of the ``generate_response`` tool (cached per model)."""
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = _SCHEMAS[model] = response_definition(model).to_openai()
    return schema


def validate_response(
    model: type[BaseModel], call: ToolUseBlock
) -> tuple[ToolResponse, BaseModel | None]:
    """Validate a ``generate_response`` call.

    Returns:
        The tool result to store, and the validated instance (None when invalid).
    """
    from pydantic import ValidationError

    try:
        value = model.model_validate(call["input"])
    except ValidationError as exc:
        return (
            ToolResponse.error(
                f"The arguments do not match the required schema:\n{exc}\n"
                f"Call {RESPONSE_TOOL} again with corrected arguments."
            ),
            None,
        )
    return ToolResponse.text("The structured response was accepted."), value

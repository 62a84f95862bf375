"""JSON values as the adapters build and read them: a genuinely recursive type.

Wire data read from a provider is ``JSONValue`` until narrowed. ``obj`` and ``arr`` narrow
it the way the parsers always treated it: an absent or empty value reads as empty, and a
value of another shape raises ``TypeError`` (which the adapters turn into
``ModelResponseError`` "unexpected answer shape").
"""

from __future__ import annotations

import math
from typing import TypeAlias

from agentkit.exceptions import ModelAPIError

__all__ = ["JSONObject", "JSONValue", "arr", "count", "obj"]

JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
"""Any value ``json.loads`` can return."""

JSONObject: TypeAlias = "dict[str, JSONValue]"
"""A JSON object."""


def obj(value: JSONValue) -> JSONObject:
    """``value`` as an object (``{}`` for a missing or empty value).

    Raises:
        TypeError: for a non-empty value that is not an object.
    """
    if isinstance(value, dict):
        return value
    if not value:
        return {}
    raise TypeError(f"expected a JSON object, got {type(value).__name__}")


def arr(value: JSONValue) -> list[JSONValue]:
    """``value`` as an array (``[]`` for a missing or empty value).

    Raises:
        TypeError: for a non-empty value that is not an array.
    """
    if isinstance(value, list):
        return value
    if not value:
        return []
    raise TypeError(f"expected a JSON array, got {type(value).__name__}")


def count(value: JSONValue, field: str) -> int:
    """A token count from a provider's usage (a missing one is 0).

    Every adapter reads its usage numbers through here, so a count that would corrupt the
    run's totals and limits (negative, fractional, a string, infinite) is refused in one
    place, naming the field.

    Args:
        value: The decoded JSON value.
        field: Where it sits in the answer (``usage.prompt_tokens``), for the message.

    Raises:
        ModelAPIError: ``value`` is not a non-negative integer (an integral float such as
            ``12.0`` is accepted: JSON does not tell them apart).
    """
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        number: int | None = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    else:
        number = None
    if number is None or number < 0:
        if number is not None:
            problem = "negative"
        elif isinstance(value, float) and not math.isfinite(value):
            problem = "not finite"
        else:
            problem = "not an integer"
        raise ModelAPIError(f"the provider's token count {field} is {problem}: {value!r}")
    return number

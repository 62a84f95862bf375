"""JSON values as the adapters build and read them: a genuinely recursive type.

Wire data read from a provider is ``JSONValue`` until narrowed. ``obj`` and ``arr`` narrow
it the way the parsers always treated it: an absent or empty value reads as empty, and a
value of another shape raises ``TypeError`` (which the adapters turn into
``ModelResponseError`` "unexpected answer shape").
"""

from __future__ import annotations

from typing import TypeAlias

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


def count(value: JSONValue) -> int:
    """A token count (a missing one is 0; a non-number is a shape error).

    Raises:
        TypeError: ``value`` is neither a number nor a numeric string.
    """
    if not value:
        return 0
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")

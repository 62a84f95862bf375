"""JSON value types shared by the library.

``JSONValue`` is genuinely recursive (mypy checks nested values), unlike ``dict[str, Any]``:
code that reads a ``JSONValue`` must narrow it (``isinstance``) before use.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONValue"]

JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"

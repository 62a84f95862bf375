"""Functions whose parameters are JSON's own types get their schema without pydantic, and
it is the schema pydantic writes for them, key order included."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Literal, Optional, Union  # noqa: UP035

import pytest

from agentkit.tools import Toolkit
from agentkit.tools._schema import _build_model, _native_schema, _pydantic_schema

_NAN = float("nan")


class _Opaque:
    """A default pydantic cannot put in a schema (its repr is stable: test ids must be)."""

    def __repr__(self) -> str:
        return "<opaque>"


_OPAQUE = _Opaque()

# (annotation, default); ``...`` is no default.
NATIVE: list[tuple[object, object]] = [
    (str, ...),
    (int, 3),
    (float, 1),
    (float, 2.5),
    (bool, False),
    (type(None), None),
    (Any, None),
    (object, "x"),
    (list, []),
    (dict, {}),
    (list[str], ["a", "b"]),
    (list[list[int]], ...),
    (list[Any], None),
    (dict[str, int], None),
    (dict[str, Any], {"k": [1, {"n": None}]}),
    (dict[str, object], ...),
    (dict[str, list[float]], ...),
    (int | None, None),
    (Optional[str], None),  # noqa: UP045 (typing.Optional is its own object)
    (Union[int, str], 1),  # noqa: UP007
    (bool | int, True),
    (int | str | None, ...),
    (Optional[Any], None),  # noqa: UP045
    (list[str] | None, None),
    (dict[str, Any] | None, None),
    (Literal["a", "b"], "a"),
    (Literal["a"], ...),
    (Literal[1, 2], 2),
    (Literal[True, False], True),
    (str, None),  # a default of another type: written as given, as pydantic does
    (int, True),
    (float, -0.0),
    (str, "\u00e9\u2028"),
    (List[str], ...),  # noqa: UP006 (typing.List is its own object)
    (Dict[str, int], None),  # noqa: UP006
    (dict[str, Any], {"a": 1.5, "b": [True, None]}),
    (int, 2**70),
]

# Outside the native set: the pydantic path describes them.
NOT_NATIVE: list[tuple[object, object]] = [
    (tuple[int, int], ...),
    (dict[int, str], ...),
    (set[str], ...),
    (Literal["a", 1], "a"),
    (Literal[None], None),
    (float, _NAN),
    (list[int], (1, 2)),
    (str, _OPAQUE),
]


def _both(annotation: object, default: object) -> tuple[object, object]:
    fields = {"f0": (annotation, default)}
    aliases = {"f0": "value"}
    reference = _pydantic_schema(_build_model("t", fields, aliases), "t")
    return _native_schema(fields, aliases), {
        "properties": reference["properties"],
        "required": reference.get("required", []),
    }


@pytest.mark.parametrize(("annotation", "default"), NATIVE, ids=repr)
def test_native_schema_is_the_one_pydantic_writes(annotation: object, default: object) -> None:
    native, reference = _both(annotation, default)
    assert native is not None
    assert json.dumps(native) == json.dumps(reference)  # same keys, same order


@pytest.mark.parametrize(("annotation", "default"), NOT_NATIVE, ids=repr)
def test_other_types_and_defaults_go_to_pydantic(annotation: object, default: object) -> None:
    assert _native_schema({"f0": (annotation, default)}, {"f0": "value"}) is None


def test_a_mutable_default_is_not_shared_with_the_schema() -> None:
    tags: list[str] = ["a"]

    def tag(names: list[str] = tags) -> str:
        """Tag.

        Args:
            names: The tags.
        """
        return ",".join(names)

    toolkit = Toolkit()
    toolkit.register_tool_function(tag)
    (tool,) = toolkit.tools.values()
    schema: Any = tool.parameters
    assert schema["properties"]["names"] == {
        "default": ["a"],
        "items": {"type": "string"},
        "type": "array",
        "description": "The tags.",
    }
    schema["properties"]["names"]["default"].append("b")
    assert tags == ["a"]

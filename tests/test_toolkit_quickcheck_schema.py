"""The argument fast path vouches for a call only where jsonschema would accept both the
schema (the meta-schema) and the arguments: it runs before any validator is built."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agentkit.tools._base import ArgumentChecks


def _obj(prop: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"i": prop}, **extra}


SCHEMAS: list[dict[str, Any]] = [
    _obj({"type": "integer"}, required=["i"], additionalProperties=False),
    _obj({"type": "integer", "description": "a count", "default": 3, "title": "I"}),
    _obj({"type": "integer", "description": 5}),  # the meta-schema wants a string
    _obj({"type": "integer", "title": ["x"]}),
    _obj({"type": "integer", "deprecated": "yes"}),
    _obj({"type": "integer", "examples": 1}),
    _obj({"type": "integer"}, required=["i", "i"]),  # required items must be unique
    _obj({"type": ["integer", "integer"]}),
    _obj({"anyOf": [{"type": "integer"}, {"type": "null", "$comment": 1}]}),
    _obj({"type": "array", "items": {"type": "integer", "readOnly": 1}}),
    {"type": "object", "additionalProperties": {"type": "integer", "writeOnly": "no"}},
    _obj({"type": "integer"}, description="tool", examples=[{"i": 1}]),
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=repr)
def test_fast_path_vouches_only_where_jsonschema_accepts_schema_and_call(
    schema: dict[str, Any],
) -> None:
    arguments = {"i": 1}
    vouched = ArgumentChecks(schema).certainly_valid(arguments)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        assert not vouched  # a broken schema is left to the validator, which reports it
        return
    assert vouched
    assert Draft202012Validator(schema).is_valid(arguments)


def test_a_broken_schema_is_reported_even_for_arguments_that_fit() -> None:
    checks = ArgumentChecks(_obj({"type": "integer", "description": 5}))
    assert not checks.certainly_valid({"i": 1})
    with pytest.raises(SchemaError):
        checks.get_validator()

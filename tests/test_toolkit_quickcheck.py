"""The compiled fast path of argument validation never accepts what jsonschema rejects."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentkit.testing import tool_use
from agentkit.tools import Toolkit
from agentkit.tools._quickcheck import compile_check

TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
KEYS = st.sampled_from(["a", "b", "c", "d"])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, 1.0, -2.0])
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _with_annotations(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={"description": st.text(max_size=5), "title": st.just("T")}
    ).map(lambda extra: {**schema, **extra})


leaf_schemas = st.one_of(
    st.just(True),
    st.just({}),
    st.sampled_from(TYPES).map(lambda t: {"type": t}),
    st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True).map(
        lambda ts: {"type": ts}
    ),
    st.lists(st.text(max_size=2), min_size=1, max_size=3, unique=True).map(
        lambda members: {"enum": members}
    ),
).flatmap(lambda s: _with_annotations(s) if isinstance(s, dict) else st.just(s))


def _composite(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    objects = st.fixed_dictionaries(
        {"properties": st.dictionaries(KEYS, inner, max_size=3)},
        optional={
            "type": st.just("object"),
            "required": st.lists(KEYS, max_size=3, unique=True),
            "additionalProperties": st.booleans() | inner,
        },
    )
    arrays = st.fixed_dictionaries({"items": inner}, optional={"type": st.just("array")})
    any_of = st.lists(inner, min_size=1, max_size=3).map(lambda options: {"anyOf": options})
    return objects | arrays | any_of


schemas = st.recursive(leaf_schemas, _composite, max_leaves=8)
# Tool parameters are objects (and so are most instances): draw those more often.
top_schemas = _composite(schemas) | schemas
top_values = st.dictionaries(KEYS, json_values, max_size=4) | json_values


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=top_schemas, values=st.lists(top_values, min_size=1, max_size=8))
def test_accepted_means_valid(schema: Any, values: list[Any]) -> None:
    Draft202012Validator.check_schema(schema if isinstance(schema, dict) else {})
    check = compile_check(schema)
    assert check is not None  # every drawn schema is in the supported subset
    validator = Draft202012Validator(schema)
    for value in values:
        if check(value):
            assert validator.is_valid(value), (schema, value)


@settings(max_examples=300, deadline=None)
@given(schema=leaf_schemas, value=json_values)
def test_accepted_means_valid_for_single_keywords(schema: Any, value: Any) -> None:
    check = compile_check(schema)
    assert check is not None
    if check(value):
        assert Draft202012Validator(schema).is_valid(value), (schema, value)


SAMPLES = [None, True, False, 0, 1, -3, 1.0, -2.0, 1.5, "", "x", "1", [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("type_name", TYPES)
def test_type_checks_match_jsonschema(type_name: str) -> None:
    check = compile_check({"type": type_name})
    assert check is not None
    validator = Draft202012Validator({"type": type_name})
    for value in SAMPLES:
        valid = validator.is_valid(value)
        if type_name == "integer" and isinstance(value, float):
            assert not check(value)  # left to jsonschema (which accepts 1.0, rejects 1.5)
        else:
            assert check(value) == valid, value


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 0},
        {"type": "string", "format": "date-time"},
        {"$ref": "#/$defs/X", "$defs": {"X": {"type": "string"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
        {"type": "array", "items": False},
        {"enum": [1, True]},
        {"oneOf": [{"type": "string"}]},
        {"type": "object", "x-custom": 1},
    ],
)
def test_unsupported_keywords_leave_it_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema) is None


async def test_typical_function_tools_take_the_fast_path() -> None:
    tk = Toolkit()

    @tk.tool
    async def search(
        query: str,
        limit: int = 10,
        tags: list[str] | None = None,
        mode: Literal["fast", "exact"] = "fast",
        ratio: float = 0.5,
        verbose: bool = False,
    ) -> str:
        """Search.

        Args:
            query: What to look for.
            limit: Most results.
            tags: Only these tags.
            mode: How to search.
            ratio: A ratio.
            verbose: Say more.
        """
        return f"{query} {limit} {tags} {mode} {ratio} {verbose}"

    tool = tk.get_tool("search")
    assert tool is not None
    tool.get_validator()
    check = tool.checks.quick
    assert check is not None, tool.parameters
    assert check({"query": "x"})
    assert check({"query": "x", "limit": 3, "tags": ["a"], "mode": "exact", "ratio": 1})
    assert check({"query": "x", "tags": None, "verbose": True})
    assert not check({"query": 1})
    assert not check({"limit": 3})
    assert not check({"query": "x", "mode": "slow"})
    assert not check({"query": "x", "limit": True})
    assert not check({"query": "x", "unknown": 1})  # additionalProperties: false
    # Rejected by the fast path, accepted by jsonschema (an integral float is an integer).
    assert not check({"query": "x", "limit": 2.0})
    chunks = [c async for c in tk.call_tool_function(tool_use("search", query="x", limit=2.0))]
    assert not chunks[-1].is_error
    chunks = [c async for c in tk.call_tool_function(tool_use("search", query="x", limit="2"))]
    assert chunks[-1].is_error and "limit" in chunks[-1].get_text()


def test_a_changed_schema_is_recompiled() -> None:
    tk = Toolkit()

    @tk.tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: Text.
        """
        return text

    tool = tk.get_tool("echo")
    assert tool is not None
    tool.get_validator()
    assert tool.checks.quick is not None and tool.checks.quick({"text": "x"})
    tool.parameters = {"type": "object", "properties": {"text": {"type": "integer"}}}
    tool.invalidate_schema()
    tool.get_validator()
    assert tool.checks.quick is not None and not tool.checks.quick({"text": "x"})

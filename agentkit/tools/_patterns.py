"""JSON Schema ``pattern`` keywords matched in linear time (RE2), for every tool's arguments.

A tool's schema may come from outside: an MCP server, a browser declaring frontend tools
(``agentkit.serve``). jsonschema matches ``pattern`` and ``patternProperties`` with Python's
backtracking ``re``, where ``^(a+)+$`` against 30 characters runs for minutes holding the
GIL: the whole process, every other user's request included, freezes. Here those keywords
run on RE2 (the ``google-re2`` wheel, as ``toolkits`` does for model-supplied patterns),
whose time is linear in the text. A pattern RE2 cannot run (backreferences, lookaround) makes
the schema invalid, with the reason in words.

jsonschema also matches ``patternProperties`` while finding which properties
``unevaluatedProperties`` applies to; a schema combining the two is refused (rare in tool
schemas) rather than matched on ``re``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["MAX_PATTERN_CHARS", "PatternError", "compile_pattern", "linear_validator"]

MAX_PATTERN_CHARS = 4096
"""Longest pattern accepted (a megabyte pattern is a mistake or an attack on memory)."""
_MAX_MEM = 8 << 20  # RE2's budget for one compiled program (its default)
# Where a "pattern" key is data, not a keyword.
_DATA_KEYWORDS = frozenset(("const", "default", "enum", "examples"))
_NAMED_SUBSCHEMAS = frozenset(("properties", "$defs", "definitions", "dependentSchemas"))


class Regex(Protocol):
    """A compiled RE2 pattern (``re2`` ships no type information)."""

    def search(self, text: str) -> object | None:
        """The first match in ``text``, or None."""
        ...


class PatternError(ValueError):
    """A pattern that cannot be matched in linear time, with the reason in words."""


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Regex:
    """``pattern`` compiled on RE2 (cached: schemas repeat their patterns on every call).

    Raises:
        PatternError: The pattern is too long, not valid Unicode, or uses syntax RE2 lacks.
    """
    import re2  # a C extension: loaded with the first schema that has a pattern

    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern of {len(pattern)} characters (limit {MAX_PATTERN_CHARS})")
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise PatternError("a pattern holds a lone surrogate (not valid Unicode)") from None
    options = re2.Options()
    options.log_errors = False  # raised to the caller; no stderr noise
    options.max_mem = _MAX_MEM
    try:
        compiled: Regex = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise PatternError(
            f"pattern {pattern[:200]!r} cannot be matched in linear time ({reason}): patterns "
            "run on RE2, which has no backreferences (\\1) and no lookaround ((?=...))"
        ) from None
    return compiled


def _search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


def _keywords(schema: object) -> Iterator[tuple[str, object]]:
    """Every (keyword, value) of ``schema`` and its subschemas (iteratively: no recursion)."""
    stack: list[tuple[object, str]] = [(schema, "")]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, list):
            stack.extend((item, parent) for item in node)
            continue
        if not isinstance(node, dict) or parent in _DATA_KEYWORDS:
            continue
        for key, value in node.items():
            if parent in _NAMED_SUBSCHEMAS:  # names of subschemas (a property "pattern")
                stack.append((value, ""))
                continue
            yield key, value
            stack.append((value, key))


def check_patterns(schema: object) -> None:
    """Compile every pattern of ``schema`` on RE2.

    Raises:
        PatternError: A pattern RE2 cannot run, or ``patternProperties`` together with
            ``unevaluatedProperties`` (jsonschema would match those on ``re``).
    """
    seen: set[str] = set()
    for keyword, value in _keywords(schema):
        seen.add(keyword)
        if keyword == "pattern" and isinstance(value, str):
            compile_pattern(value)
        elif keyword == "patternProperties" and isinstance(value, dict):
            for pattern in value:
                compile_pattern(str(pattern))
    if {"patternProperties", "unevaluatedProperties"} <= seen:
        raise PatternError("patternProperties with unevaluatedProperties is not supported")


class _Keywords(Protocol):
    """What a keyword callback uses of the validator running it."""

    def is_type(self, instance: object, type: str) -> bool: ...

    def descend(
        self, instance: object, schema: object, path: str, schema_path: str
    ) -> Iterator[ValidationError]: ...


@functools.cache
def _validator_class() -> type[Validator]:
    """Draft 2020-12 with its pattern-matching keywords on RE2 (built on first use)."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def pattern(
        validator: _Keywords, patrn: str, instance: object, schema: object
    ) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not _search(patrn, str(instance)):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(
        validator: _Keywords, given: object, instance: object, schema: object
    ) -> Iterator[ValidationError]:
        # An "object" to jsonschema's draft 2020-12 type checker is a dict.
        if not isinstance(instance, dict) or not isinstance(given, dict):
            return
        for patrn, subschema in given.items():
            for key, value in instance.items():
                if _search(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    original = Draft202012Validator.VALIDATORS["additionalProperties"]

    def additional_properties(
        validator: _Keywords, given: object, instance: object, schema: Mapping[str, object]
    ) -> Iterator[ValidationError]:
        # jsonschema's own keyword, on the properties no pattern claims (found on RE2).
        patterns = schema.get("patternProperties")
        if not isinstance(instance, dict) or not isinstance(patterns, dict):
            yield from original(validator, given, instance, schema)
            return
        named = schema.get("properties")
        named = named if isinstance(named, dict) else {}
        extras = {
            k: v
            for k, v in instance.items()
            if k not in named and not any(_search(p, k) for p in patterns)
        }
        rest = {k: v for k, v in schema.items() if k != "patternProperties"}
        yield from original(validator, given, extras, {**rest, "properties": {}})

    # Untyped in jsonschema's stubs; it returns a validator class.
    extend: Callable[..., type[Validator]] = validators.extend
    return extend(
        Draft202012Validator,
        {
            "pattern": pattern,
            "patternProperties": pattern_properties,
            "additionalProperties": additional_properties,
        },
    )


def linear_validator(schema: dict[str, object]) -> Validator:
    """A Draft 2020-12 validator of ``schema`` whose patterns match in linear time.

    Raises:
        jsonschema.exceptions.SchemaError: ``schema`` is not a valid JSON schema, or one of
            its patterns cannot run on RE2 (the message says which and why).
    """
    from jsonschema.exceptions import SchemaError

    cls = _validator_class()
    cls.check_schema(schema)
    try:
        check_patterns(schema)
    except PatternError as exc:
        raise SchemaError(str(exc)) from None
    validator: Validator = cls(schema)
    return validator

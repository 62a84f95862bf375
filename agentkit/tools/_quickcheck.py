"""A fast path for argument validation: a check compiled from simple parameter schemas.

jsonschema walks a schema with generic machinery: about 7 us per call even for one integer
argument. Most tool schemas (those built from function signatures) use a handful of
keywords, so they compile here into a few ``isinstance`` tests. The compiled check is a
one-sided filter: ``True`` means jsonschema would accept the arguments too; ``False`` only
means "ask jsonschema", which then decides and writes the error messages. A schema using
anything outside the supported subset compiles to ``None``: jsonschema checks every call.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["QuickCheck", "compile_check", "well_formed"]

QuickCheck = Callable[[object], bool]

# Keywords that never affect validity (Draft 2020-12 annotations). Not here: ``format``
# (whether it asserts depends on the validator's format checker) and ``$schema`` (jsonschema
# switches to that dialect's rules).
_ANNOTATIONS = frozenset(
    (
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
    )
)
_SUPPORTED = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
}
# JSON types as jsonschema's default type checker sees them (bool is not a number there; an
# integral float is an integer there, but rejecting it here just defers to jsonschema).
_TYPES: dict[str, QuickCheck] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def _accept(value: object) -> bool:
    return True


def compile_check(schema: object) -> QuickCheck | None:
    """Compile ``schema`` into a check that accepts only valid instances (None: unsupported)."""
    if schema is True:
        return _accept
    if not isinstance(schema, dict) or not _SUPPORTED.issuperset(schema):
        return None
    checks: list[QuickCheck] = []
    for part in (_type_check, _enum_check, _object_check, _items_check, _any_of_check):
        check = part(schema)
        if check is None:
            return None
        if check is not _accept:
            checks.append(check)
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # the usual ``type`` + ``properties`` pair: no generator
        first, second = checks
        return lambda value: first(value) and second(value)
    return lambda value: all(check(value) for check in checks)


def _type_check(schema: dict[str, object]) -> QuickCheck | None:
    if "type" not in schema:
        return _accept
    names = schema["type"]
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(n in _TYPES for n in names):
        return None
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda value: any(test(value) for test in tests)


def _enum_check(schema: dict[str, object]) -> QuickCheck | None:
    if "enum" not in schema:
        return _accept
    members = schema["enum"]
    # Strings only: Python's ``==`` matches JSON equality for them (not for 1, 1.0 and True).
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        return None
    allowed = frozenset(members)
    return lambda value: type(value) is str and value in allowed


def _object_check(schema: dict[str, object]) -> QuickCheck | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    compiled: dict[str, QuickCheck] = {}
    for name, sub in properties.items():
        sub_check = compile_check(sub)
        if sub_check is None:
            return None
        compiled[name] = sub_check
    extra_check = compile_check(extra) if extra is not False else None
    if extra is not False and extra_check is None:
        return None
    if not compiled and not required and extra_check is _accept:
        return _accept
    names = tuple(required)

    def check(value: object) -> bool:
        if not isinstance(value, dict):
            return True  # object keywords apply to objects only
        for name in names:
            if name not in value:
                return False
        for key, item in value.items():
            sub = compiled.get(key)
            if sub is None:
                if extra_check is None or not extra_check(item):
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _items_check(schema: dict[str, object]) -> QuickCheck | None:
    if "items" not in schema:
        return _accept
    item_check = compile_check(schema["items"])
    if item_check is None:
        return None
    if item_check is _accept:
        return _accept
    return lambda value: not isinstance(value, list) or all(item_check(v) for v in value)


def _any_of_check(schema: dict[str, object]) -> QuickCheck | None:
    if "anyOf" not in schema:
        return _accept
    options = schema["anyOf"]
    if not isinstance(options, list) or not options:
        return None
    checks = [compile_check(option) for option in options]
    if any(check is None for check in checks):
        return None
    valid = [check for check in checks if check is not None]
    return lambda value: any(check(value) for check in valid)


# What the Draft 2020-12 meta-schema asks of the annotations ``compile_check`` lets through
# (``default`` may be anything).
_ANNOTATION_KINDS: dict[str, type | tuple[type, ...]] = {
    "title": str,
    "description": str,
    "$comment": str,
    "examples": list,
    "deprecated": bool,
    "readOnly": bool,
    "writeOnly": bool,
}


def well_formed(schema: object) -> bool:
    """Whether the meta-schema accepts ``schema``, for a schema ``compile_check`` compiled.

    ``compile_check`` already refuses malformed ``type``, ``enum``, ``properties``,
    ``required``, ``items``, ``anyOf`` and ``additionalProperties``; what is left for the
    meta-schema is the annotations' types and the uniqueness of ``type`` and ``required``
    lists. Together they let a call skip jsonschema without hiding a broken schema.
    """
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for key, kind in _ANNOTATION_KINDS.items():
        if key in schema and not isinstance(schema[key], kind):
            return False
    for key in ("type", "required"):
        values = schema.get(key)
        if isinstance(values, list) and len(set(map(str, values))) != len(values):
            return False
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(k, str) for k in properties):
        return False
    subs = [*properties.values(), *schema.get("anyOf", ())]
    subs += [schema[key] for key in ("items", "additionalProperties") if key in schema]
    return all(well_formed(sub) for sub in subs)

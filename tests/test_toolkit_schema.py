"""JSON schemas from signatures and docstrings: every supported type, every docstring style,
and the errors for signatures that cannot be described."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict, Union

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from agentkit.exceptions import ToolRegistrationError
from agentkit.testing import tool_use
from agentkit.tools import Tool, ToolContext, Toolkit


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(TypedDict):
    """A point."""

    x: int
    y: int
    label: NotRequired[str]


@dataclasses.dataclass
class Box:
    """A box."""

    w: float
    h: float = 1.0


class Inner(BaseModel):
    v: int


class Outer(BaseModel):
    """An outer model."""

    inner: Inner
    tags: list[str] = []
    title: str = "x"  # a property named "title" survives title stripping


class Tree(BaseModel):
    """A recursive model."""

    name: str
    children: list[Tree] = []


def schema_of(fn: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
    tool = Toolkit().register_tool_function(fn, **kwargs)
    Draft202012Validator.check_schema(tool.parameters)  # valid JSON Schema, always
    return tool.parameters


def one_param(tp: Any, default: Any = dataclasses.MISSING) -> Callable[..., Any]:
    def f(x):  # type: ignore[no-untyped-def]
        """Take x."""

    f.__annotations__ = {"x": tp}
    if default is not dataclasses.MISSING:
        f.__defaults__ = (default,)
    return f


STRING = {"type": "string"}
INT = {"type": "integer"}
NULL = {"type": "null"}
TYPE_CASES: list[tuple[str, Any, dict[str, Any], dict[str, Any]]] = [
    # id, annotation, property schema, $defs
    ("str", str, STRING, {}),
    ("int", int, INT, {}),
    ("float", float, {"type": "number"}, {}),
    ("bool", bool, {"type": "boolean"}, {}),
    ("none", type(None), NULL, {}),
    ("optional", Optional[int], {"anyOf": [INT, NULL]}, {}),  # noqa: UP045
    ("pipe-none", int | None, {"anyOf": [INT, NULL]}, {}),
    ("union", Union[int, str], {"anyOf": [INT, STRING]}, {}),  # noqa: UP007
    ("literal", Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}, {}),
    ("literal-int", Literal[1, 2], {"enum": [1, 2], "type": "integer"}, {}),
    (
        "enum",
        Color,
        {"$ref": "#/$defs/Color"},
        {"Color": {"enum": ["red", "blue"], "type": "string"}},
    ),
    ("int-enum", Level, {"$ref": "#/$defs/Level"}, {"Level": {"enum": [1, 2], "type": "integer"}}),
    ("list", list[int], {"items": INT, "type": "array"}, {}),
    ("bare-list", list, {"items": {}, "type": "array"}, {}),
    ("sequence", Sequence[str], {"items": STRING, "type": "array"}, {}),
    (
        "tuple",
        tuple[int, str],
        {"maxItems": 2, "minItems": 2, "prefixItems": [INT, STRING], "type": "array"},
        {},
    ),
    ("tuple-var", tuple[int, ...], {"items": INT, "type": "array"}, {}),
    ("set", set[str], {"items": STRING, "type": "array", "uniqueItems": True}, {}),
    ("dict", dict[str, int], {"additionalProperties": INT, "type": "object"}, {}),
    ("bare-dict", dict, {"additionalProperties": True, "type": "object"}, {}),
    ("any", Any, {}, {}),
    ("datetime", datetime.datetime, {"format": "date-time", "type": "string"}, {}),
    (
        "typeddict",
        Point,
        {"$ref": "#/$defs/Point"},
        {
            "Point": {
                "description": "A point.",
                "properties": {"x": INT, "y": INT, "label": STRING},
                "required": ["x", "y"],
                "type": "object",
            }
        },
    ),
    (
        "dataclass",
        Box,
        {"$ref": "#/$defs/Box"},
        {
            "Box": {
                "description": "A box.",
                "properties": {"w": {"type": "number"}, "h": {"default": 1.0, "type": "number"}},
                "required": ["w"],
                "type": "object",
            }
        },
    ),
    (
        "pydantic-nested",
        Outer,
        {"$ref": "#/$defs/Outer"},
        {
            "Inner": {"properties": {"v": INT}, "required": ["v"], "type": "object"},
            "Outer": {
                "description": "An outer model.",
                "properties": {
                    "inner": {"$ref": "#/$defs/Inner"},
                    "tags": {"default": [], "items": STRING, "type": "array"},
                    "title": {"default": "x", "type": "string"},
                },
                "required": ["inner"],
                "type": "object",
            },
        },
    ),
    (
        "pydantic-recursive",
        Tree,
        {"$ref": "#/$defs/Tree"},
        {
            "Tree": {
                "description": "A recursive model.",
                "properties": {
                    "name": STRING,
                    "children": {"default": [], "items": {"$ref": "#/$defs/Tree"}, "type": "array"},
                },
                "required": ["name"],
                "type": "object",
            }
        },
    ),
    (
        "list-of-typeddict",
        list[Point],
        {"items": {"$ref": "#/$defs/Point"}, "type": "array"},
        {
            "Point": {
                "description": "A point.",
                "properties": {"x": INT, "y": INT, "label": STRING},
                "required": ["x", "y"],
                "type": "object",
            }
        },
    ),
    (
        "annotated-field",
        Annotated[int, Field(description="How many.", ge=1, le=10)],
        {"description": "How many.", "maximum": 10, "minimum": 1, "type": "integer"},
        {},
    ),
]


@pytest.mark.parametrize(
    ("annotation", "prop", "defs"),
    [c[1:] for c in TYPE_CASES],
    ids=[c[0] for c in TYPE_CASES],
)
def test_type_schemas(annotation: Any, prop: dict[str, Any], defs: dict[str, Any]) -> None:
    schema = schema_of(one_param(annotation))
    expected: dict[str, Any] = {
        "type": "object",
        "properties": {"x": prop},
        "required": ["x"],
        "additionalProperties": False,
    }
    if defs:
        expected["$defs"] = defs
    assert schema == expected


def test_defaults_are_not_required_and_are_shown() -> None:
    def f(a: int, b: str = "x", c: list[int] | None = None, d: Color = Color.RED) -> None:
        """F."""

    schema = schema_of(f)
    assert schema["required"] == ["a"]
    props = schema["properties"]
    assert props["b"] == {"default": "x", "type": "string"}
    assert props["c"] == {"anyOf": [{"items": INT, "type": "array"}, NULL], "default": None}
    assert props["d"] == {"$ref": "#/$defs/Color", "default": "red"}


def test_non_json_default_is_left_out_quietly() -> None:
    sentinel = object()

    def f(a: Any = sentinel) -> None:
        """F."""

    assert schema_of(f) == {
        "type": "object",
        "properties": {"a": {}},
        "additionalProperties": False,
    }


def test_unannotated_parameters_are_unconstrained() -> None:
    def f(a, b=3):  # type: ignore[no-untyped-def]
        """F."""

    schema = schema_of(f)
    assert schema["properties"] == {"a": {}, "b": {"default": 3}}
    assert schema["required"] == ["a"]


def test_no_parameters() -> None:
    def f() -> str:
        """F."""
        return ""

    assert schema_of(f) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_hidden_parameters() -> None:
    def f(query: str, api_key: str, ctx: ToolContext, *args: int, **kwargs: int) -> None:
        """F."""

    schema = schema_of(f, preset_kwargs={"api_key": "k"})
    assert schema == {"type": "object", "properties": {"query": STRING}, "required": ["query"]}


def test_optional_context_parameter_is_hidden() -> None:
    def f(q: str, context: ToolContext | None = None) -> None:
        """F."""

    assert list(schema_of(f)["properties"]) == ["q"]


def test_field_default_in_signature() -> None:
    def f(n: int = Field(5, description="Count.")) -> None:
        """F."""

    assert schema_of(f)["properties"] == {
        "n": {"default": 5, "description": "Count.", "type": "integer"}
    }


def test_parameter_names_that_clash_with_pydantic_are_fine() -> None:
    def f(model_config: str, schema: int, copy: bool, _private: str = "p") -> None:
        """F."""

    schema = schema_of(f)
    assert list(schema["properties"]) == ["model_config", "schema", "copy", "_private"]


# ----------------------------------------------------------------- docstrings


def google(a: int, b: str = "x") -> None:
    """Summary line.

    A longer description
    over two lines.

    Args:
        a (int): The first
            argument.
        b: The second.

    Returns:
        Nothing.
    """


def numpy_style(a: int, b: str = "x") -> None:
    """Summary line.

    A longer description
    over two lines.

    Parameters
    ----------
    a : int
        The first
        argument.
    b : str, optional
        The second.

    Returns
    -------
    None
    """


def rest(a: int, b: str = "x") -> None:
    """Summary line.

    A longer description
    over two lines.

    :param a: The first
        argument.
    :param str b: The second.
    :returns: Nothing.
    """


@pytest.mark.parametrize("fn", [google, numpy_style, rest], ids=["google", "numpy", "rest"])
def test_docstring_styles(fn: Callable[..., Any]) -> None:
    tool = Toolkit().register_tool_function(fn)
    assert tool.description == "Summary line.\n\nA longer description\nover two lines."
    props = tool.parameters["properties"]
    assert props["a"]["description"] == "The first\nargument."
    assert props["b"]["description"] == "The second."
    assert "Returns" not in tool.description and "Nothing" not in tool.description


def test_field_description_wins_over_docstring_and_explicit_description() -> None:
    def f(a: Annotated[int, Field(description="From Field.")]) -> None:
        """Doc.

        Args:
            a: From docstring.
        """

    tool = Toolkit().register_tool_function(f, description="Explicit.")
    assert tool.description == "Explicit."
    assert tool.parameters["properties"]["a"]["description"] == "From Field."


def test_docstring_description_is_added_next_to_a_ref() -> None:
    def f(box: Box) -> None:
        """Doc.

        Args:
            box: The box to use.
        """

    assert schema_of(f)["properties"]["box"] == {
        "$ref": "#/$defs/Box",
        "description": "The box to use.",
    }


def test_no_docstring() -> None:
    def f(a: int) -> None:
        pass

    tool = Toolkit().register_tool_function(f)
    assert tool.description == ""
    assert "description" not in tool.parameters["properties"]["a"]


def test_partial_and_wrapped_functions() -> None:
    def base(a: int, b: int) -> int:
        """Base doc."""
        return a + b

    @functools.wraps(base)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        return base(*args, **kwargs)

    part = functools.partial(base, b=1)
    tk = Toolkit()
    assert tk.register_tool_function(wrapper).parameters["required"] == ["a", "b"]
    tool = tk.register_tool_function(part, name="part")
    assert tool.parameters["properties"]["b"] == {"default": 1, "type": "integer"}
    assert tool.description == "Base doc."


# ----------------------------------------------------------------- schemas validate what they say


def test_schema_accepts_and_rejects_like_the_types() -> None:
    def f(
        color: Color,
        point: Point,
        box: Box,
        outer: Outer,
        pair: tuple[int, str],
        n: int | None = None,
    ) -> None:
        """F."""

    validator = Draft202012Validator(schema_of(f))
    good = {
        "color": "red",
        "point": {"x": 1, "y": 2},
        "box": {"w": 1.5},
        "outer": {"inner": {"v": 1}},
        "pair": [1, "a"],
    }
    assert validator.is_valid(good)
    for key, bad in [
        ("color", "green"),
        ("point", {"x": 1}),
        ("box", {"w": "wide"}),
        ("outer", {"inner": {}}),
        ("pair", [1, 2]),
        ("n", "3"),
    ]:
        assert not validator.is_valid({**good, key: bad}), key


# ----------------------------------------------------------------- bad signatures


class Opaque:
    """Not describable."""


def bad_type(x: Opaque) -> None:
    """Bad."""


def bad_callable(cb: Callable[[int], int]) -> None:
    """Bad."""


def bad_nested(xs: list[Opaque]) -> None:
    """Bad."""


def two_contexts(a: ToolContext, b: ToolContext) -> None:
    """Bad."""


def unresolvable(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
    """Bad."""


def plain(a: int) -> None:
    """Plain."""


BAD = [
    (
        "opaque-class",
        bad_type,
        {},
        r"tool 'bad_type': parameter 'x' has type Opaque, which cannot be described as JSON "
        r"schema \(PydanticSchemaGenerationError: .*\)\. Use a JSON type, an Enum, a TypedDict, "
        r"a dataclass or a pydantic model, or hide the parameter with preset_kwargs",
    ),
    ("callable", bad_callable, {}, r"tool 'bad_callable': parameter 'cb' has type .*Callable.*"),
    (
        "nested-opaque",
        bad_nested,
        {},
        r"tool 'bad_nested': parameter 'xs' has type list\[.*Opaque\].*",
    ),
    ("two-contexts", two_contexts, {}, r"tool 'two_contexts': more than one ToolContext parameter"),
    (
        "unresolvable-annotation",
        unresolvable,
        {},
        r"tool 'unresolvable': cannot resolve the type annotations \(NameError: name "
        r"'NotDefinedAnywhere' is not defined\); define the annotated types at module level .*",
    ),
    (
        "unknown-preset",
        plain,
        {"preset_kwargs": {"nope": 1}},
        r"tool 'plain': preset_kwargs \['nope'\] are not parameters of the function",
    ),
    (
        "bad-name",
        plain,
        {"name": "has space"},
        r"invalid tool name 'has space': use 1 to 64 letters, digits, '_' or '-'.*",
    ),
    ("lambda-name", lambda: None, {}, r"invalid tool name '<lambda>': .*pass name=.*"),
    ("no-signature", max, {}, r"tool 'max': cannot read the signature: .*"),
]


@pytest.mark.parametrize(("fn", "kwargs", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_signatures_raise_at_registration(
    fn: Callable[..., Any], kwargs: dict[str, Any], message: str
) -> None:
    tk = Toolkit()
    with pytest.raises(ToolRegistrationError, match=message):
        tk.register_tool_function(fn, **kwargs)
    assert tk.tools == {}


def test_opaque_type_can_be_hidden_with_preset_kwargs() -> None:
    tool = Toolkit().register_tool_function(bad_type, preset_kwargs={"x": Opaque()})
    assert tool.parameters["properties"] == {}


# ----------------------------------------------------------------- built once


async def test_schema_and_validator_are_built_once() -> None:
    tk = Toolkit()
    tool: Tool = tk.register_tool_function(google)
    first = tk.get_tool_definitions()
    # The offered schema is the function's own, shared, never rebuilt per request.
    assert tk.get_tool_definitions()[0].parameters is first[0].parameters
    assert first[0].parameters is tool.tool_definition.parameters
    async for _ in tk.call_tool_function(tool_use("google", a=1)):
        pass
    validator = tool.get_validator()
    async for _ in tk.call_tool_function(tool_use("google", a=2)):
        pass
    assert tool.get_validator() is validator
    assert first[0].to_openai() == {
        "type": "function",
        "function": {
            "name": "google",
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def test_import_is_lazy() -> None:
    import json
    import subprocess
    import sys

    code = (
        "import sys, json, agentkit.tools;"
        "t = agentkit.tools.Toolkit();"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'pydantic', 'jsonschema', 'docstring_parser', 'mcp'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


async def test_a_pydantic_model_class_as_a_tool() -> None:
    class Note(BaseModel):
        """Make a note."""

        text: str
        stars: int = 1

    tk = Toolkit()
    tool = tk.register_tool_function(Note, name="note")
    assert tool.description == "Make a note."
    assert tool.parameters["properties"] == {
        "text": STRING,
        "stars": {"default": 1, "type": "integer"},
    }
    final = [c async for c in tk.call_tool_function(tool_use("note", text="hi"))][-1]
    assert final.get_text() == '{"text":"hi","stars":1}'

"""JSON schema of a Python function, from its signature and its docstring.

Built once, at registration. pydantic generates the schema of each parameter type (so
TypedDicts, dataclasses, enums and nested models share one ``$defs``) and, for parameters
whose types JSON cannot carry natively, converts validated arguments to those types.
Everything a schema cannot describe fails here, with the parameter's name, never at call time.

A function whose parameters are all JSON's own types (``str``, ``int``, ``list[str]``,
``int | None``, a ``Literal`` of strings...) needs no conversion, and its schema is written
here directly, exactly as pydantic would write it: registering such a function does not
import pydantic (a few hundred milliseconds of a cold start).
"""

from __future__ import annotations

import enum
import functools
import inspect
import operator
import sys
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union, cast, get_args, get_origin

import docstring_parser

from agentkit._text import copy_json
from agentkit.exceptions import ToolRegistrationError
from agentkit.tools._base import ArgumentChecks
from agentkit.tools._context import ToolContext

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["CallKind", "FunctionSpec", "build_function_spec", "call_kind"]

_P = inspect.Parameter
CallKind: TypeAlias = Literal["async", "sync", "async_gen", "sync_gen"]
"""How a function is called: awaited, in a thread, or iterated."""
_NATIVE_SCALARS: frozenset[object] = frozenset((str, int, float, bool, type(None), Any, object))


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """How to describe and call one function.

    Attributes:
        description: Tool description (docstring summary and long description).
        parameters: The ``object`` JSON schema shown to the model.
        visible: Model-facing parameter names, in signature order.
        positional: Names (visible or preset) that must be passed positionally.
        context_param: Name of the ``ToolContext`` parameter, if any.
        var_keyword: The function takes ``**kwargs`` (extra arguments are passed through).
        model: pydantic model converting arguments to annotated types; None when every
            visible parameter is JSON-native (the fast path passes arguments as they are).
        aliases: Model field name -> parameter name (fields are renamed to avoid clashes
            with pydantic's own attribute names).
        kind: How the function is called (awaited, in a thread, iterated).
        checks: The compiled argument checks of ``parameters``, shared by its tools.
    """

    description: str
    parameters: dict[str, object]
    visible: tuple[str, ...]
    positional: tuple[str, ...]
    context_param: str | None
    var_keyword: bool
    model: type[BaseModel] | None
    aliases: Mapping[str, str]
    kind: CallKind = "sync"
    checks: ArgumentChecks = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Compiled lazily, once per spec: every tool built from this spec shares it.
        object.__setattr__(self, "checks", ArgumentChecks(self.parameters))


# Specs are shared by every Toolkit that registers the same function, and by the closures of
# one ``def`` (a tool defined anew per conversation): describing a function costs about 0.7 ms
# (docstring parsing and type hints; several ms with a pydantic model), a hit a few
# microseconds. The key is everything the spec is built from, as immutable values (the code
# object, the docstring, the resolved annotations, the defaults with their types), never the
# function object: a function changed after registration has another key, so no spec can go
# stale. A function whose key cannot be written so is described afresh each time. Bounded:
# the oldest entry leaves first.
_SPECS: dict[tuple[object, ...], FunctionSpec] = {}
_MAX_SPECS = 256
_UNFROZEN = object()  # a value ``_frozen`` cannot write as immutable data


def build_function_spec(
    fn: Callable[..., object],
    *,
    name: str,
    description: str | None = None,
    preset_kwargs: Mapping[str, object] | None = None,
) -> FunctionSpec:
    """Describe ``fn`` as a tool (shared by equal functions; see ``_SPECS``).

    A function defined anew for every conversation (a tool closing over the request's user)
    is a new object each time; it shares the spec of the earlier ones with the same code,
    docstring, defaults and annotations.

    Args:
        fn: The function (sync or async, plain or generator, bound method, callable object).
        name: The tool name, for error messages.
        description: Overrides the docstring's description.
        preset_kwargs: Arguments fixed at registration, hidden from the model.

    Returns:
        The function's spec (the same object for equal functions and options).

    Raises:
        ToolRegistrationError: the signature cannot be described.
    """
    key = _spec_key(fn, (name, description, tuple(sorted(preset_kwargs or ()))))
    spec = _SPECS.get(key) if key is not None else None
    if spec is None:
        spec = _build_function_spec(
            fn, name=name, description=description, preset_kwargs=preset_kwargs
        )
        if key is not None:
            if len(_SPECS) >= _MAX_SPECS:
                oldest = next(iter(_SPECS), None)
                if oldest is not None:  # (pop: another thread may have taken it out first)
                    _SPECS.pop(oldest, None)
            _SPECS[key] = spec
    return spec


def _spec_key(fn: Callable[..., object], options: tuple[object, ...]) -> tuple[object, ...] | None:
    """What ``fn``'s spec is built from, as hashable immutable values (None: not expressible).

    Only plain functions (decorated ones by what they wrap): partials, methods, callable
    objects and functions with ``__signature__`` set are described afresh. Annotations are
    compared resolved (a name rebound in the module is seen), and classes in them by
    identity.
    """
    if not isinstance(fn, types.FunctionType):
        return None
    extra = fn.__dict__  # set by functools.wraps or by hand; empty on plain functions
    if extra and "__signature__" in extra:
        return None
    if extra and "__wrapped__" in extra:  # the signature and the hints are the wrapped one's
        inner = _spec_key(extra["__wrapped__"], ())
        return None if inner is None else (fn.__code__, _docstring(fn), inner, *options)
    defaults, kwdefaults = _frozen(fn.__defaults__), _frozen(fn.__kwdefaults__)
    if defaults is _UNFROZEN or kwdefaults is _UNFROZEN:
        return None
    try:
        # The raw docstring decides what ``inspect.getdoc`` makes of it (a missing one is
        # looked up, in the classes of a method).
        doc = fn.__doc__ if fn.__doc__ is not None else _docstring(fn)
        key = (fn.__code__, doc, _resolved(fn), defaults, kwdefaults, *options)
        hash(key)
    except Exception:  # unresolvable or unhashable annotations: described (and reported) afresh
        return None
    return key


def _resolved(fn: types.FunctionType) -> tuple[tuple[str, object], ...]:
    """``fn``'s annotations, resolved in its module as ``typing.get_type_hints`` does.

    String annotations (``from __future__ import annotations``) are evaluated from code
    compiled once per string, and annotation objects without forward references are taken
    as they are: ``get_type_hints`` compiles each string anew and walks every type, which
    would be most of a cache hit's cost. Anything with a quoted forward reference goes
    through ``get_type_hints``, which resolves nested references too.
    """
    resolved: list[tuple[str, object]] = []
    scope = fn.__globals__
    for name, annotation in fn.__annotations__.items():
        if not isinstance(annotation, str):
            if not _settled(annotation):
                return tuple(typing.get_type_hints(fn, include_extras=True).items())
            resolved.append((name, annotation))
        elif "'" in annotation or '"' in annotation:
            return tuple(typing.get_type_hints(fn, include_extras=True).items())
        else:
            resolved.append((name, eval(_annotation_code(annotation), scope)))
    return tuple(resolved)


def _settled(tp: object) -> bool:
    """Whether an annotation object holds no forward reference (nothing left to resolve)."""
    if not isinstance(tp, types.GenericAlias) and isinstance(tp, type):
        return True  # a class (``list[int]`` passes for one: it is looked into below)
    if isinstance(tp, str | typing.ForwardRef):
        return False
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return True  # its arguments are values, not types
    if origin is typing.Annotated:
        return _settled(args[0])  # the metadata is not resolved either
    return all(_settled(a) for a in args if a is not Ellipsis)


@functools.lru_cache(maxsize=1024)
def _annotation_code(text: str) -> types.CodeType:
    """One annotation string, compiled (keyed by the string itself: it cannot go stale)."""
    return compile(text, "<annotation>", "eval")


def _frozen(value: object) -> object:
    """``value`` as immutable data equal only to the same value of the same types.

    ``1``, ``True`` and ``1.0`` are equal in Python but each is its own JSON default, so
    every value is written with its type. ``_UNFROZEN`` for anything but JSON-like data
    and enum members.
    """
    kind = type(value)
    if value is None or kind in (str, int, float, bool, bytes) or isinstance(value, enum.Enum):
        return (kind, value)
    if kind is tuple or kind is list:
        items = tuple(map(_frozen, cast("list[object]", value)))
        return _UNFROZEN if _UNFROZEN in items else (kind, items)
    if kind is dict:
        pairs = tuple(
            (_frozen(k), _frozen(v)) for k, v in cast("dict[object, object]", value).items()
        )
        return _UNFROZEN if any(_UNFROZEN in pair for pair in pairs) else (kind, pairs)
    return _UNFROZEN


def _build_function_spec(
    fn: Callable[..., object],
    *,
    name: str,
    description: str | None = None,
    preset_kwargs: Mapping[str, object] | None = None,
) -> FunctionSpec:
    """Describe ``fn`` as a tool, uncached.

    Args:
        fn: The function (sync or async, plain or generator, bound method, callable object).
        name: The tool name, for error messages.
        description: Overrides the docstring's description.
        preset_kwargs: Arguments fixed at registration, hidden from the model.

    Returns:
        The function's spec.

    Raises:
        ToolRegistrationError: the signature cannot be described.
    """
    preset = dict(preset_kwargs or {})
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolRegistrationError(f"tool {name!r}: cannot read the signature: {exc}") from exc
    hints = _type_hints(fn, name)
    doc = docstring_parser.parse(_docstring(fn) or "")
    arg_docs = {p.arg_name.lstrip("*"): p.description or "" for p in doc.params}
    params = _Params()
    for param in sig.parameters.values():
        params.add(param, hints, preset, name)
    unknown = set(preset) - set(sig.parameters)
    if unknown and not params.var_keyword:
        raise ToolRegistrationError(
            f"tool {name!r}: preset_kwargs {sorted(unknown)} are not parameters of the function"
        )
    needs_conversion = bool(params.model_defaults) or any(
        not _is_native(annotation) for annotation, _ in params.fields.values()
    )
    native = None if needs_conversion else _native_schema(params.fields, params.aliases)
    model: type[BaseModel] | None = None
    if native is None:
        model = _build_model(name, params.fields, params.aliases)
        native = _pydantic_schema(model, name)
    parameters = _parameters_schema(native, arg_docs, params.var_keyword)
    if description is None:
        parts = (doc.short_description, doc.long_description)
        description = "\n\n".join(p.strip() for p in parts if p and p.strip())
    return FunctionSpec(
        description=description,
        parameters=parameters,
        visible=tuple(params.visible),
        positional=tuple(params.positional),
        context_param=params.context_param,
        var_keyword=params.var_keyword,
        model=model if needs_conversion else None,  # None: arguments pass as they are
        aliases=params.aliases,
        kind=call_kind(fn),
    )


def call_kind(fn: Callable[..., object]) -> CallKind:
    """How ``fn`` is called (a callable object by its ``__call__``)."""
    target: object = fn
    if not (inspect.isroutine(fn) or isinstance(fn, functools.partial)):
        target = type(fn).__call__  # a callable object
    if inspect.isasyncgenfunction(target):
        return "async_gen"
    if inspect.iscoroutinefunction(target):
        return "async"
    if inspect.isgeneratorfunction(target):
        return "sync_gen"
    return "sync"


@dataclass(slots=True)
class _Params:
    """Sorts a signature's parameters into model-visible fields and hidden ones."""

    fields: dict[str, tuple[object, object]] = field(default_factory=dict)  # (type, default)
    aliases: dict[str, str] = field(default_factory=dict)
    visible: list[str] = field(default_factory=list)
    positional: list[str] = field(default_factory=list)
    model_defaults: set[str] = field(default_factory=set)
    context_param: str | None = None
    var_keyword: bool = False
    rebuilt: dict[type, object] = field(default_factory=dict)  # see ``_compat``

    def add(
        self,
        param: inspect.Parameter,
        hints: dict[str, object],
        preset: Mapping[str, object],
        name: str,
    ) -> None:
        if param.kind is _P.VAR_POSITIONAL:
            return
        if param.kind is _P.VAR_KEYWORD:
            self.var_keyword = True
            return
        annotation = _compat(hints.get(param.name, _signature_annotation(param)), self.rebuilt)
        if param.kind is _P.POSITIONAL_ONLY:
            self.positional.append(param.name)
        if _is_context(annotation):
            if param.name in preset:
                raise ToolRegistrationError(
                    f"tool {name!r}: the ToolContext parameter {param.name!r} cannot be preset"
                )
            if self.context_param is not None:
                raise ToolRegistrationError(f"tool {name!r}: more than one ToolContext parameter")
            self.context_param = param.name
            return
        if param.name in preset:
            return
        # Fields get neutral names (the parameter name is the alias): a parameter may be
        # called ``model_config``, ``schema`` or ``_x`` without clashing with pydantic.
        field_name = f"f{len(self.fields)}"
        self.aliases[field_name] = param.name
        default = ... if param.default is _P.empty else param.default
        if _is_field_info(default):
            # ``x: int = Field(3, description=...)``: the Python default is the FieldInfo
            # itself, so pydantic must fill in the real default (conversion path).
            self.model_defaults.add(param.name)
        self.fields[field_name] = (annotation, default)
        self.visible.append(param.name)


def _is_field_info(value: object) -> bool:
    """Whether ``value`` is a pydantic ``FieldInfo`` (none can exist before pydantic loads)."""
    if "pydantic.fields" not in sys.modules:
        return False
    from pydantic.fields import FieldInfo

    return isinstance(value, FieldInfo)


def _signature_annotation(param: inspect.Parameter) -> object:
    # A __signature__ set by a library (pydantic models) carries real types, not strings.
    ann = param.annotation
    return Any if ann is _P.empty or isinstance(ann, str) else ann


def _type_hints(fn: Callable[..., object], name: str) -> dict[str, object]:
    """Resolve annotations (string annotations included) of ``fn``."""
    target: object = fn
    while True:  # functools.partial and decorators that keep __wrapped__
        if isinstance(target, functools.partial):
            target = target.func
        elif (wrapped := getattr(target, "__wrapped__", None)) is not None:
            target = wrapped
        else:
            break
    if inspect.isclass(target):
        target = target.__init__
    elif not inspect.isroutine(target) and callable(target):
        target = type(target).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # NameError for a type defined where the function cannot see it
        raise ToolRegistrationError(
            f"tool {name!r}: cannot resolve the type annotations ({type(exc).__name__}: {exc}); "
            "define the annotated types at module level so that they can be resolved"
        ) from exc


def _docstring(fn: object) -> str | None:
    while isinstance(fn, functools.partial):
        fn = fn.func
    text = inspect.getdoc(fn)
    if not text and not inspect.isroutine(fn):
        text = inspect.getdoc(type(fn).__call__)  # a callable object documents __call__
    return text


_OLD_TYPEDDICT = sys.version_info < (3, 12)


def _compat(tp: object, rebuilt: dict[type, object]) -> object:
    """On Python 3.11, rebuild ``typing.TypedDict`` classes as ``typing_extensions`` ones.

    pydantic refuses ``typing.TypedDict`` before 3.12; users should not have to care.
    ``rebuilt`` holds the classes already rebuilt for this function, so that a TypedDict
    used by two parameters is one class (one ``$defs`` entry) in its schema.
    """
    if not _OLD_TYPEDDICT:
        return tp
    if isinstance(tp, type) and typing.is_typeddict(tp) and type(tp).__module__ == "typing":
        if tp not in rebuilt:
            rebuilt[tp] = _rebuild_typeddict(tp, rebuilt)
        return rebuilt[tp]
    origin, args = get_origin(tp), get_args(tp)
    if origin is None or not args or origin is Literal:
        return tp
    if origin is typing.Annotated:
        return typing.Annotated[(_compat(args[0], rebuilt), *args[1:])]
    new_args = tuple(_compat(a, rebuilt) if a is not Ellipsis else a for a in args)
    if new_args == args:
        return tp
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, new_args)
    return tp.copy_with(new_args) if hasattr(tp, "copy_with") else origin[new_args]


def _rebuild_typeddict(tp: type, rebuilt: dict[type, object]) -> object:
    import typing_extensions as te

    hints = typing.get_type_hints(tp, include_extras=True)
    fields: dict[str, object] = {}
    markers = (te.Required, te.NotRequired, typing.Required, typing.NotRequired)
    for key, hint in hints.items():
        # With string annotations 3.11 cannot see ``NotRequired`` at class creation, so
        # ``__required_keys__`` may be wrong: the resolved hint decides.
        required = key in getattr(tp, "__required_keys__", ())
        while get_origin(hint) in markers:
            required = get_origin(hint) in (te.Required, typing.Required)
            hint = get_args(hint)[0]
        wrapper = te.Required if required else te.NotRequired
        fields[key] = wrapper[_compat(hint, rebuilt)]
    make: Any = te.TypedDict  # the functional form: mypy only takes a literal dict of fields
    new = make(tp.__name__, fields)
    new.__doc__ = tp.__doc__
    new.__module__ = tp.__module__
    return new


def _is_context(annotation: object) -> bool:
    if annotation is ToolContext or get_origin(annotation) is ToolContext:
        return True  # ToolContext, or ToolContext[Deps]
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return len(args) == 1 and (args[0] is ToolContext or get_origin(args[0]) is ToolContext)
    return False


def _is_native(tp: object) -> bool:
    """True when a JSON value valid for ``tp``'s schema already is a ``tp`` in Python."""
    try:
        if tp in _NATIVE_SCALARS:
            return True
    except TypeError:  # an unhashable annotation: not one of the scalars
        pass
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        extras = args[1:]
        plain = all(isinstance(m, str) or _is_plain_field(m) for m in extras)
        return plain and _is_native(args[0])
    if origin is Literal:
        return all(not isinstance(a, enum.Enum) for a in args)
    if origin in (Union, types.UnionType):
        return all(_is_native(a) for a in args)
    if origin in (list, typing.Sequence, typing.Iterable, typing.Collection):
        return all(_is_native(a) for a in args)
    if origin in (dict, typing.Mapping):
        return all(_is_native(a) for a in args)
    return tp in (list, dict)


def _is_plain_field(meta: object) -> bool:
    # A Field() carrying only schema facts (description, bounds): jsonschema enforces them.
    if not _is_field_info(meta):
        return False
    from pydantic.fields import FieldInfo

    if not isinstance(meta, FieldInfo):
        return False
    return meta.default_factory is None and not any(callable(m) for m in meta.metadata)


def _build_model(
    name: str, fields: Mapping[str, tuple[object, object]], aliases: Mapping[str, str]
) -> type[BaseModel]:
    from pydantic import ConfigDict, Field, create_model
    from pydantic.fields import FieldInfo

    config = ConfigDict(extra="ignore", arbitrary_types_allowed=False, validate_by_alias=True)
    described: dict[str, Any] = {}  # (type form, FieldInfo): pydantic types a form as Any
    for key, (annotation, default) in fields.items():
        alias = Field(alias=aliases[key])
        info = (
            FieldInfo.merge_field_infos(default, alias)
            if isinstance(default, FieldInfo)
            else Field(default, alias=aliases[key])
        )
        described[key] = (annotation, info)
    try:
        return create_model(f"{name}_arguments", __config__=config, **described)
    except Exception as exc:
        annotations = {aliases[key]: annotation for key, (annotation, _) in fields.items()}
        raise _describe_failure(name, annotations, exc) from exc


def _pydantic_schema(model: type[BaseModel], name: str) -> dict[str, object]:
    """``model``'s JSON schema by pydantic, without the auto titles."""
    from pydantic.json_schema import PydanticJsonSchemaWarning

    try:
        with warnings.catch_warnings():
            # Non-JSON defaults are left out of the schema; pydantic warns about it.
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            raw = model.model_json_schema(by_alias=True)
    except Exception as exc:
        annotations = {f.alias or k: f.annotation for k, f in model.model_fields.items()}
        raise _describe_failure(name, annotations, exc) from exc
    return _strip_object_titles(raw)


_SCALAR_SCHEMAS: dict[object, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _native_schema(
    fields: Mapping[str, tuple[object, object]], aliases: Mapping[str, str]
) -> dict[str, object] | None:
    """The schema pydantic writes for these fields, when every type and default is JSON's own.

    None when any field needs pydantic (a type or a default outside the small set written
    here): the caller builds the model. Keys are sorted as pydantic sorts them (``properties``
    in signature order); the parity with pydantic is tested type by type.
    """
    properties: dict[str, object] = {}
    required: list[str] = []
    for key, (annotation, default) in fields.items():
        schema = _type_schema(annotation)
        if schema is None:
            return None
        if default is ...:
            required.append(aliases[key])
        elif _plain_json(default):
            # A copy: the schema must not share a mutable default with the function.
            schema = dict(sorted({**schema, "default": copy_json(default)}.items()))
        else:
            return None
        properties[aliases[key]] = schema
    return {"properties": properties, "required": required}


def _type_schema(tp: object) -> dict[str, object] | None:
    """The JSON schema of one JSON-native type, as pydantic writes it (None: not one)."""
    try:
        if tp is Any or tp is object:
            return {}
        name = _SCALAR_SCHEMAS.get(tp)
    except TypeError:  # an unhashable annotation
        return None
    if name is not None:
        return {"type": name}
    if tp is list:
        return {"items": {}, "type": "array"}
    if tp is dict:
        return {"additionalProperties": True, "type": "object"}
    origin, args = get_origin(tp), get_args(tp)
    if origin is list and len(args) == 1:
        items = _type_schema(args[0])
        return None if items is None else {"items": items, "type": "array"}
    if origin is dict and len(args) == 2 and args[0] is str:
        if args[1] is Any or args[1] is object:
            return {"additionalProperties": True, "type": "object"}
        values = _type_schema(args[1])
        return None if values is None else {"additionalProperties": values, "type": "object"}
    if origin in (Union, types.UnionType):
        members = [_type_schema(a) for a in args]
        if any(m is None for m in members):
            return None
        return {"anyOf": members}
    if origin is Literal:
        return _literal_schema(args)
    return None


def _literal_schema(values: tuple[object, ...]) -> dict[str, object] | None:
    kinds = {type(v) for v in values}
    if len(kinds) != 1 or not kinds <= {str, int, bool}:
        return None  # mixed, enum members, None: pydantic's own rules
    kind = _SCALAR_SCHEMAS[kinds.pop()]
    if len(values) == 1:
        return {"const": values[0], "type": kind}
    return {"enum": list(values), "type": kind}


def _plain_json(value: object) -> bool:
    """Whether pydantic would write ``value`` as a schema default unchanged."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return True
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if kind is list:
        return all(map(_plain_json, cast("list[object]", value)))
    if kind is dict:
        items = cast("dict[object, object]", value).items()
        return all(type(k) is str and _plain_json(v) for k, v in items)
    return False


def _parameters_schema(
    schema: Mapping[str, object], arg_docs: Mapping[str, str], var_keyword: bool
) -> dict[str, object]:
    found = schema.get("properties")
    properties: dict[str, object] = found if isinstance(found, dict) else {}
    for arg, text in arg_docs.items():
        prop = properties.get(arg)
        if isinstance(prop, dict) and text and "description" not in prop:
            prop["description"] = text
    result: dict[str, object] = {"type": "object", "properties": properties}
    if schema.get("required"):
        result["required"] = schema["required"]
    if not var_keyword:
        result["additionalProperties"] = False
    if "$defs" in schema:
        result["$defs"] = schema["$defs"]
    return result


def _describe_failure(
    name: str, annotations: Mapping[str, Any], exc: Exception
) -> ToolRegistrationError:
    """Find the parameter whose type pydantic cannot handle, for a useful message."""
    from pydantic import TypeAdapter
    from pydantic.json_schema import PydanticJsonSchemaWarning

    for param, tp in annotations.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
                TypeAdapter(tp).json_schema()
        except Exception as inner:
            return ToolRegistrationError(
                f"tool {name!r}: parameter {param!r} has type {_type_name(tp)}, which cannot be "
                f"described as JSON schema ({type(inner).__name__}: {_first_line(inner)}). Use "
                "a JSON type, an Enum, a TypedDict, a dataclass or a pydantic model, or hide the "
                "parameter with preset_kwargs"
            )
    return ToolRegistrationError(
        f"tool {name!r}: cannot build the arguments schema ({type(exc).__name__}: "
        f"{_first_line(exc)})"
    )


def _type_name(tp: object) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


# Keywords whose value is a map of name -> schema, a list of schemas, or one schema.
_SCHEMA_MAPS = frozenset(("properties", "$defs", "definitions", "patternProperties"))
_SCHEMA_LISTS = frozenset(("anyOf", "oneOf", "allOf", "prefixItems"))
_SCHEMA_ONE = frozenset(
    ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
)


def _strip_titles(schema: object) -> object:
    """``schema`` without pydantic's auto ``title``s (a non-object is returned as it is)."""
    return _strip_object_titles(schema) if isinstance(schema, dict) else schema


def _strip_object_titles(schema: Mapping[str, object]) -> dict[str, object]:
    """Drop pydantic's auto ``title``s (tokens the model does not need), structurally.

    Walking keyword by keyword keeps a *property* named ``title`` intact.
    """
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _strip_titles(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_strip_titles(v) for v in value]
        elif key in _SCHEMA_ONE:
            out[key] = _strip_titles(value)
        else:
            out[key] = value
    return out

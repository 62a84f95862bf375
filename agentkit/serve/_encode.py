r"""AG-UI events as SSE text, the same bytes as ag-ui's ``EventEncoder``, without its cost.

``EventEncoder.encode`` is ``f"data: {event.model_dump_json(by_alias=True)}\\n\\n"``, and
every event model serializes through a Python-level wrap serializer (ag-ui's
``_omit_fields_without_value``): about half of what a served turn spends on its ~47 events.
Most of a turn's events carry only strings (``TEXT_MESSAGE_CONTENT``, the ``TOOL_CALL_*``
and ``STEP_*`` events...), so for those classes :func:`encode` writes the JSON itself: the
fields in the model's order under their aliases, a field whose value is None left out where
ag-ui leaves it out, strings escaped as pydantic escapes them (``json``'s C encoder with
``ensure_ascii=False`` writes the same), a ``metadata`` of string keys and values (a tool
result's ``{"status": ...}``) as the object it is. Anything else in such an event (a
``timestamp``, other metadata, an extra field, a string with a lone surrogate, which
pydantic refuses) and every other class go through ``EventEncoder``: the output never differs
(tests/test_serve_encode.py checks it byte for byte, class by class).

:func:`encode_as` writes such an event from its field values without building the model at
all (the served stream's own events: most of what a turn streams): the same bytes, and for
values the model would refuse, the model's own error.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, cast

from ag_ui.core import (
    BaseEvent,
    EventType,
    Message,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic import BaseModel

from agentkit.serve._convert import Fields, build

__all__ = ["FAST_EVENTS", "encode", "encode_as", "encode_snapshot"]

_ENCODER = EventEncoder()
_SURROGATE = re.compile("[\ud800-\udfff]")

FAST_EVENTS: tuple[type[BaseEvent], ...] = (
    TextMessageStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    ToolCallStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    StepStartedEvent,
    StepFinishedEvent,
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningEndEvent,
    SubagentStartedEvent,
    SubagentFinishedEvent,
    RunStartedEvent,
)
"""The event classes :func:`encode` writes itself when their values are strings."""

_REQUIRED = object()  # the default of a field that has none

# Per class: (field name, '"key":', omitted when None, default, allowed literals or None) in
# serialization order.
_Plan = tuple[tuple[str, str, bool, object, frozenset[object] | None], ...]


def _literals(annotation: object) -> frozenset[object] | None:
    """The values a ``Literal[...]`` field (or an optional one) admits; None: not a literal."""
    if typing.get_origin(annotation) is typing.Literal:
        return frozenset(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is typing.Literal:
            return frozenset(typing.get_args(arg))
    return None


def _plan(cls: type[BaseEvent]) -> _Plan | None:
    """How ``cls`` serializes by alias, or None when it does anything this cannot follow."""
    decorators = cls.__pydantic_decorators__
    if cls.model_computed_fields or decorators.field_serializers:
        return None
    if decorators.field_validators or decorators.model_validators or decorators.validators:
        return None  # :func:`encode_as` would skip them
    plan: list[tuple[str, str, bool, object, frozenset[object] | None]] = []
    for name, field in cls.model_fields.items():
        if field.exclude or field.default_factory is not None:
            return None
        key = field.serialization_alias or field.alias or name
        omittable = not field.is_required() and field.default is None
        default = _REQUIRED if field.is_required() else field.default
        # A constrained field (``Field(ge=...)``, a pattern): only the model checks its values.
        allowed = frozenset() if field.metadata else _literals(field.annotation)
        plan.append((name, f"{encode_basestring(key)}:", omittable, default, allowed))
    return tuple(plan)


_PLANS: dict[type[BaseEvent], _Plan] = {
    cls: plan for cls in FAST_EVENTS if (plan := _plan(cls)) is not None
}
_NAMES: dict[type[BaseEvent], frozenset[str]] = {
    cls: frozenset(name for name, *_ in plan) for cls, plan in _PLANS.items()
}


def _flat(mapping: dict[object, object]) -> bool:
    """Whether every key and value is a str without lone surrogates."""
    for k, v in mapping.items():
        if type(k) is not str or type(v) is not str:
            return False
        if not (k.isascii() and v.isascii()) and (_SURROGATE.search(k) or _SURROGATE.search(v)):
            return False
    return True


def _write(plan: _Plan, values: Mapping[str, object]) -> str | None:
    """The SSE block of an event of ``plan`` with ``values``; None: only pydantic can say."""
    parts: list[str] = []
    for name, key, omittable, default, allowed in plan:
        if not _put(parts, key, values.get(name, default), omittable, allowed):
            return None
    return "data: {" + ",".join(parts) + "}\n\n"


def _put(
    parts: list[str], key: str, value: object, omittable: bool, allowed: frozenset[object] | None
) -> bool:
    """Append one field's JSON to ``parts``; False: only pydantic can say."""
    if value is None:
        if not omittable:
            parts.append(key + "null")
    elif type(value) is str:
        if allowed is not None and value not in allowed:
            return False  # the model refuses it (or coerces): its own answer
        if not value.isascii() and _SURROGATE.search(value):
            return False  # pydantic refuses it: the same error
        parts.append(key + encode_basestring(value))
    elif type(value) is EventType:  # a str enum: its text is its value (no .value lookup)
        if allowed is not None and value not in allowed:
            return False
        parts.append(key + encode_basestring(value))
    elif type(value) is dict and _flat(value):
        items = ",".join(f"{encode_basestring(k)}:{encode_basestring(v)}" for k, v in value.items())
        parts.append(key + "{" + items + "}")
    else:  # a timestamp, metadata, raw_event, a missing required field...: pydantic's
        return False
    return True


# What :func:`encode_as` writes for one class and one set of given fields, per field in
# serialization order: ``(name, key, omittable, allowed)`` for a given field, ``(None, fixed
# JSON, ...)`` for an absent one whose default is always written the same way (the
# ``type``); absent fields that are left out (None defaults) are not in it at all. A text
# delta then costs two field writes, not one per model field (seven).
_Step = tuple[str | None, str, bool, frozenset[object] | None]
# The same when every given value is a string written as is (an id, a delta: nearly every
# event): the text before the first value, then per given field its name, its allowed
# literals and the text after its value, so the event is one concatenation per field.
_Template = tuple[str, tuple[tuple[str, frozenset[object] | None, str], ...]]
_COMPILED: dict[
    tuple[type[BaseEvent], tuple[str, ...]], tuple[_Template, tuple[_Step, ...]] | None
] = {}
_VALUE = "\x00"  # stands for a value while a template is cut (escaped in any JSON string)


def _compile(
    cls: type[BaseEvent], given: tuple[str, ...]
) -> tuple[_Template, tuple[_Step, ...]] | None:
    """How to write ``cls`` with fields ``given``; None: :func:`_write` (or pydantic) says."""
    steps: list[_Step] = []
    for name, key, omittable, default, allowed in _PLANS[cls]:
        if name in given:
            steps.append((name, key, omittable, allowed))
            continue
        if default is _REQUIRED:
            return None  # missing: the model's own error
        fixed: list[str] = []
        if not _put(fixed, key, default, omittable, allowed):
            return None
        steps.extend((None, text, False, None) for text in fixed)  # nothing if left out
    members = [key if name is None else key + _VALUE for name, key, _, _ in steps]
    head, *after = ("data: {" + ",".join(members) + "}\n\n").split(_VALUE)
    names = [(name, allowed) for name, _, _, allowed in steps if name is not None]
    fields = tuple(
        (name, allowed, text) for (name, allowed), text in zip(names, after, strict=True)
    )
    return (head, fields), tuple(steps)


def encode(event: BaseEvent) -> str:
    """``EventEncoder().encode(event)``: the event as one SSE ``data:`` block."""
    plan = _PLANS.get(type(event))
    if plan is None or event.__pydantic_extra__:
        return _ENCODER.encode(event)
    written = _write(plan, event.__dict__)
    return _ENCODER.encode(event) if written is None else written


def encode_as(cls: type[BaseEvent], **values: Any) -> str:
    """``encode(cls(**values))``, without building the model where :func:`encode` need not.

    Args:
        cls: The event class.
        **values: Its fields by name (not alias), as the model takes them.

    Raises:
        pydantic.ValidationError: the model refuses ``values``.
    """
    signature = (cls, tuple(values))
    try:
        compiled = _COMPILED[signature]
    except KeyError:  # the first event of this class with these fields (a few per class)
        fits = cls in _PLANS and values.keys() <= _NAMES[cls]
        compiled = _COMPILED[signature] = _compile(cls, signature[1]) if fits else None
    if compiled is None:
        return encode(cls(**values))
    (text, fields), steps = compiled
    for name, allowed, after in fields:
        value = values[name]
        if type(value) is not str or (allowed is not None and value not in allowed):
            break
        if not value.isascii() and _SURROGATE.search(value):
            break
        text += encode_basestring(value) + after
    else:
        return text
    # A value that is not a plain string (None, metadata, an enum) or one to refuse.
    parts: list[str] = []
    for given, key, omittable, allowed in steps:
        if given is None:
            parts.append(key)
        elif not _put(parts, key, values[given], omittable, allowed):
            return encode(cls(**values))
    return "data: {" + ",".join(parts) + "}\n\n"


# Per model class and given fields: the dump's steps in serialization order, each a given
# field (its name, its key, whether None leaves it out) or an absent one's fixed value (its
# key and default: the ``role``, the ``type``); absent fields without a value are not in it.
# None: the class serializes in a way this does not follow, or a required field is missing.
_DumpStep = tuple[str, str, bool, bool]  # (name or key, key, omitted when None, given)
_DUMPS: dict[tuple[type[BaseModel], tuple[str, ...]], tuple[_DumpStep, ...] | None] = {}
_DEFAULTS: dict[tuple[type[BaseModel], str], object] = {}


def _dump_steps(cls: type[BaseModel], given: tuple[str, ...]) -> tuple[_DumpStep, ...] | None:
    decorators = cls.__pydantic_decorators__
    if cls.model_computed_fields or decorators.field_serializers:
        return None
    if not set(given) <= cls.model_fields.keys():
        return None
    steps: list[_DumpStep] = []
    for name, field in cls.model_fields.items():
        if field.default_factory is not None or field.exclude:
            return None
        key = field.serialization_alias or field.alias or name
        omittable = not field.is_required() and field.default is None
        if name in given:
            steps.append((name, key, omittable, True))
        elif field.is_required():
            return None  # missing: the model's own error
        elif field.default is not None:
            if not isinstance(field.default, _PLAIN):  # str enums (the ``type``) included
                return None
            _DEFAULTS[cls, key] = field.default
            steps.append((key, key, False, False))
    return tuple(steps)


def _dumped(fields: Fields) -> dict[str, object] | None:
    """The JSON-ready dump of the model ``fields`` describes; None: only the model can say.

    As ag-ui dumps it (``model_dump(mode="json", by_alias=True)``, a field without a value
    left out).
    """
    cls, values = fields
    signature = (cls, tuple(values))
    try:
        steps = _DUMPS[signature]
    except KeyError:  # the first of this class with these fields
        steps = _DUMPS[signature] = _dump_steps(cls, signature[1])
    if steps is None:
        return None
    out: dict[str, object] = {}
    for name, key, omittable, given in steps:
        if not given:
            out[key] = _DEFAULTS[cls, key]
            continue
        value = values[name]
        kind = type(value)
        if kind is str:
            pass
        elif value is None:
            if omittable:
                continue
        elif kind is tuple:  # a nested model
            value = _dumped(value)
            if value is None:
                return None
        elif kind is list:  # of nested models (tool calls, a snapshot's messages)
            items = [_dumped(v) if type(v) is tuple else None for v in value]
            if None in items:
                return None
            value = items
        elif kind is dict:
            if not _plain(value):
                return None
        elif kind not in _PLAIN:
            return None
        out[key] = value
    return out


_PLAIN = (str, bool, int)
# ``json.dumps(event, ensure_ascii=False, separators=(",", ":"))`` with one encoder for all.
_SNAPSHOT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _plain(mapping: dict[object, object]) -> bool:
    """Whether ``mapping`` holds str keys and str, bool or int values (a message's metadata)."""
    return all(type(k) is str and type(v) in _PLAIN for k, v in mapping.items())


def encode_snapshot(messages: list[Fields]) -> str:
    """``encode(MessagesSnapshotEvent(messages=[build(m) for m in messages]))``, modelless.

    A thread's whole history goes out twice a turn; its messages are written as JSON from
    their field values (the same bytes: ``json`` writes strings as pydantic does with
    ``ensure_ascii=False``); anything this cannot follow (a lone surrogate, which pydantic
    refuses, a value of another type) goes through the models, with their error.
    """
    event = _dumped((MessagesSnapshotEvent, {"messages": messages}))
    if event is not None:
        text = _SNAPSHOT_JSON(event)
        if text.isascii() or not _SURROGATE.search(text):
            return f"data: {text}\n\n"
    built = cast("list[Message]", [build(m) for m in messages])
    return encode(MessagesSnapshotEvent(messages=built))

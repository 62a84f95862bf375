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
"""

from __future__ import annotations

import re
from json.encoder import encode_basestring

from ag_ui.core import (
    BaseEvent,
    EventType,
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

__all__ = ["FAST_EVENTS", "encode"]

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

# Per class: (field name, '"key":', omitted when None) in serialization order.
_Plan = tuple[tuple[str, str, bool], ...]


def _plan(cls: type[BaseEvent]) -> _Plan | None:
    """How ``cls`` serializes by alias, or None when it does anything this cannot follow."""
    decorators = cls.__pydantic_decorators__
    if cls.model_computed_fields or decorators.field_serializers:
        return None
    plan: list[tuple[str, str, bool]] = []
    for name, field in cls.model_fields.items():
        if field.exclude:
            return None
        key = field.serialization_alias or field.alias or name
        omittable = not field.is_required() and field.default is None
        plan.append((name, f"{encode_basestring(key)}:", omittable))
    return tuple(plan)


_PLANS: dict[type[BaseEvent], _Plan] = {
    cls: plan for cls in FAST_EVENTS if (plan := _plan(cls)) is not None
}


def _flat(mapping: dict[object, object]) -> bool:
    """Whether every key and value is a str without lone surrogates."""
    for k, v in mapping.items():
        if type(k) is not str or type(v) is not str:
            return False
        if not (k.isascii() and v.isascii()) and (_SURROGATE.search(k) or _SURROGATE.search(v)):
            return False
    return True


def encode(event: BaseEvent) -> str:
    """``EventEncoder().encode(event)``: the event as one SSE ``data:`` block."""
    plan = _PLANS.get(type(event))
    if plan is None or event.__pydantic_extra__:
        return _ENCODER.encode(event)
    values = event.__dict__
    parts: list[str] = []
    for name, key, omittable in plan:
        value = values[name]
        if value is None:
            if not omittable:
                parts.append(key + "null")
        elif type(value) is str:
            if not value.isascii() and _SURROGATE.search(value):
                return _ENCODER.encode(event)  # pydantic refuses it: the same error
            parts.append(key + encode_basestring(value))
        elif type(value) is EventType:  # a str enum: its text is its value (no .value lookup)
            parts.append(key + encode_basestring(value))
        elif type(value) is dict and _flat(value):
            items = ",".join(
                f"{encode_basestring(k)}:{encode_basestring(v)}" for k, v in value.items()
            )
            parts.append(key + "{" + items + "}")
        else:  # a timestamp, metadata, raw_event...: pydantic's own output
            return _ENCODER.encode(event)
    return "data: {" + ",".join(parts) + "}\n\n"

"""The served stream's own AG-UI encoder writes exactly what ag-ui's ``EventEncoder`` writes."""

from __future__ import annotations

import itertools
import typing
from typing import Any

import pytest
from ag_ui.core import BaseEvent, CustomEvent, MessagesSnapshotEvent, RunFinishedEvent
from ag_ui.encoder import EventEncoder

from agentkit.serve import _encode as encode_module
from agentkit.serve._encode import FAST_EVENTS, encode, encode_as

REFERENCE = EventEncoder()

# Every code point but the surrogates (pydantic refuses those): control characters, quotes,
# backslash, DEL, the line separators JavaScript minds, non-BMP characters.
ALL_CHARACTERS = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
TRICKY = [
    "x",
    'quote " and backslash \\ and slash /',
    "\x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f\x80\x9f",
    "\u2028\u2029 é 🙂 \U0010ffff 中文",
    "</script><!--",
]


def _str_fields(cls: type[BaseEvent]) -> tuple[list[str], list[str]]:
    """(required, optional) fields whose annotation admits a str."""
    required: list[str] = []
    optional: list[str] = []
    for name, field in cls.model_fields.items():
        if name == "type":
            continue
        args = typing.get_args(field.annotation) or (field.annotation,)
        literal = [a for a in args if typing.get_origin(a) is typing.Literal]
        if str in args or literal:
            (required if field.is_required() else optional).append(name)
    return required, optional


def _value(cls: type[BaseEvent], name: str, text: str) -> Any:
    args = typing.get_args(cls.model_fields[name].annotation)
    for arg in args:
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)[0]  # e.g. role="tool"
    return text


def _values(cls: type[BaseEvent]) -> list[dict[str, Any]]:
    required, optional = _str_fields(cls)
    out = []
    for text, with_optional in itertools.product(TRICKY, (False, True)):
        values = {name: _value(cls, name, text) for name in required}
        if with_optional:
            values |= {name: _value(cls, name, text + "!") for name in optional}
        out.append(values)
    return out


def _instances(cls: type[BaseEvent]) -> list[BaseEvent]:
    return [cls(**values) for values in _values(cls)]


@pytest.mark.parametrize("cls", FAST_EVENTS, ids=lambda c: c.__name__)
def test_each_fast_event_class_encodes_to_the_reference_bytes(
    cls: type[BaseEvent], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [REFERENCE.encode(event) for event in _instances(cls)]
    monkeypatch.setattr(encode_module, "_ENCODER", None)  # the fast path, never the fallback
    assert [encode(event) for event in _instances(cls)] == expected
    event = _instances(cls)[0]
    assert encode(event).startswith('data: {"type":"') and encode(event).endswith("}\n\n")


def test_a_tool_result_with_its_status_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from ag_ui.core import ToolCallResultEvent

    events = [
        ToolCallResultEvent(
            message_id="r:1", tool_call_id="c", content=text, role="tool", metadata=metadata
        )
        for text in TRICKY
        for metadata in ({"status": "done"}, {"status": text, text: "é"}, {})
    ]
    expected = [REFERENCE.encode(event) for event in events]
    monkeypatch.setattr(encode_module, "_ENCODER", None)
    assert [encode(event) for event in events] == expected


def test_every_character_is_escaped_as_the_reference_escapes_it() -> None:
    from ag_ui.core import TextMessageContentEvent

    for start in range(0, len(ALL_CHARACTERS), 4096):
        event = TextMessageContentEvent(message_id="m", delta=ALL_CHARACTERS[start : start + 4096])
        assert encode(event) == REFERENCE.encode(event)


def test_values_beyond_strings_go_through_the_reference_encoder() -> None:
    from ag_ui.core import TextMessageContentEvent, ToolCallResultEvent

    events: list[BaseEvent] = [
        TextMessageContentEvent(message_id="m", delta="d", timestamp=1_700_000_000_000),
        TextMessageContentEvent(message_id="m", delta="d", raw_event={"a": [1, None, 1e20]}),
        TextMessageContentEvent(message_id="m", delta="d", extra_field=1.5),  # type: ignore[call-arg]
        ToolCallResultEvent(message_id="m", tool_call_id="c", content="x", metadata={"n": 1}),
        CustomEvent(name="n", value={"f": 1e20, "n": None}),
        RunFinishedEvent(thread_id="t", run_id="r"),
        MessagesSnapshotEvent(messages=[]),
    ]
    for event in events:
        assert encode(event) == REFERENCE.encode(event)


def test_a_lone_surrogate_fails_as_the_reference_fails() -> None:
    from ag_ui.core import TextMessageContentEvent, ToolCallResultEvent
    from pydantic_core import PydanticSerializationError

    for event in [
        TextMessageContentEvent(message_id="m", delta="a\ud800b"),
        ToolCallResultEvent(
            message_id="m", tool_call_id="c", content="x", metadata={"s": "\udc00"}
        ),
    ]:
        with pytest.raises(PydanticSerializationError):
            REFERENCE.encode(event)
        with pytest.raises(PydanticSerializationError):
            encode(event)


@pytest.mark.parametrize("cls", FAST_EVENTS, ids=lambda c: c.__name__)
def test_each_fast_event_class_encodes_from_its_values_to_the_reference_bytes(
    cls: type[BaseEvent], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [REFERENCE.encode(cls(**values)) for values in _values(cls)]
    monkeypatch.setattr(encode_module, "_ENCODER", None)  # no model, no fallback
    monkeypatch.setattr(cls, "__init__", None)
    assert [encode_as(cls, **values) for values in _values(cls)] == expected


def test_values_the_model_refuses_fail_as_the_model_fails() -> None:
    from ag_ui.core import TextMessageContentEvent, TextMessageStartEvent, ToolCallResultEvent
    from pydantic import ValidationError
    from pydantic_core import PydanticSerializationError

    with pytest.raises(ValidationError):
        encode_as(TextMessageStartEvent, message_id="m", role="bogus")  # not one of its literals
    with pytest.raises(ValidationError):
        encode_as(TextMessageContentEvent, delta="d")  # a required field missing
    with pytest.raises(ValidationError):
        encode_as(TextMessageContentEvent, message_id="m", delta=1)
    with pytest.raises(PydanticSerializationError):
        encode_as(TextMessageContentEvent, message_id="m", delta="a\ud800b")
    event = ToolCallResultEvent(message_id="m", tool_call_id="c", content="x", metadata={"n": 1})
    assert encode_as(
        ToolCallResultEvent, message_id="m", tool_call_id="c", content="x", metadata={"n": 1}
    ) == REFERENCE.encode(event)

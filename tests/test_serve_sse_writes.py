"""What the SSE response writes: events ready together in one write, a lone one at once.

And the event encoder's template path (every given value a plain string) and its fallback
(a None, metadata, a refused value) write ag-ui's ``EventEncoder`` bytes, byte for byte.
"""

from __future__ import annotations

import typing
from typing import Any

import anyio
import pytest
from ag_ui.core import (
    BaseEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
)
from ag_ui.encoder import EventEncoder
from anyio import wait_all_tasks_blocked
from anyio.lowlevel import checkpoint
from test_serve_encode import ALL_CHARACTERS, TRICKY

from agentkit.events import TextDelta, ThinkingDelta
from agentkit.serve._encode import FAST_EVENTS, encode_as
from agentkit.serve._events import Translator
from agentkit.serve._http import EventStreamResponse
from agentkit.serve._threads import RunChannel

REFERENCE = EventEncoder()


def _optional(cls: type[BaseEvent]) -> list[str]:
    return [
        name
        for name, field in cls.model_fields.items()
        if name != "type" and not field.is_required() and field.default is None
    ]


def _required_strings(cls: type[BaseEvent], text: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if name == "type" or not field.is_required():
            continue
        literal = [
            a for a in typing.get_args(field.annotation) if typing.get_origin(a) is typing.Literal
        ]
        values[name] = typing.get_args(literal[0])[0] if literal else text
    return values


@pytest.mark.parametrize("cls", FAST_EVENTS, ids=lambda c: c.__name__)
def test_given_nones_take_the_fallback_to_the_reference_bytes(cls: type[BaseEvent]) -> None:
    for text in TRICKY:
        values = _required_strings(cls, text) | dict.fromkeys(_optional(cls))
        assert encode_as(cls, **values) == REFERENCE.encode(cls(**values))


def test_every_character_is_escaped_by_the_template_as_the_reference_escapes_it() -> None:
    for start in range(0, len(ALL_CHARACTERS), 4096):
        text = ALL_CHARACTERS[start : start + 4096]
        event = TextMessageContentEvent(message_id=text, delta=text)
        assert encode_as(TextMessageContentEvent, message_id=text, delta=text) == (
            REFERENCE.encode(event)
        )


def test_literals_and_metadata_mixed_with_strings() -> None:
    start = TextMessageStartEvent(message_id="m\u2028", role="assistant")
    assert encode_as(TextMessageStartEvent, message_id="m\u2028", role="assistant") == (
        REFERENCE.encode(start)
    )
    for metadata in ({"status": "done"}, {"status": "é\n"}, {}):
        values: dict[str, Any] = {
            "message_id": "r",
            "tool_call_id": "c",
            "content": "x",
            "role": "tool",
            "metadata": metadata,
        }
        assert encode_as(ToolCallResultEvent, **values) == REFERENCE.encode(
            ToolCallResultEvent(**values)
        )


def test_an_open_message_s_deltas_are_its_content_alone() -> None:
    from ag_ui.core import (
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
        StepFinishedEvent,
        TextMessageEndEvent,
    )

    translator = Translator("r")
    events = [TextDelta("a"), TextDelta("b"), ThinkingDelta("t"), TextDelta("c"), TextDelta("d")]
    got = [translator.translate(e) for e in events] + [translator.finish()]
    text, thought = "r:1:assistant", "r:1:reasoning"

    def content(delta: str) -> str:
        return encode_as(TextMessageContentEvent, message_id=text, delta=delta)

    assert got == [
        [
            encode_as(StepStartedEvent, step_name="reason 1"),
            encode_as(TextMessageStartEvent, message_id=text, role="assistant"),
            content("a"),
        ],
        [content("b")],
        [
            encode_as(TextMessageEndEvent, message_id=text),
            encode_as(ReasoningStartEvent, message_id=thought),
            encode_as(ReasoningMessageStartEvent, message_id=thought),
            encode_as(ReasoningMessageContentEvent, message_id=thought, delta="t"),
        ],
        [
            encode_as(ReasoningMessageEndEvent, message_id=thought),
            encode_as(ReasoningEndEvent, message_id=thought),
            encode_as(TextMessageStartEvent, message_id=text, role="assistant"),
            content("c"),
        ],
        [content("d")],
        [
            encode_as(TextMessageEndEvent, message_id=text),
            encode_as(StepFinishedEvent, step_name="reason 1"),
        ],
    ]


class _Client:
    """An ASGI peer recording each body write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.ended = False
        self.started = 0

    async def receive(self) -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started += 1
        elif message["more_body"]:
            self.writes.append(message["body"])
        else:
            assert message["body"] == b""
            self.ended = True


def _event(i: int) -> str:
    return encode_as(StepStartedEvent, step_name=f"step {i}")


async def test_events_ready_together_go_out_in_one_write_a_lone_one_at_once() -> None:
    channel = RunChannel("local", "t", "run")
    client = _Client()
    for i in range(3):  # ready before the response starts: one write
        channel.push(_event(i))
    async with anyio.create_task_group() as tg:
        response = EventStreamResponse(channel.read())
        tg.start_soon(response, {"type": "http"}, client.receive, client.send)
        await wait_all_tasks_blocked()
        assert client.started == 1
        assert client.writes == [
            "".join(f"id: run:{i}\n{_event(i)}" for i in range(3)).encode(),
        ]
        channel.push(_event(3))  # a lone event, the reader waiting: its own write, at once
        await wait_all_tasks_blocked()
        assert client.writes[1:] == [f"id: run:3\n{_event(3)}".encode()]
        channel.push(_event(4))  # two pushed in one step: one write
        channel.push(_event(5))
        await checkpoint()
        await wait_all_tasks_blocked()
        assert client.writes[2:] == [
            f"id: run:4\n{_event(4)}id: run:5\n{_event(5)}".encode(),
        ]
        channel.close()
    assert client.ended
    assert len(client.writes) == 3
    per_event = "".join(f"id: run:{i}\n{_event(i)}" for i in range(6)).encode()
    assert b"".join(client.writes) == per_event  # the batched bytes are the events' own


def test_tool_arguments_are_dumped_as_json_dumps_dumps_them() -> None:
    import json

    from agentkit.serve._convert import arguments_json

    for text in TRICKY:
        arguments = {text: [text, 1, 2.5, None, True, {"n": float("inf")}], "k": {}}
        assert arguments_json(arguments) == json.dumps(arguments, ensure_ascii=False)
    assert arguments_json({}) == "{}"

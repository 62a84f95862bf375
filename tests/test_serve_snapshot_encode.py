"""A served turn's ``MESSAGES_SNAPSHOT`` is written without the AG-UI models, to the same bytes.

The whole history goes out twice a turn (at the start and at the end), so it is written as
JSON from the messages' field values; ag-ui's ``EventEncoder`` on the built models is the
reference, byte for byte, for every kind of message the server converts.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder
from test_serve_encode import TRICKY as EVENT_TRICKY

from agentkit.messages import Msg
from agentkit.serve._convert import agui_fields, to_agui_messages
from agentkit.serve._encode import encode_snapshot

REFERENCE = EventEncoder()
TRICKY = [*EVENT_TRICKY, ""]  # the event encoder's awkward strings, and an empty one


def conversation(text: str) -> list[Msg]:
    """Every kind of stored message the server converts, carrying ``text``."""
    tool_use: list[Any] = [
        {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": text}},
        {"type": "tool_use", "id": "c2", "name": "noop", "input": {}},
    ]
    results: list[Any] = [
        {"type": "tool_result", "id": "c1", "name": "get_weather", "output": text or "ok"},
        {"type": "tool_result", "id": "c2", "name": "noop", "output": text, "is_error": True},
        {
            "type": "tool_result",
            "id": "c3",
            "name": "slow",
            "output": [{"type": "text", "text": "Tool call interrupted " + text}],
            "is_error": True,
        },
    ]
    return [
        Msg("system", "You are a test." + text, "system"),
        Msg("user", text or "hi", "user"),
        Msg("alice", "named " + text, "user"),
        Msg(
            "assistant",
            [
                {"type": "thinking", "thinking": "hmm " + text},
                {"type": "text", "text": text},
                *tool_use,
            ],
            "assistant",
        ),
        Msg("assistant", tool_use[:1], "assistant"),
        Msg("user", results, "user"),
        Msg("user", [*results[:1], {"type": "text", "text": "and " + text}], "user"),
        Msg("assistant", "cut " + text, "assistant", {"interrupted": True}),
        Msg("assistant", "plain " + text, "assistant", {"other": 1}),
    ]


@pytest.mark.parametrize("text", TRICKY)
def test_a_snapshot_is_written_to_the_reference_bytes(text: str) -> None:
    messages = conversation(text)
    expected = REFERENCE.encode(MessagesSnapshotEvent(messages=to_agui_messages(messages)))
    assert encode_snapshot(agui_fields(messages)) == expected


def test_an_empty_history_is_written_to_the_reference_bytes() -> None:
    expected = REFERENCE.encode(MessagesSnapshotEvent(messages=[]))
    assert encode_snapshot([]) == expected


def test_a_lone_surrogate_is_written_as_the_reference_writes_it() -> None:
    messages = conversation("bad \ud800 text")
    expected = REFERENCE.encode(MessagesSnapshotEvent(messages=to_agui_messages(messages)))
    assert encode_snapshot(agui_fields(messages)) == expected

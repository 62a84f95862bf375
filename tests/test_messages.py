from __future__ import annotations

import json
import os
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import Msg
from agentkit.exceptions import AgentkitError, MessageValidationError
from agentkit.messages import validate_block

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3)
    ),
    max_leaves=8,
)
ids = st.text(min_size=1, max_size=12)
# Ids and timestamps in the forms a message stores compactly, and near misses it must keep as
# the text they are (upper-case hex, other offsets, a fraction written with fewer digits).
hex_ids = st.binary(min_size=16, max_size=16).map(bytes.hex) | st.from_regex(
    r"\A[0-9a-fA-F ]{32}\Z"
)
timestamps = (
    st.datetimes(timezones=st.just(UTC)).map(datetime.isoformat)
    | st.datetimes(timezones=st.timezones()).map(datetime.isoformat)
    | st.datetimes().map(lambda d: d.isoformat(timespec="milliseconds") + "+00:00")
    | st.text(min_size=1, max_size=40)
)
sources = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("base64"),
            "media_type": st.sampled_from(["image/png", "audio/wav"]),
            "data": st.text(),
        }
    ),
    st.fixed_dictionaries({"type": st.just("url"), "url": st.text()}),
)
text_blocks = st.fixed_dictionaries({"type": st.just("text"), "text": st.text()})
media_blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["image", "audio"]), "source": sources}
)
thinking_blocks = st.fixed_dictionaries(
    {"type": st.just("thinking"), "thinking": st.text()}, optional={"signature": st.text()}
)
tool_use_blocks = st.fixed_dictionaries(
    {
        "type": st.just("tool_use"),
        "id": ids,
        "name": st.text(min_size=1),
        "input": st.dictionaries(st.text(), json_values, max_size=4),
    },
    optional={"raw_input": st.text()},
)
tool_result_blocks = st.fixed_dictionaries(
    {
        "type": st.just("tool_result"),
        "id": ids,
        "name": st.text(min_size=1),
        "output": st.text() | st.lists(text_blocks | media_blocks, max_size=3),
    },
    optional={"is_error": st.booleans()},
)
blocks = st.one_of(text_blocks, media_blocks, thinking_blocks, tool_use_blocks, tool_result_blocks)
messages = st.builds(
    Msg,
    name=st.text(),
    content=st.text() | st.lists(blocks, max_size=6),
    role=st.sampled_from(["user", "assistant", "system"]),
    metadata=st.none() | st.dictionaries(st.text(), json_values, max_size=4),
    id=st.none() | ids | hex_ids,
    timestamp=st.none() | timestamps,
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_round_trip_is_exact_through_json(msg: Msg) -> None:
    data = msg.to_dict()
    restored = Msg.from_dict(json.loads(json.dumps(data)))
    assert restored == msg
    assert restored.to_dict() == data
    assert set(data) == {"id", "name", "role", "content", "metadata", "timestamp"}


@settings(max_examples=50, deadline=None)
@given(messages)
def test_to_dict_is_a_copy(msg: Msg) -> None:
    data = msg.to_dict()
    if isinstance(data["content"], list) and data["content"]:
        data["content"][0]["type"] = "mutated"
    assert Msg.from_dict(msg.to_dict()) == msg


def test_defaults_and_accessors() -> None:
    msg = Msg(
        "bob",
        [
            {"type": "text", "text": "a"},
            {"type": "tool_use", "id": "1", "name": "f", "input": {}},
            {"type": "text", "text": "b"},
        ],
        "assistant",
    )
    assert msg.id and msg.timestamp
    assert msg.get_text() == "a\nb"
    assert [b["id"] for b in msg.get_blocks("tool_use")] == ["1"]
    assert msg.has_blocks("tool_use") and not msg.has_blocks("image")
    assert Msg("u", "hi", "user").get_blocks() == [{"type": "text", "text": "hi"}]
    assert Msg("u", "hi", "user") != Msg("u", "hi", "user")  # distinct ids
    copied = msg.copy()
    assert copied == msg and copied is not msg


BAD: list[tuple[dict[str, Any], str]] = [
    ({"role": "robot"}, "role"),
    ({"content": [{"text": "no type"}]}, "content[0].type"),
    ({"content": [{"type": "video"}]}, "content[0].type"),
    ({"content": [{"type": "tool_use", "name": "f", "input": {}}]}, "content[0].id"),
    ({"content": [{"type": "tool_use", "id": "", "name": "f", "input": {}}]}, "content[0].id"),
    (
        {"content": [{"type": "tool_use", "id": "1", "name": "f", "input": "{}"}]},
        "content[0].input",
    ),
    ({"content": [{"type": "tool_result", "id": "1", "name": "f"}]}, "content[0].output"),
    (
        {"content": [{"type": "tool_result", "id": "1", "name": "f", "output": [{"type": "x"}]}]},
        "content[0].output[0].type",
    ),
    ({"content": [{"type": "image", "source": {"type": "file"}}]}, "content[0].source.type"),
    ({"content": [{"type": "image", "source": {"type": "url"}}]}, "content[0].source.url"),
    ({"content": 3}, "content"),
    ({"content": ["text"]}, "content[0]"),
    ({"metadata": []}, "metadata"),
    ({"id": 5}, "id"),
]


@pytest.mark.parametrize(("patch", "field"), BAD)
def test_invalid_input_names_the_field(patch: dict[str, Any], field: str) -> None:
    data = Msg("u", "hi", "user").to_dict() | patch
    with pytest.raises(MessageValidationError) as info:
        Msg.from_dict(data)
    assert info.value.field == field
    assert field in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, AgentkitError)


def test_missing_field() -> None:
    data = Msg("u", "hi", "user").to_dict()
    del data["role"]
    with pytest.raises(MessageValidationError, match="'role'"):
        Msg.from_dict(data)


def test_validate_block_rejects_non_dict() -> None:
    with pytest.raises(MessageValidationError, match="must be a dict"):
        validate_block("text")


@pytest.mark.parametrize(
    "ns",
    [
        1_780_000_000_123_456_789,  # microseconds part
        1_780_000_000_000_000_000,  # a whole second: isoformat() leaves out ".000000"
        1_780_000_000_000_000_999,  # under a microsecond past a whole second
        1_780_000_001_999_999_000,  # the next second (the cached prefix must change)
        946_684_799_999_999_000,  # 1999-12-31T23:59:59.999999
    ],
)
def test_generated_timestamp_is_datetime_isoformat(
    monkeypatch: pytest.MonkeyPatch, ns: int
) -> None:
    import time
    from datetime import UTC, datetime

    monkeypatch.setattr(time, "time_ns", lambda: ns)
    micros = ns // 1000
    expected = datetime.fromtimestamp(micros // 1_000_000, UTC).replace(
        microsecond=micros % 1_000_000
    )
    msg = Msg("u", "hi", "user")
    assert msg.timestamp == expected.isoformat()
    assert datetime.fromisoformat(msg.timestamp) == expected


def test_generated_ids_are_32_hex_digits_and_distinct() -> None:
    ids = {Msg("u", "hi", "user").id for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


@settings(max_examples=300, deadline=None)
@given(id=hex_ids | ids, timestamp=timestamps)
def test_given_id_and_timestamp_read_back_and_serialize_as_given(id: str, timestamp: str) -> None:
    msg = Msg("u", "hi", "user", id=id, timestamp=timestamp)
    assert (msg.id, msg.timestamp) == (id, timestamp)
    assert type(msg.id) is str and type(msg.timestamp) is str
    data = msg.to_dict()
    assert (data["id"], data["timestamp"]) == (id, timestamp)
    assert json.dumps(Msg.from_dict(json.loads(json.dumps(data))).to_dict()) == json.dumps(data)


def test_assigned_id_and_timestamp_read_back() -> None:
    msg = Msg("u", "hi", "user")
    msg.id, msg.timestamp = "custom-id", "2026-01-01T00:00:00.000000+00:00"
    assert (msg.id, msg.timestamp) == ("custom-id", "2026-01-01T00:00:00.000000+00:00")
    msg.id = "0" * 32
    assert msg.id == "0" * 32 and msg == Msg.from_dict(msg.to_dict())


@settings(max_examples=200, deadline=None)
@given(messages, st.none() | st.dictionaries(st.text(), json_values, max_size=4))
def test_replace_equals_the_constructor_given_the_same_id_and_timestamp(
    msg: Msg, metadata: dict[str, Any] | None
) -> None:
    replaced = msg.replace(name="agent", role="assistant", metadata=metadata)
    built = Msg("agent", msg.content, "assistant", metadata, id=msg.id, timestamp=msg.timestamp)
    assert replaced == built
    assert replaced.to_dict() == built.to_dict()
    assert replaced.content is msg.content  # not given: shared, not copied or checked again


def test_replace_keeps_what_is_not_given_and_checks_what_is() -> None:
    msg = Msg("u", "hi", "user", {"k": 1})
    assert msg.replace() == msg
    assert msg.replace(metadata=None).metadata is None
    cleaned = msg.replace(name="a\udcff", content=[{"type": "text", "text": "x\ud800"}])
    assert cleaned.name == "a\\xff" and cleaned.get_text() == "x\ufffd"
    assert (cleaned.id, cleaned.timestamp) == (msg.id, msg.timestamp)
    bad: Any = "robot"
    with pytest.raises(MessageValidationError, match="role"):
        msg.replace(role=bad)
    bad = [{"type": "text"}]
    with pytest.raises(MessageValidationError, match=r"content\[0\]"):
        msg.replace(content=bad)
    bad = [1]
    with pytest.raises(MessageValidationError, match="metadata"):
        msg.replace(metadata=bad)


def test_a_kept_text_message_costs_less_than_its_text_plus_200_bytes() -> None:
    # A conversation keeps every message for its whole life: the generated id and timestamp
    # are held compactly (16 bytes, an int), not as two 32-character strings (2 x 81 bytes).
    texts = [f"message number {i:06d}" for i in range(2000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [Msg("user", text, "user") for text in texts]
        per_message = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_message < 200, per_message  # the text itself is kept by ``texts``


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_process_generates_other_ids_than_its_parent() -> None:
    Msg("u", "hi", "user")  # ids are generated in batches: the parent now holds unused ones
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write ten new ids and leave at once
        try:
            os.write(write, " ".join(Msg("u", "x", "user").id for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = set(pipe.read().decode().split())
    os.waitpid(pid, 0)
    parent = {Msg("u", "x", "user").id for _ in range(10)}
    assert len(child) == 10
    assert not child & parent


def test_timestamps_of_many_seconds_and_before_1970_read_back_exactly() -> None:
    # More distinct seconds than the parser keeps cached, and negative Unix seconds.
    stamps = [f"2026-01-01T{h:02d}:{m:02d}:07.000001+00:00" for h in range(24) for m in range(30)]
    stamps += ["1969-12-31T23:59:59.999999+00:00", "1969-12-31T23:59:59+00:00"]
    stamps += ["0001-01-01T00:00:00+00:00", "2026-01-01T00:00:00.00000a+00:00"]
    for stamp in stamps:
        msg = Msg.from_dict(Msg("u", "x", "user", timestamp=stamp).to_dict())
        assert msg.timestamp == stamp

"""InMemoryMemory and the tool-call invariant checker."""

from __future__ import annotations

import json

import pytest

from agentkit.exceptions import MemoryInvariantError, StateError
from agentkit.memory import InMemoryMemory, check_memory_invariant
from agentkit.messages import Msg
from agentkit.testing import tool_use


def _use(*ids: str) -> Msg:
    return Msg("bot", [tool_use("t", i) for i in ids], "assistant")


def _result(*ids: str) -> Msg:
    return Msg(
        "bot", [{"type": "tool_result", "id": i, "name": "t", "output": "ok"} for i in ids], "user"
    )


async def test_memory_operations_and_state_round_trip():
    memory = InMemoryMemory()
    a, b, c = (Msg("u", x, "user") for x in "abc")
    await memory.add(a)
    await memory.add([b, c])
    await memory.add(None)
    assert await memory.size() == 3 and len(memory) == 3
    listed = await memory.get_memory()
    listed.pop()
    assert await memory.size() == 3  # get_memory returns a new list
    await memory.delete(-1)
    assert [m.content for m in await memory.get_memory()] == ["a", "b"]
    with pytest.raises(IndexError):
        await memory.delete([0, 5])
    assert await memory.size() == 2  # nothing deleted by a failed call
    state = json.loads(json.dumps(memory.state_dict()))
    other = InMemoryMemory()
    other.load_state_dict(state)
    assert await other.get_memory() == await memory.get_memory()
    await memory.clear()
    assert await memory.size() == 0
    with pytest.raises(TypeError):
        await memory.add(["not a msg"])  # type: ignore[list-item]
    with pytest.raises(StateError, match="message 0"):
        other.load_state_dict({"messages": [{"id": "x"}]})
    with pytest.raises(StateError, match="'messages' list"):
        other.load_state_dict({})


def test_invariant_accepts_valid_conversations():
    check_memory_invariant([])
    check_memory_invariant([Msg("u", "hi", "user"), _use("1", "2"), _result("2", "1")])
    check_memory_invariant([_use("1", "2"), _result("1"), _result("2")])
    check_memory_invariant([_use("1", "2"), _result("1")], pending_ids=["2"])
    # Ids reused across turns (after their result) are fine.
    check_memory_invariant([_use("1"), _result("1"), _use("1"), _result("1")])


@pytest.mark.parametrize(
    ("messages", "pending", "call_id", "problem"),
    [
        ([_use("1")], (), "1", "without a tool_result"),
        ([_result("1")], (), "1", "without an earlier tool_use"),
        ([_result("1"), _use("1")], (), "1", "without an earlier tool_use"),
        ([_use("1"), _result("1"), _result("1")], (), "1", "more than one"),
        ([_use("1"), _use("1"), _result("1")], (), "1", "issued twice"),
        ([_use("1"), _result("1")], ("1",), "1", "pending call already has a result"),
        ([_use("1"), _result("1")], ("9",), "9", "no tool_use"),
        ([_use("1", "2"), _result("1")], (), "2", "without a tool_result"),
    ],
)
def test_invariant_names_the_offending_call(messages, pending, call_id, problem):
    with pytest.raises(MemoryInvariantError, match=problem) as info:
        check_memory_invariant(messages, pending)
    assert info.value.call_id == call_id
    assert repr(call_id) in str(info.value)


async def test_adding_a_message_already_held_is_a_no_op() -> None:
    from agentkit import Msg
    from agentkit.memory import InMemoryMemory

    first = Msg("u", "hi", "user")
    memory = InMemoryMemory([first])
    await memory.add([first, first.copy(), Msg("u", "again", "user")])
    assert [m.get_text() for m in await memory.get_memory()] == ["hi", "again"]
    await memory.delete(0)
    await memory.add(first)
    assert [m.get_text() for m in await memory.get_memory()] == ["again", "hi"]
    await memory.clear()
    await memory.add(first)
    assert await memory.size() == 1


@pytest.mark.parametrize("size", [3, 40])  # a scanned and a set-indexed conversation
async def test_a_message_already_held_is_skipped_after_a_bulk_start(size: int) -> None:
    msgs = [Msg("u", f"m{i}", "user") for i in range(size)]
    for memory in (InMemoryMemory(msgs), InMemoryMemory()):
        if not len(memory):
            memory.load_state_dict(InMemoryMemory(msgs).state_dict())
        await memory.add([msgs[0].copy(), msgs[-1], Msg("u", "new", "user")])
        texts = [m.get_text() for m in await memory.get_memory()]
        assert texts == [f"m{i}" for i in range(size)] + ["new"]


@pytest.mark.parametrize("size", [3, 40])
async def test_a_repeated_message_in_the_initial_list_is_stored_once(size: int) -> None:
    msgs = [Msg("u", f"m{i}", "user") for i in range(size)]
    memory = InMemoryMemory([*msgs, msgs[1].copy(), msgs[0]])
    assert [m.get_text() for m in await memory.get_memory()] == [f"m{i}" for i in range(size)]
    await memory.add(msgs[2])
    assert await memory.size() == size


def test_id_key_is_equal_exactly_when_ids_are() -> None:
    hexed = "0123456789abcdef0123456789abcdef"
    same = Msg("u", "a", "user", id=hexed)
    assert same.id_key == Msg("u", "b", "user", id=hexed).id_key
    # The upper-case spelling and a free-form id are other ids, and other keys.
    others = [Msg("u", "c", "user", id=hexed.upper()), Msg("u", "d", "user", id="call-1")]
    assert len({same.id_key, *(m.id_key for m in others)}) == 3
    assert others[1].id_key == Msg("u", "e", "user", id="call-1").id_key
    hash(same.id_key)


@pytest.mark.parametrize("size", [3, 40])  # a scanned and a set-indexed conversation
async def test_duplicates_are_found_by_id_for_every_kind_of_id(size: int) -> None:
    hexed = "0123456789abcdef0123456789abcdef"
    msgs = [Msg("u", f"m{i}", "user") for i in range(size)]
    msgs += [Msg("u", "hex", "user", id=hexed), Msg("u", "free", "user", id="free-form")]
    memory = InMemoryMemory(msgs)
    await memory.add(
        [
            Msg("u", "hex again", "user", id=hexed),
            Msg("u", "free again", "user", id="free-form"),
            Msg("u", "upper", "user", id=hexed.upper()),  # another id: kept
        ]
    )
    texts = [m.get_text() for m in await memory.get_memory()]
    assert texts == [f"m{i}" for i in range(size)] + ["hex", "free", "upper"]
    copy = InMemoryMemory()
    copy.load_state_dict(memory.state_dict())
    await copy.add(Msg("u", "hex again", "user", id=hexed))
    assert await copy.size() == size + 3
    state = memory.state_dict()
    state["messages"].append(dict(state["messages"][-3]))  # type: ignore[attr-defined]
    with pytest.raises(StateError, match="repeats the message id"):
        InMemoryMemory().load_state_dict(state)

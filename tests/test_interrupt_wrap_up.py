"""The wrap-up of a reply cut mid-stream: one stored partial, the reply made of it, the writes.

A cut answer is stored once (its blocks checked once) and, when it is all text, the reply
is that stored message with the reply's metadata, as a finished reply is its stored answer.
Over a memory whose writes never suspend the wrap-up enters no shielded scope (no
cancellation can land in it); over one whose writes suspend it still does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest

from agentkit import ReActAgent
from agentkit.memory import InMemoryMemory
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import SignalModel, agent_for, checked_memory, results_of, shape


class SuspendingMemory(InMemoryMemory):
    """In-memory messages whose ``add`` suspends once (as a database write would)."""

    atomic_add = False

    async def add(self, msgs: Msg | Sequence[Msg] | None) -> None:
        await anyio.lowlevel.checkpoint()
        await super().add(msgs)


async def _cut(agent: ReActAgent, event: anyio.Event, msg: str | None = None) -> Msg:
    """Start a reply, interrupt it once ``event`` is set; return the reply."""
    replies: list[Msg] = []

    async def run() -> None:
        replies.append(await agent("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(5):
            await event.wait()
        assert await agent.interrupt(msg) is True
    return replies[0]


def _hello_agent(**kwargs: object) -> tuple[ReActAgent, SignalModel]:
    inner = ScriptedModel(["Hello there, friend.", "Again."], stream=True, chunk_delay=0.05)
    model = SignalModel(inner, lambda c: c.get_text() == "Hello")
    return agent_for(model, **kwargs), model


async def test_a_cut_answer_is_stored_once_and_the_reply_is_that_message() -> None:
    agent, model = _hello_agent()
    reply = await _cut(agent, model.event)
    memory = await checked_memory(agent)
    assert shape(memory) == [("user", ["text:go"]), ("assistant", ["text:Hello"])]
    stored = memory[1]
    assert stored.metadata == {"interrupted": True}  # the reply's metadata stays its own
    assert reply.id == stored.id and reply.timestamp == stored.timestamp
    assert reply.content == stored.content == [{"type": "text", "text": "Hello"}]
    assert reply.metadata is not None and reply.metadata["interrupted"] is True
    assert set(reply.metadata) >= {"usage", "iterations", "time"}


async def test_the_cut_conversation_serializes_and_goes_on() -> None:
    agent, model = _hello_agent()
    reply = await _cut(agent, model.event, "stop there")
    state = json.loads(json.dumps(agent.state_dict()))
    assert Msg.from_dict(reply.to_dict()) == reply
    again = agent.copy()
    again.load_state_dict(state)
    shapes = shape(await checked_memory(again))
    assert shapes == [
        ("user", ["text:go"]),
        ("assistant", ["text:Hello"]),
        ("user", ["text:stop there"]),
    ]
    assert (await again("go on")).get_text() == "Again."
    assert [m.get_text() for m in await checked_memory(again)][-2:] == ["go on", "Again."]


async def test_a_cut_answer_with_a_complete_call_replies_with_its_text_only() -> None:
    inner = ScriptedModel(
        [[text("Adding."), tool_use("add", "c1", a=1, b=2), tool_use("add", "c2", a=3, b=4)]],
        stream=True,
        chunk_delay=0.01,
    )
    # Cut once the first call is complete and the second one streams.
    model = SignalModel(inner, lambda c: len(c.content) == 3 and "raw_input" in c.content[2])
    agent = agent_for(model)
    reply = await _cut(agent, model.event)
    memory = await checked_memory(agent)
    stored = memory[1]
    assert shape([stored]) == [("assistant", ["text:Adding.", "use:c1"])]
    assert reply.content == [{"type": "text", "text": "Adding."}]
    assert reply.id != stored.id  # a message of its own: the stored one holds a call too
    assert results_of(memory)["c1"][1] is True  # the complete call got an interrupted result


@pytest.mark.parametrize(
    ("memory", "suspends"), [(InMemoryMemory, False), (SuspendingMemory, True)]
)
async def test_the_wrap_up_is_shielded_only_where_a_write_may_suspend(
    monkeypatch: pytest.MonkeyPatch, memory: type[InMemoryMemory], suspends: bool
) -> None:
    agent, model = _hello_agent(memory=memory())
    entered: list[bool] = []
    real = anyio.CancelScope

    def counting(*, deadline: float = float("inf"), shield: bool = False) -> anyio.CancelScope:
        entered.append(shield)
        return real(deadline=deadline, shield=shield)

    replies: list[Msg] = []

    async def run() -> None:
        replies.append(await agent("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(5):
            await model.event.wait()
        monkeypatch.setattr(anyio, "CancelScope", counting)  # from the cut on
        assert await agent.interrupt("later") is True
    monkeypatch.undo()
    # A suspending memory's writes are shielded (the wrap-up's scope, and ``store``'s own).
    assert (entered.count(True) > 0) is suspends
    shapes = shape(await checked_memory(agent))
    assert shapes == [
        ("user", ["text:go"]),
        ("assistant", ["text:Hello"]),
        ("user", ["text:later"]),
    ]
    assert replies[0].metadata is not None and replies[0].metadata["interrupted"] is True


async def test_an_outer_cancel_with_the_interrupt_still_repairs_memory() -> None:
    agent, model = _hello_agent()
    outcome: list[object] = []
    outer = anyio.CancelScope()

    async def run() -> None:
        with outer:
            await agent("go")
            outcome.append("returned")  # must not happen
        outcome.append(outer.cancelled_caught)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(5):
            await model.event.wait()
        assert await agent.interrupt("later") is True
        outer.cancel()  # the same moment: the cut and a cancellation from outside
    assert outcome == [True]
    assert not agent.is_replying
    shapes = shape(await checked_memory(agent))
    assert shapes == [
        ("user", ["text:go"]),
        ("assistant", ["text:Hello"]),
        ("user", ["text:later"]),
    ]

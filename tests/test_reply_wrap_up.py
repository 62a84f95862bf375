"""The writes at the end of a reply (issue 34): taken only when there is something to write.

A reply that ends with nothing left to store skips the shielded wrap-up; these pin down the
cases that still have writes: a message observed while the reply ran, an interrupt that
came too late to cut anything, and a steer the loop never delivered.
"""

from __future__ import annotations

from agentkit.messages import Msg
from agentkit.testing import ScriptedModel
from tests._agent_helpers import agent_for, checked_memory


def _texts(memory: list[Msg]) -> list[tuple[str, str]]:
    return [(m.name, m.get_text()) for m in memory]


async def test_message_observed_during_the_reply_is_stored_after_it():
    model = ScriptedModel(["one"])
    agent = agent_for(model)

    async def observe(agent_, kwargs, reply):
        await agent_.observe(Msg("carol", "fyi", "user"))  # busy: deferred

    agent.register_hook("post_reply", "observe", observe)
    await agent("hi")
    assert not agent.conversation.has_deferred
    assert _texts(await checked_memory(agent)) == [("user", "hi"), ("bot", "one"), ("carol", "fyi")]


async def test_interrupt_too_late_to_cut_stores_its_messages():
    model = ScriptedModel(["one"])
    agent = agent_for(model)

    async def interrupt(agent_, kwargs, reply):
        await agent_.interrupt(Msg("user", "stop", "user"))  # the answer is stored already

    agent.register_hook("post_reply", "interrupt", interrupt)
    reply = await agent("hi")
    assert reply.get_text() == "one"
    texts = _texts(await checked_memory(agent))
    assert texts[-1] == ("user", "stop")


async def test_plain_replies_leave_nothing_behind():
    model = ScriptedModel(["one", "two"])
    agent = agent_for(model)
    await agent("a")
    await agent("b")
    conv = agent.conversation
    assert not conv.has_deferred and not conv.has_pending and not agent.is_replying
    assert _texts(await checked_memory(agent)) == [
        ("user", "a"),
        ("bot", "one"),
        ("user", "b"),
        ("bot", "two"),
    ]

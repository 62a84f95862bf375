"""How ``agent.stream`` hands its events over: queued events at once, in order, and a
cancelled consumer stopped at its next event even while more are queued."""

from __future__ import annotations

import anyio

from agentkit.events import TextDelta
from agentkit.testing import ScriptedModel
from tests._agent_helpers import agent_for


async def test_queued_events_arrive_in_order_and_complete() -> None:
    model = ScriptedModel(["one two three four"], stream=True)
    agent = agent_for(model)
    async with agent.stream("hi") as events:
        kinds = [event.type async for event in events]
    assert kinds[0] == "reply_started" and kinds[-1] == "reply_finished"
    assert events.result.output == "one two three four"


async def test_a_cancelled_consumer_stops_at_its_next_event() -> None:
    model = ScriptedModel(["one two three four"], stream=True)
    agent = agent_for(model)
    seen: list[str] = []
    with anyio.CancelScope() as scope:
        async with agent.stream("hi") as events:
            async for event in events:
                seen.append(event.type)
                if isinstance(event, TextDelta):
                    scope.cancel()  # more events are queued behind this one
    assert scope.cancelled_caught
    assert seen[-1] == "text_delta"
    assert seen.count("text_delta") == 1
    assert "reply_finished" not in seen

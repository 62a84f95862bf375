"""How ``agent.stream`` hands its events over: queued events at once, in order, and a
cancelled consumer stopped at its next event even while more are queued."""

from __future__ import annotations

import anyio

from agentkit.events import AgentEvent, TextDelta
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


async def test_a_failing_listener_is_dropped_and_the_others_get_every_event_in_order() -> None:
    model = ScriptedModel(["one two three four"], stream=True)
    agent = agent_for(model)
    failures: list[str] = []
    seen: list[str] = []

    def broken(event: AgentEvent) -> None:
        failures.append(event.type)
        raise RuntimeError("this sink is down")

    agent.add_event_listener(broken)
    agent.add_event_listener(lambda event: seen.append(event.type))
    async with agent.stream("hi") as events:
        streamed = [event.type async for event in events]
    assert failures == ["reply_started"]  # called once, then dropped for the reply
    assert seen == streamed  # the listener after it and the stream: every event, in order
    assert streamed[0] == "reply_started" and streamed[-1] == "reply_finished"
    assert streamed.count("text_delta") >= 2


async def test_the_first_delta_of_a_burst_is_handed_over_before_the_rest_is_parsed() -> None:
    # The scripted stream yields every chunk without waiting, as a network chunk holding
    # many deltas does: the consumer still gets the first delta before the second exists.
    model = ScriptedModel(["one two three four"], stream=True)
    agent = agent_for(model)
    emitted: list[str] = []
    agent.add_event_listener(lambda event: emitted.append(event.type))
    emitted_at_first: int | None = None
    async with agent.stream("hi") as events:
        async for event in events:
            if isinstance(event, TextDelta) and emitted_at_first is None:
                emitted_at_first = emitted.count("text_delta")
    assert emitted_at_first == 1
    assert emitted.count("text_delta") >= 2  # the answer did stream in several deltas

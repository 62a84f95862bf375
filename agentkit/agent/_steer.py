"""Steering: user messages queued into a live run (``await agent.steer(msg)``).

A steer is put in the run's inbox (``Run.steering``) and delivered at one of three points,
each of which leaves memory valid (no open tool call then):

* **the next model request**: the step before each request stores every queued steer, in
  order, right before the request is built (:func:`deliver`): ``"next_request"``;
* **a follow-up turn**: when the run would finish with a final answer and steers are still
  queued (accepted while the last answer streamed, or after it), the run makes one more
  request that answers them (:func:`follow_up`): ``"follow_up"``;
* **the next run**: a run that ends otherwise (paused for approval, stopped by a usage
  limit, interrupted, failed) keeps its queued steers as the conversation's deferred
  messages (:func:`close`), stored before the next model request of the conversation (the
  resume of a paused run, or the next run): ``"next_request"``.

``agent.steer`` waits until its message is placed and returns which of the two it was: a
steer accepted by the call is never lost. A paused run (calls waiting for approval) has
no live ``Run``: its steers go straight to the deferred messages.

A **durable run** records its steers instead of queueing them in this process: while it
runs, a :class:`SteerSource` is registered for its memory (:func:`steer_source`). Then
:func:`accept` hands every steer of that conversation to the source (which sends it to the
workflow as a recorded message), and :func:`deliver` and :func:`follow_up` take the
recorded steers from the source at the same points as above, so a recovered run receives
each again at the same place (see ``agentkit.durable._agent``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, Protocol

import anyio

from agentkit.agent._state import store

if TYPE_CHECKING:
    from agentkit.agent._conversation import Conversation
    from agentkit.agent._state import Run
    from agentkit.memory import Memory
    from agentkit.messages import Msg

__all__ = [
    "Steer",
    "SteerOutcome",
    "SteerSource",
    "accept",
    "close",
    "deliver",
    "follow_up",
    "steer_source",
]

SteerOutcome = Literal["next_request", "follow_up"]
"""Where a steer was delivered: before the run's next model request, or in a follow-up
turn the run made to answer it."""


class Steer:
    """One queued steer: its messages and, once placed, where."""

    __slots__ = ("done", "msgs", "outcome")

    def __init__(self, msgs: list[Msg]) -> None:
        self.msgs = msgs
        self.outcome: SteerOutcome | None = None
        self.done = anyio.Event()

    def resolve(self, outcome: SteerOutcome) -> None:
        """Record where the steer went and wake its caller."""
        self.outcome = outcome
        self.done.set()

    async def wait(self) -> SteerOutcome:
        """Wait until the run has placed the steer; return where."""
        await self.done.wait()
        assert self.outcome is not None
        return self.outcome


class SteerSource(Protocol):
    """Where the steers of a conversation go instead of the run's inbox (a durable run)."""

    def accept(self, msgs: list[Msg], live: bool) -> Steer:
        """Take a steer (no await: call order is the order); ``live``: a run's loop is on."""
        ...

    async def pull(self) -> list[Steer]:
        """The steers recorded since the last pull, in order (at a deterministic point)."""
        ...


_SOURCES: dict[int, tuple[Memory, SteerSource]] = {}


@contextmanager
def steer_source(memory: Memory, source: SteerSource) -> Iterator[None]:
    """Route the steers of the conversation held in ``memory`` through ``source``."""
    _SOURCES[id(memory)] = (memory, source)
    try:
        yield
    finally:
        _SOURCES.pop(id(memory), None)


def _source(memory: Memory) -> SteerSource | None:
    found = _SOURCES.get(id(memory))
    return found[1] if found is not None and found[0] is memory else None


async def _pull(memory: Memory, run: Run) -> None:
    """Move the steers recorded by the conversation's source (if any) into the inbox."""
    source = _source(memory)
    if source is None or run.steering is None:
        return
    # Shielded: a pull that took a recorded steer always queues it (never lost to a cut).
    with anyio.CancelScope(shield=True):
        pulled = await source.pull()
    # Read again after the pull: a steer accepted meanwhile is in the tuple now (and the
    # loop, which alone ends the inbox, is this very task: the inbox is still open).
    assert run.steering is not None
    run.steering = (*run.steering, *pulled)


async def deliver(memory: Memory, run: Run, outcome: SteerOutcome = "next_request") -> bool:
    """Store the run's queued steers, in order; return whether there were any.

    Called where no tool call is open (right before a model request), so the stored
    messages never come between a call and its result.
    """
    if _SOURCES:  # some conversation routes its steers through a source (a session's)
        await _pull(memory, run)
    steers = run.steering
    if not steers:
        return False
    run.steering = ()  # steers accepted while this store runs wait for the next request
    # ``store`` cannot be cut halfway (shielded, or an add that never suspends).
    await store(memory, [m for s in steers for m in s.msgs], run)
    for steer in steers:
        steer.resolve(outcome)
    return True


async def follow_up(conv: Conversation, run: Run, allowed: bool) -> bool:
    """At a final answer: deliver the queued steers as a follow-up turn (True: one is due).

    Only after a final answer: a run paused for approval or stopped by a usage limit
    keeps them for its next request instead (:func:`close`), as does a follow-up that a
    usage limit would forbid (``allowed`` False).
    """
    if not allowed or conv.has_pending or run.usage_limit is not None:
        return False
    await _pull(conv.memory, run)
    if not run.steering:
        return False
    # The follow-up answers anew: a structured answer accepted before the steer is replaced.
    run.output.data = None
    run.output.value = None
    return await deliver(conv.memory, run, "follow_up")


def close(conv: Conversation, run: Run) -> None:
    """The run's loop is over: keep its undelivered steers as deferred messages.

    From here on a steer of this run goes to the deferred messages directly; they are
    stored with the run's last writes, or, while calls wait for approval, before the
    resumed run's next model request.
    """
    steers, run.steering = run.steering, None
    for steer in steers or ():
        conv.deferred.extend(steer.msgs)
        steer.resolve("next_request")


def accept(conv: Conversation, run: Run | None, msgs: list[Msg]) -> Steer | None:
    """Queue ``msgs`` (no await: queued the moment ``agent.steer`` is called).

    Returns:
        The queued steer to wait on; None when the messages went to the deferred messages
        (a paused run, or a run past its loop), which the next model request of the
        conversation sees: ``"next_request"``.
    """
    source = _source(conv.memory)
    if source is not None:  # a durable run: recorded, then delivered as below
        return source.accept(msgs, run is not None and run.steering is not None)
    if run is not None and run.steering is not None:
        steer = Steer(msgs)
        run.steering = (*run.steering, steer)
        return steer
    conv.deferred.extend(msgs)
    return None

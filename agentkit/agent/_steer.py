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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio

from agentkit.agent._state import store

if TYPE_CHECKING:
    from agentkit.agent._conversation import Conversation
    from agentkit.agent._state import Run
    from agentkit.memory import Memory
    from agentkit.messages import Msg

__all__ = ["Steer", "SteerOutcome", "accept", "close", "deliver", "follow_up"]

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


async def deliver(memory: Memory, run: Run, outcome: SteerOutcome = "next_request") -> bool:
    """Store the run's queued steers, in order; return whether there were any.

    Called where no tool call is open (right before a model request), so the stored
    messages never come between a call and its result.
    """
    steers = run.steering
    if not steers:
        return False
    run.steering = []  # steers accepted while this store runs wait for the next request
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
    if not run.steering or not allowed or conv.has_pending or run.usage_limit is not None:
        return False
    # The follow-up answers anew: a structured answer accepted before the steer is replaced.
    run.structured_output = None
    run.structured_value = None
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
    if run is not None and run.steering is not None:
        steer = Steer(msgs)
        run.steering.append(steer)
        return steer
    conv.deferred.extend(msgs)
    return None

"""A turn waiting for its model holds only the coroutines that do work (issue #34).

Every coroutine a waiting turn holds, and every closure, cell or empty container its run
ledger makes, is an object the garbage collector walks for as long as the model takes to
answer; with hundreds of turns in flight they set how often it collects. These tests pin
the chain of agentkit coroutines under ``await agent(...)`` while the model is asked, and
the ledger's containers made only when needed (see ``benchmarks/gc_probe.py``).
"""

from __future__ import annotations

import os
import types
from typing import Any

import anyio
import pytest

import agentkit
from agentkit.agent import ReActAgent
from agentkit.messages import Msg
from agentkit.models import ChatModel, ChatResponse, ModelRequest

pytestmark = pytest.mark.anyio

_PACKAGE = os.path.dirname(agentkit.__file__)


class _Waiting(ChatModel):
    """Answers a text once ``release`` is set; ``asked`` is set while a request waits."""

    offline = True

    def __init__(self) -> None:
        super().__init__("waiting")
        self.asked = anyio.Event()
        self.release = anyio.Event()

    async def _request(self, request: ModelRequest) -> ChatResponse:
        self.asked.set()
        await self.release.wait()
        return ChatResponse(content=[{"type": "text", "text": "done"}])


def _agentkit_chain(coro: Any) -> list[str]:
    """The agentkit coroutines from ``coro`` down to where it waits, outermost first."""
    names = []
    while isinstance(coro, types.CoroutineType):
        code = coro.cr_code
        if code.co_filename.startswith(_PACKAGE):
            names.append(code.co_qualname)
        coro = coro.cr_await
    return names


async def _while_waiting(agent: ReActAgent, model: _Waiting, look: Any) -> Msg:
    """Run ``agent("hi")``; call ``look(coro)`` while its model request waits."""
    coro = agent("hi")
    replies: list[Msg] = []

    async def reply() -> None:
        replies.append(await coro)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reply)
        await model.asked.wait()
        look(coro)
        model.release.set()
    return replies[0]


async def test_a_waiting_turn_holds_no_forwarding_coroutine() -> None:
    model = _Waiting()
    agent = ReActAgent("a", "You help.", model)
    chains: list[list[str]] = []
    reply = await _while_waiting(agent, model, lambda coro: chains.append(_agentkit_chain(coro)))
    assert reply.get_text() == "done"
    # The reply (hooks, interrupt scope, repairs), the step loop, the reasoning step and the
    # request it makes: no layer that only forwards to the next (ChatModel.request hands on
    # the adapter's coroutine; without a tool the toolkit's definitions need no await).
    assert chains == [
        ["ReActAgent.__call__", "ReActAgent._drive_reply", "_steps", "_reason", "reason"]
    ]


async def test_a_waiting_turn_makes_no_closure_and_no_empty_ledger_containers() -> None:
    model = _Waiting()
    agent = ReActAgent("a", "You help.", model)
    seen: list[tuple[list[str], Any, object]] = []

    def look(coro: Any) -> None:
        layers = _coroutines(coro)
        cells = [name for c in layers for name in c.cr_code.co_cellvars]
        frame = layers[1].cr_frame  # the reply's, which holds its own Run
        assert frame is not None
        run = frame.f_locals["run"]
        seen.append((cells, run, run.steering))

    await _while_waiting(agent, model, look)
    [(cells, run, steering)] = seen
    assert cells == []  # no closure over the run's variables: no cells, no function
    assert run.approved == set() and not isinstance(run.approved, set)  # made on approval
    assert run.control.interrupt_msgs == ()
    assert steering == ()  # a tuple of its own only once a steer arrives


def _coroutines(coro: Any) -> list[types.CoroutineType[Any, Any, Any]]:
    out = []
    while isinstance(coro, types.CoroutineType):
        if coro.cr_code.co_filename.startswith(_PACKAGE):
            out.append(coro)
        coro = coro.cr_await
    return out

"""Pipelines as plain async functions: one agent after another, or all at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from agentkit.messages import Msg, MsgInput
from agentkit.pipelines._protocols import AgentLike, deps_kwargs

__all__ = ["fanout_pipeline", "sequential_pipeline"]


async def sequential_pipeline(
    agents: Sequence[AgentLike],
    msg: MsgInput = None,
    *,
    deps: object = None,
) -> Msg | None:
    """Run agents one after another, each replying to the previous agent's reply.

    Args:
        agents: The agents, in order.
        msg: What the first agent receives.
        deps: The run's dependencies, handed to every agent whose reply takes ``deps=``
            (their tools see them as ``ctx.deps``); never stored in memory.

    Returns:
        The last agent's reply (``msg`` unchanged, when ``agents`` is empty, if it is a
        Msg; otherwise None).
    """
    current: Any = msg
    for agent in agents:
        current = await agent(current, **deps_kwargs(agent, deps))
    return current if isinstance(current, Msg) else None


async def fanout_pipeline(
    agents: Sequence[AgentLike],
    msg: MsgInput = None,
    *,
    deps: object = None,
) -> list[Msg]:
    """Run agents concurrently on the same input; return their replies in agent order.

    Each agent gets its own copy of ``msg``, so no agent can see another's changes to it.
    The agents run in one task group: if one raises, the others are cancelled and the
    error propagates as an ``ExceptionGroup`` (catch it with ``except*``). Listing the same
    agent twice raises ``AgentBusyError`` (one agent replies to one thing at a time).

    Args:
        agents: The agents.
        msg: What every agent receives.
        deps: The run's dependencies, shared by every agent whose reply takes ``deps=``.

    Returns:
        One reply per agent, in the order of ``agents``.
    """
    replies: list[Msg | None] = [None] * len(agents)

    async def run(index: int, agent: AgentLike) -> None:
        replies[index] = await agent(_copy_input(msg), **deps_kwargs(agent, deps))

    async with anyio.create_task_group() as tg:
        for index, agent in enumerate(agents):
            tg.start_soon(run, index, agent, name=f"fanout:{agent.name}")
    return [reply for reply in replies if reply is not None]


def _copy_input(msg: MsgInput) -> MsgInput:
    if isinstance(msg, Msg):
        return msg.copy()
    if isinstance(msg, str) or msg is None:
        return msg
    return [m.copy() for m in msg]

"""One task renews the leases of every run a worker holds (``LeaseRenewals``).

A hold enters its claim and leaves it: no task of its own (a renewal task per run, asleep
for a third of the lease and cancelled when the run ended, cost every served turn a task
and a cancellation). The renewals still happen while a run lasts, stop with its hold, and
never write over a turn committed while held (a durable turn commits inside its hold).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import pytest

from agentkit.messages import Msg
from agentkit.serve._ownership import Claim, LeaseRenewals
from agentkit.serve._threads import RunChannel, ThreadRecord, ThreadStore
from agentkit.session import EncodedState
from tests._serve_agents import make_agent
from tests._serve_worker_app import MemorySession

pytestmark = pytest.mark.anyio


class Writes(MemorySession):
    """A dict store that counts lease writes and can hold the next one until released."""

    def __init__(self) -> None:
        super().__init__()
        self.lease_writes = 0
        self.renewed = anyio.Event()  # a second lease write (the claim, then a renewal)
        self.block = False
        self.blocked = anyio.Event()  # a write is waiting on ``release``
        self.release = anyio.Event()

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        if self.block:
            self.blocked.set()
            await self.release.wait()
        if not durable:
            self.lease_writes += 1
            if self.lease_writes >= 2:
                self.renewed.set()
        return await super()._write(session_id, state, expected, title, durable=durable)


@asynccontextmanager
async def renewing(seconds: float) -> AsyncIterator[LeaseRenewals]:
    renewals = LeaseRenewals(seconds)
    async with anyio.create_task_group() as tg:
        tg.start_soon(renewals.run)
        yield renewals
        tg.cancel_scope.cancel()


async def claimed(store: ThreadStore, renewals: LeaseRenewals, thread: str) -> Claim:
    record = ThreadRecord("o", thread)
    claim = Claim(store, record, RunChannel("o", thread, f"run-{thread}"), "w1", renewals)
    await claim.acquire()
    return claim


async def test_a_hold_starts_no_task() -> None:
    session = Writes()
    store = ThreadStore(session)
    async with renewing(15.0) as renewals:
        claim = await claimed(store, renewals, "t1")
        agent = make_agent()
        loop = asyncio.get_running_loop()
        made = 0
        create_task = loop.create_task

        def counted(*args: object, **kwargs: object) -> asyncio.Task[object]:
            nonlocal made
            made += 1
            return create_task(*args, **kwargs)  # type: ignore[arg-type]

        loop.create_task = counted  # type: ignore[method-assign,assignment]
        try:
            async with claim.holding(agent):
                assert renewals.held == {claim}
                await anyio.lowlevel.checkpoint()
        finally:
            del loop.create_task
        assert made == 0  # the renewal task per run is gone (the old code made one)
        assert not renewals.held and not renewals.due
        await claim.commit(agent)


async def test_a_long_run_is_renewed_and_its_end_stops_the_renewals() -> None:
    session = Writes()
    store = ThreadStore(session)
    async with renewing(0.3) as renewals:  # renewed every 0.1 s
        claims = [await claimed(store, renewals, f"t{i}") for i in range(3)]
        agent = make_agent()
        async with claims[0].holding(agent), claims[1].holding(make_agent()):
            with anyio.fail_after(10):
                await session.renewed.wait()
        writes = session.lease_writes
        assert not renewals.held and not renewals.due
        await claims[0].commit(agent)
        stored = await session.load_versioned(store.key("o", "t0"))
        assert stored is not None and stored[0]["lease"] is None
        # A claim never held is never renewed; the held ones are no more after their hold.
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert session.lease_writes == writes
        assert not claims[2].lost


async def test_a_renewal_in_progress_is_cancelled_when_the_hold_ends() -> None:
    session = Writes()
    store = ThreadStore(session)
    async with renewing(0.03) as renewals:
        claim = await claimed(store, renewals, "t1")
        agent = make_agent()
        async with claim.holding(agent):
            session.block = True
            with anyio.fail_after(10):
                await session.blocked.wait()  # the renewal is writing
            assert claim.renewing is not None
        with anyio.fail_after(10):
            while claim.renewing is not None:  # the cancellation is being delivered
                await anyio.lowlevel.checkpoint()
        assert not renewals.due
        session.block = False
        await agent.observe([Msg("user", "hello", "user")])
        await claim.commit(agent)
        stored = await session.load_versioned(store.key("o", "t1"))
        assert stored is not None and stored[0]["lease"] is None
        assert session.lease_writes == 1  # the claim only: the cancelled renewal wrote nothing


async def test_a_turn_committed_while_held_is_not_renewed_over() -> None:
    session = Writes()
    store = ThreadStore(session)
    async with renewing(15.0) as renewals:
        claim = await claimed(store, renewals, "t1")
        agent = make_agent()
        async with claim.holding(agent):
            await agent.observe([Msg("user", "hello", "user")])
            await claim.commit(agent)  # a durable turn's last workflow step
            assert await claim.renew() is False  # nothing to renew: the turn is stored
        stored = await session.load_versioned(store.key("o", "t1"))
        assert stored is not None
        assert stored[0]["lease"] is None
        agent_state = stored[0]["agent"]
        assert isinstance(agent_state, dict)
        assert len(agent_state["memory"]["messages"]) == 1  # type: ignore[index]

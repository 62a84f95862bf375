"""Who owns a served thread: one run at a time, across every worker on the store.

The owner is written in the thread record itself (``"lease": {"worker", "run",
"expires"}``), so claiming the thread, renewing the claim and committing the turn are writes
of one key, each with the store's version check (compare-and-set):

* **claim**: a run reads the thread at version ``v``, finds no live lease, and writes its
  lease based on ``v``. Of two workers claiming at once, one write succeeds; the other gets
  ``SessionConflictError`` and answers ``409 run_in_progress``.
* **renew**: the holder rewrites the lease (the thread as it was claimed, a later expiry)
  every third of the lease, so a live run keeps its thread and a dead one (SIGKILL) frees
  it once the lease expires. One task of the worker renews all its held runs
  (:class:`LeaseRenewals`); a run that ends within a third of the lease costs it nothing.
* **commit**: the turn is saved with the lease cleared, based on the last version the holder
  wrote. Only the commit is a durable write (``Session.save_state(durable=True)``: an
  fsync); the claim, its renewals and a release are not (see docs/scaling.md: a power cut
  can undo a lease, never a committed turn). A holder that lost its lease (paused past the
  expiry, and another run claimed the thread meanwhile) fails this check and writes nothing:
  it is fenced. A store that is down is retried with backoff while the lease lasts;
  ``RUN_FINISHED`` is only sent once the commit is stored.

While a run holds its thread it also holds the thread's session on the control channel
(:mod:`agentkit.session._control`), so ``interrupt_session(store, "serve/<owner>/<thread>")``
and ``POST /threads/{id}/interrupt`` on any worker reach it. A command is
``{"command": name, "run": run id | None, "reply_to": channel | None, "id": str | None,
...}``: ``interrupt`` stops the run; the holder answers ``{"command": "stopped", "id": ...,
"worker": ...}`` on ``reply_to`` once the turn is committed; ``steer`` (``"message": str``)
queues the message into the run (``agent.steer``) and answers through
:class:`~agentkit.session._control.SteerReplies`; ``events`` (``"after": int``) relays the
run's events from that index to ``reply_to`` (see :class:`Relay`), so a client that
reconnects to another worker follows the run there. :data:`COMMANDS` maps the names to
handlers.

**Relayed events.** The holder answers ``events`` with numbered parts ``{"command":
"relay", "id": nonce, "n": 0, 1, ..., "data": str, "end": bool}``: the SSE text of the
events from ``after`` on, batched (what was pushed while the last part was being sent goes
in the next) and split to the transport's message size (``NOTIFY`` carries under 8000
bytes), ending with ``end: true`` once the run's last event (``RUN_FINISHED`` or
``RUN_ERROR``) is out. Part 0 goes out at once (empty when nothing is new): it tells the
asker the holder heard. The asker puts the parts in order by ``n`` and drops repeats, so
every event reaches its client once, in order, whatever the transport. The run itself
never waits: a relay is a task of its own reading the run's in-memory events, and nothing
is written to the store per event. The asker repeats its ``events`` command every
second while its client reads; a holder that hears nothing for :data:`RELAY_IDLE` seconds
(the client left) stops relaying.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from agentkit._ids import new_id
from agentkit.agent import ReActAgent
from agentkit.exceptions import SessionConflictError, SessionError
from agentkit.serve._threads import RunChannel, ThreadRecord, ThreadStore
from agentkit.session import Session
from agentkit.session._control import (
    ANSWER_GRACE,
    SteerReplies,
    channel_name,
    control_channel,
    max_payload,
)

__all__ = [
    "COMMANDS",
    "DEFAULT_LEASE_SECONDS",
    "RELAY_IDLE",
    "Claim",
    "CommitFailed",
    "LeaseRenewals",
    "Relay",
    "ThreadBusy",
    "follow_remote",
    "live_lease",
    "new_worker_id",
    "stop_remote",
]

logger = logging.getLogger("agentkit.serve")

DEFAULT_LEASE_SECONDS = 15.0
"""How long a claim lasts without renewal (renewed every third of it)."""

_RETRY_FIRST = 0.05  # seconds before the first commit retry; doubled up to _RETRY_MAX
_RETRY_MAX = 1.0
_STOP_REPUBLISH = 0.2  # a Stop is sent again this often until answered (see stop_remote)
_STOP_GRACE = 1.0  # seconds a Stop still waits for the answer once the lease is gone
RELAY_IDLE = 5.0
"""Seconds a holder relays a run's events without hearing from the asker again."""
_RELAY_KEEPALIVE = 1.0  # the asker repeats its ``events`` command this often
_RELAY_ENVELOPE = 256  # bytes of a relayed part that are not its data (JSON keys, nonce, n)
_RELAY_FLUSH = 5.0  # seconds the holder may take to send a relay's last parts, run ended
_RELAY_GRACE = 2.0  # seconds the asker still waits for the end once the lease is gone


def new_worker_id() -> str:
    """An id for this worker: host, pid and a random part (a restarted pid differs)."""
    return f"{socket.gethostname()}-{os.getpid()}-{new_id(nbytes=3)}"


def live_lease(record: ThreadRecord) -> dict[str, object] | None:
    """The thread's lease if it has not expired (by this machine's clock), else None."""
    lease = record.lease
    if lease is None:
        return None
    expires = lease.get("expires")
    if not isinstance(expires, int | float) or expires <= time.time():
        return None
    return lease


class ThreadBusy(Exception):
    """Another run holds the thread (the claim's compare-and-set lost, or a live lease)."""


class CommitFailed(Exception):
    """The turn could not be committed; ``code`` is the ``RUN_ERROR`` code."""

    def __init__(self, code: Literal["store_unavailable", "lease_lost"], message: str) -> None:
        super().__init__(message)
        self.code = code


Command = Callable[["Claim", dict[str, object]], Awaitable[None]]


async def _interrupt(claim: Claim, command: dict[str, object]) -> None:
    reply_to, nonce = command.get("reply_to"), command.get("id")
    if isinstance(reply_to, str) and isinstance(nonce, str):
        claim.replies[nonce] = reply_to  # answered once the turn is committed
    claim.channel.stop_requested = True
    text = command.get("message")
    if claim.agent is not None:
        await claim.agent.interrupt(text if isinstance(text, str) and text else None)


async def _steer(claim: Claim, command: dict[str, object]) -> None:
    if claim.steers is not None:  # queued into the run; answered once it is placed
        await claim.steers.handle(command)


async def _events(claim: Claim, command: dict[str, object]) -> None:
    nonce, reply_to, after = command.get("id"), command.get("reply_to"), command.get("after")
    if not (isinstance(nonce, str) and isinstance(reply_to, str)):
        return
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        return
    claim.relay(nonce, reply_to, after)


COMMANDS: dict[str, Command] = {"interrupt": _interrupt, "steer": _steer, "events": _events}
"""Control-channel commands a served run obeys, by name."""


def _pieces(texts: list[str], limit: int) -> Iterator[str]:
    """``"".join(texts)`` in pieces whose JSON string form is at most ``limit`` bytes.

    Whole events are kept together where they fit (a piece is a run of events); one event
    over the limit is cut into parts (the asker joins them again, in order).
    """
    batch: list[str] = []
    size = 2  # the quotes
    for text in texts:
        cost = len(json.dumps(text)) - 2  # escaped as the transports send it (ASCII)
        if size + cost <= limit:
            batch.append(text)
            size += cost
            continue
        if batch:
            yield "".join(batch)
            batch, size = [], 2
        if cost + 2 <= limit:
            batch, size = [text], 2 + cost
        else:
            yield from _split(text, limit)
    if batch:
        yield "".join(batch)


def _split(text: str, limit: int) -> Iterator[str]:
    if len(json.dumps(text)) <= limit or len(text) <= 1:
        yield text
        return
    half = len(text) // 2
    yield from _split(text[:half], limit)
    yield from _split(text[half:], limit)


class Relay:
    """One asker's relay of a run's events (the holder's side; see the module docs).

    Args:
        channel: The run's channel.
        nonce: The asker's request id (named in every part).
        reply_to: Where the parts go.
        after: The first event index to send.
    """

    def __init__(self, channel: RunChannel, nonce: str, reply_to: str, after: int) -> None:
        self.channel = channel
        self.nonce = nonce
        self.reply_to = reply_to
        self.index = min(after, len(channel.events))  # the next event to send
        self.parts = 0  # parts sent so far (the next part's ``n``)
        self.heard = time.monotonic()  # the asker's last ``events`` command
        self.dropped = False  # the asker is gone (or unreachable): nothing more is sent

    async def send(self, session: Session, *, end: bool = False) -> None:
        """Send the events pushed since the last send (and the end, when ``end``)."""
        control = control_channel(session)
        stop = len(self.channel.events)
        texts = self.channel.events[self.index : stop]
        pieces = list(_pieces(texts, max_payload(control) - _RELAY_ENVELOPE))
        if not pieces and (end or self.parts == 0):
            pieces = [""]  # part 0 answers at once; the end is a part of its own when due
        for i, data in enumerate(pieces):
            part = {
                "command": "relay",
                "id": self.nonce,
                "n": self.parts,
                "data": data,
                "end": end and i == len(pieces) - 1,
            }
            try:
                reached = await control.publish(self.reply_to, part)
            except Exception:  # the store's transport is down: the asker ends its stream
                logger.warning("could not relay events of %s", self.channel.run_id, exc_info=True)
                reached = 0
            if reached == 0:  # the transport counts listeners (Redis, files): the asker left
                self.dropped = True
                return
            self.parts += 1
        self.index = stop

    def idle(self) -> bool:
        """Whether the asker has not repeated its request for :data:`RELAY_IDLE` seconds."""
        return time.monotonic() - self.heard > RELAY_IDLE

    async def follow(self, session: Session, closing: Callable[[], bool]) -> None:
        """Send new events as they are pushed, until ``closing()``, the end, or the asker left.

        What is still unsent then goes out with :meth:`send` (``end=True``) once the run's
        last event is pushed (:meth:`Claim.answer_stops`).
        """
        channel = self.channel
        while not self.dropped:
            if self.index < len(channel.events) or self.parts == 0:
                await self.send(session)
                continue  # more may have been pushed meanwhile
            if closing() or channel.ended:
                return
            if self.idle():
                self.dropped = True
                return
            with anyio.move_on_after(RELAY_IDLE / 2):
                await channel.changed()


class LeaseRenewals:
    """The lease renewals of one worker's held runs: one long-lived task for all of them.

    A task per held run, asleep for a third of the lease and cancelled when the run ended
    (nearly every run ends first), cost every served turn a task, a cancel scope and the
    delivery of a cancellation. Here a hold only enters its claim in :attr:`due` and takes
    it out again; :meth:`run` (a task of the server's group) sleeps until the oldest entry is
    due and starts a task for a renewal only when one is due (a run that lasts longer than a
    third of the lease), so a slow store delays no other run's renewal.

    Entries are due in the order they were made (every claim of the worker has the same
    lease), so the first entry of the dict is the next due one.

    Args:
        seconds: The lease's duration (renewed every third of it).
    """

    def __init__(self, seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.seconds = seconds
        self.held: set[Claim] = set()  # the claims whose runs are held now
        self.due: dict[Claim, float] = {}  # held claims -> when to renew next (loop time)
        self._idle: anyio.Event | None = None  # set when a claim arrives at an idle runner

    def add(self, claim: Claim) -> None:
        """Renew ``claim`` every third of the lease from now on, until :meth:`drop`."""
        self.held.add(claim)
        self._schedule(claim)

    def _schedule(self, claim: Claim) -> None:
        self.due[claim] = anyio.current_time() + self.seconds / 3
        if self._idle is not None:
            self._idle.set()
            self._idle = None

    def drop(self, claim: Claim) -> None:
        """Renew ``claim`` no more; a renewal of it in progress is cancelled."""
        self.held.discard(claim)
        self.due.pop(claim, None)
        if claim.renewing is not None:
            claim.renewing.cancel()

    async def run(self) -> None:
        """Renew the held claims as they fall due, until cancelled (the server's end)."""
        async with anyio.create_task_group() as tasks:
            while True:
                if not self.due:
                    idle = self._idle = anyio.Event()
                    await idle.wait()
                    continue
                claim, when = next(iter(self.due.items()))
                wait = when - anyio.current_time()
                if wait > 0:
                    # The entry may be gone when this returns (its run ended): look again.
                    await anyio.sleep(wait)
                    continue
                del self.due[claim]
                tasks.start_soon(self._renew, claim)

    async def _renew(self, claim: Claim) -> None:
        if claim not in self.held:  # its run ended between falling due and this task's start
            return
        kept = False
        with anyio.CancelScope() as scope:
            claim.renewing = scope
            try:
                kept = await claim.renew()
            except Exception:  # a renewal's own failure must not end the server's renewals
                logger.exception("could not renew the lease of thread %s", claim.key)
                kept = True  # tried again at the next tick, as a store failure is
            finally:
                claim.renewing = None
        if kept and claim in self.held:
            self._schedule(claim)


class Claim:
    """One run's ownership of one thread: claimed, renewed, then committed (released).

    Args:
        store: The thread store.
        record: The thread as read (its ``version`` is the claim's base).
        channel: The run's channel.
        worker: This worker's id (written in the lease).
        renewals: The worker's lease renewals (their ``seconds`` is the lease's duration).
    """

    def __init__(
        self,
        store: ThreadStore,
        record: ThreadRecord,
        channel: RunChannel,
        worker: str,
        renewals: LeaseRenewals,
    ) -> None:
        self.store = store
        self.record = record
        self.channel = channel
        self.worker = worker
        self.renewals = renewals
        self.seconds = renewals.seconds
        self.renewing: anyio.CancelScope | None = None  # a renewal in progress (see renewals)
        self.agent: ReActAgent | None = None
        self.steers: SteerReplies | None = None  # while the run is held
        self.expires = 0.0
        self.replies: dict[str, str] = {}  # Stop requests to answer: nonce -> reply channel
        self.relays: dict[str, Relay] = {}  # events relayed to other workers, by nonce
        self.lost = False
        self._tasks: TaskGroup | None = None  # the held run's helpers (see holding)
        self._base: dict[str, object] = {}
        self._lock = anyio.Lock()

    @property
    def key(self) -> str:
        """The thread's session id."""
        return ThreadStore.key(self.record.owner, self.record.thread_id)

    @property
    def session(self) -> Session:
        """The store's session."""
        return self.store.session

    def _lease(self) -> dict[str, object]:
        self.expires = time.time() + self.seconds
        return {"worker": self.worker, "run": self.channel.run_id, "expires": self.expires}

    async def acquire(self, agent: ReActAgent | None = None) -> None:
        """Write this run's lease, based on the version the record was read at.

        Raises:
            ThreadBusy: a live lease is there, or another writer won the race.
        """
        if live_lease(self.record) is not None:
            raise ThreadBusy(self.record.thread_id)
        self.record.lease = self._lease()
        try:
            # Not durable (no fsync): a power cut that undoes the claim ends its run too
            # (or, the store's machine alone, fails its commit on the version check); the
            # turn's commit is durable and makes this write durable with it.
            # What renewals rewrite: the thread as claimed.
            self._base = await self.store.save(self.record, agent, durable=False)
        except SessionConflictError:
            raise ThreadBusy(self.record.thread_id) from None

    async def release(self) -> None:
        """Give the claim back without a turn (the run never started)."""
        self.record.lease = None
        try:
            await self.store.save(self.record, durable=False)  # undone: the lease expires
        except (SessionConflictError, SessionError):  # the lease expires on its own
            logger.warning("could not release thread %s", self.record.thread_id, exc_info=True)

    async def _owns_stored(self) -> int | None:
        """The stored version if the stored lease is still this run's, else None.

        (A renewal that failed on the way back may have landed.)
        """
        found = await self.session.load_versioned(self.key)
        if found is None:
            return None
        lease = found[0].get("lease")
        if isinstance(lease, dict) and lease.get("run") == self.channel.run_id:
            return found[1]
        return None

    async def renew(self) -> bool:
        """Rewrite the lease with a later expiry; return whether the run still holds it.

        A store that is down is tried again at the next tick (True). A lease another run
        holds now (False) stops this run's agent: its commit writes nothing.
        """
        async with self._lock:
            if self.record.lease is None:  # committed (a durable turn commits while held)
                return False
            data = {**self._base, "lease": self._lease()}
            try:
                self.record.version = await self.session.save_state(
                    self.key, data, expected_version=self.record.version, durable=False
                )
                return True
            except SessionError:  # the store is down: try again at the next tick
                logger.warning("could not renew the lease of thread %s", self.key)
                return True
            except SessionConflictError:
                pass
            try:
                version = await self._owns_stored()
            except SessionError:
                return True
            if version is not None:
                self.record.version = version
                return True
        self.lost = True  # another run owns the thread now: stop, and commit nothing
        logger.error(
            "run %s lost its lease on thread %s; stopping it",
            self.channel.run_id,
            self.record.thread_id,
        )
        if self.agent is not None:
            await self.agent.interrupt()
        return False

    @asynccontextmanager
    async def holding(self, agent: ReActAgent) -> AsyncIterator[None]:
        """Keep the lease renewed and listen on the control channel while the run lives.

        The lease is renewed by the worker's :class:`LeaseRenewals` (no task of this run's).
        One task group holds the run's helpers: the relays and the steer answers (a group
        each cost a served turn more cancel scopes to enter and leave). When the block ends
        the renewals stop at once; the relays return after the part they are sending
        (:meth:`answer_stops` sends the rest after the run's last event) and the steer
        answers that are due go out, both within ``ANSWER_GRACE`` seconds.
        """
        self.agent = agent

        async def on_command(command: dict[str, object]) -> None:
            run = command.get("run")
            if run is not None and run != self.channel.run_id:
                return  # meant for an earlier or later run of the thread
            handler = COMMANDS.get(str(command.get("command")))
            if handler is not None:
                await handler(self, command)

        name = channel_name(self.session, self.key)
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            self.steers = SteerReplies(self.session, agent, tasks, self.worker)
            self.renewals.add(self)
            try:
                async with control_channel(self.session).subscribe(name, on_command):
                    yield
            finally:
                self.renewals.drop(self)
                self.steers.close()
                self._tasks = None
                if self.relays or self.steers.waiting:  # helpers to give their grace to
                    self.channel.wake()  # each relay returns after the part it is sending
                    # (Only then: a deadline is a timer in the loop's heap until it is due.)
                    tasks.cancel_scope.deadline = anyio.current_time() + ANSWER_GRACE

    def relay(self, nonce: str, reply_to: str, after: int) -> None:
        """Relay the run's events from index ``after`` to ``reply_to`` (an ``events`` command).

        A repeated command (same nonce) only says the asker is still reading.
        """
        known = self.relays.get(nonce)
        if known is not None:
            known.heard = time.monotonic()
            return
        if self._tasks is None:
            return
        relay = self.relays[nonce] = Relay(self.channel, nonce, reply_to, after)
        self._tasks.start_soon(relay.follow, self.session, lambda: self._tasks is None)

    async def commit(self, agent: ReActAgent) -> None:
        """Save the turn and clear the lease; retry a store failure while the lease lasts.

        Raises:
            CommitFailed: ``lease_lost`` (another run owns the thread: nothing written) or
                ``store_unavailable`` (the retries ran out before the lease would expire).
        """
        async with self._lock:
            await self._commit(agent)

    async def _commit(self, agent: ReActAgent) -> None:
        if self.lost:
            raise CommitFailed("lease_lost", "another run took over this thread")
        record = self.record
        delay = _RETRY_FIRST
        uncertain = False  # an attempt failed on the way back: it may have been stored
        while True:
            record.lease = None
            try:
                await self.store.save(record, agent)
                self.channel.unavailable = False
                return
            except SessionConflictError:
                if uncertain and await self._landed(record):
                    self.channel.unavailable = False
                    return
                raise CommitFailed("lease_lost", "another run took over this thread") from None
            except SessionError as exc:
                uncertain = True
                self.channel.unavailable = True  # this thread's requests: 503 meanwhile
                margin = self.seconds / 10
                if time.time() + delay > self.expires - margin:
                    raise CommitFailed("store_unavailable", str(exc)) from exc
                logger.warning("could not commit thread %s (retrying): %s", self.key, exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)

    async def _landed(self, record: ThreadRecord) -> bool:
        """Whether an earlier attempt of this commit is what the store holds."""
        try:
            found = await self.session.load_versioned(self.key)
        except SessionError:
            return False
        if found is None or found[0].get("lease") is not None:
            return False
        if found[0].get("agent") != record.agent_state:
            return False
        record.version = found[1]
        return True

    async def answer_stops(self) -> None:
        """Tell the workers that asked for a Stop that the run ended (and is committed).

        Then sends the relayed streams their last events and their end (the run's last
        event is pushed by now), within a bound: a store that is down does not hold it up.
        """
        if not (self.replies or self.relays):  # the common turn: nobody asked
            return
        control = control_channel(self.session)
        for nonce, reply_to in self.replies.items():
            answer = {"command": "stopped", "id": nonce, "worker": self.worker}
            try:
                await control.publish(reply_to, answer)
            except Exception:  # the asker times out and reads the store instead
                logger.warning("could not answer a Stop of thread %s", self.key, exc_info=True)
        self.replies.clear()
        with anyio.move_on_after(_RELAY_FLUSH):
            for relay in self.relays.values():
                if not relay.dropped:
                    await relay.send(self.session, end=True)
        self.relays.clear()


StopOutcome = Literal["stopped", "unreachable", "gone"]


async def stop_remote(
    session: Session,
    key: str,
    run_id: str,
    *,
    still_held: Callable[[], Awaitable[bool]],
    wait: float,
) -> StopOutcome:
    """Ask the worker holding ``key``'s run ``run_id`` to stop it; wait for its answer.

    The command is sent again every 0.2 s until answered: a run that claimed its thread a
    moment ago may not listen yet, and ``NOTIFY`` does not say whether anyone heard it.
    The holder commits the turn (clearing its lease) before it answers, so a lease found
    gone is given :data:`_STOP_GRACE` seconds for the answer still on its way: the run
    this Stop ended is reported ``"stopped"``, one that ended by itself ``"gone"``.

    Returns:
        ``"stopped"`` (the holder answered: stopped and committed), ``"gone"`` (the run
        ended by itself meanwhile: ``still_held()`` said so, and no answer came) or
        ``"unreachable"`` (no answer within ``wait`` seconds while the lease is held).
    """
    control = control_channel(session)
    nonce = secrets.token_hex(8)  # unguessable: only the asker can read the reply channel
    reply_to = channel_name(session, f"{key}\0reply\0{nonce}")
    answered = anyio.Event()

    async def on_reply(command: dict[str, object]) -> None:
        if command.get("command") == "stopped" and command.get("id") == nonce:
            answered.set()

    command: dict[str, object] = {
        "command": "interrupt",
        "run": run_id,
        "reply_to": reply_to,
        "id": nonce,
        "message": None,
    }
    async with control.subscribe(reply_to, on_reply):
        with anyio.move_on_after(wait):
            while True:
                await control.publish(channel_name(session, key), command)
                with anyio.move_on_after(_STOP_REPUBLISH):
                    await answered.wait()
                if answered.is_set():
                    return "stopped"
                if not await still_held():
                    with anyio.move_on_after(_STOP_GRACE):
                        await answered.wait()
                    return "stopped" if answered.is_set() else "gone"
    return "unreachable"


async def follow_remote(
    session: Session,
    key: str,
    run_id: str,
    after: int,
    *,
    still_held: Callable[[], Awaitable[bool]],
    task_group: TaskGroup,
    wait: float,
) -> AsyncGenerator[str, None] | None:
    """Follow run ``run_id`` of ``key`` held by another worker, from event index ``after``.

    Asks the holder (an ``events`` command, sent again every 0.2 s until its first part
    arrives) and relays what it sends, in order and once each (see the module docs). The
    relay runs in ``task_group`` (the control channel's subscription must live in one task,
    the response's iterator runs in another).

    Returns:
        The SSE text of the events, ending after the run's last event (or when the run is
        no longer held and the holder sent no end: it died); None when the holder did not
        answer within ``wait`` seconds or the run ended meanwhile.
    """
    found: AsyncGenerator[str, None] | None = await task_group.start(
        _relayed, session, key, run_id, after, still_held, wait
    )
    return found


class _RelayParts:
    """The holder's relayed parts put back in order, each sent on once (see the module docs).

    Args:
        nonce: The ``id`` of the asker's ``events`` command (parts for another are ignored).
        send: Where the events go, in order.
    """

    def __init__(self, nonce: str, send: MemoryObjectSendStream[str]) -> None:
        self.nonce = nonce
        self.send = send
        self.waiting: dict[int, tuple[str, bool]] = {}  # parts that came ahead of their turn
        self.next = 0
        self.heard = anyio.Event()  # the holder answered
        self.done = anyio.Event()  # the last part was sent on, or the client left

    async def on_part(self, part: dict[str, object]) -> None:
        """Take one part from the reply channel; send on every part now in its turn."""
        n, data, end = part.get("n"), part.get("data"), part.get("end")
        if part.get("command") != "relay" or part.get("id") != self.nonce:
            return
        if not isinstance(n, int) or not isinstance(data, str) or n < self.next:
            return  # malformed, or a repeat of a part already relayed
        self.waiting.setdefault(n, (data, end is True))
        self.heard.set()
        while self.next in self.waiting:
            data, last = self.waiting.pop(self.next)
            self.next += 1
            try:
                if data:
                    self.send.send_nowait(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.done.set()  # the client left
                return
            if last:
                self.done.set()
                return


async def _relayed(
    session: Session,
    key: str,
    run_id: str,
    after: int,
    still_held: Callable[[], Awaitable[bool]],
    wait: float,
    *,
    task_status: TaskStatus[AsyncGenerator[str, None] | None],
) -> None:
    control = control_channel(session)
    nonce = secrets.token_hex(8)  # unguessable: only the asker can read the event channel
    reply_to = channel_name(session, f"{key}\0events\0{nonce}")
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    parts = _RelayParts(nonce, send)
    heard, done = parts.heard, parts.done

    async def events() -> AsyncGenerator[str, None]:
        async with receive:
            async for data in receive:
                yield data

    command: dict[str, object] = {
        "command": "events",
        "run": run_id,
        "reply_to": reply_to,
        "id": nonce,
        "after": after,
    }
    channel = channel_name(session, key)
    async with send, control.subscribe(reply_to, parts.on_part):
        with anyio.move_on_after(wait):
            while not heard.is_set():
                await control.publish(channel, command)
                with anyio.move_on_after(_STOP_REPUBLISH):
                    await heard.wait()
                if not heard.is_set() and not await still_held():
                    break
        if not heard.is_set():
            task_status.started(None)
            return
        task_status.started(events())
        while not done.is_set():
            with anyio.move_on_after(_RELAY_KEEPALIVE):
                await done.wait()
            if done.is_set() or send.statistics().open_receive_streams == 0:
                break
            await control.publish(channel, command)  # still reading (the holder dedups)
            if not await still_held():  # ended: the end is on its way, or the holder died
                with anyio.move_on_after(_RELAY_GRACE):
                    await done.wait()
                break

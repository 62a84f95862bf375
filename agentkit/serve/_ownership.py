"""Who owns a served thread: one run at a time, across every worker on the store.

The owner is written in the thread record itself (``"lease": {"worker", "run",
"expires"}``), so claiming the thread, renewing the claim and committing the turn are writes
of one key, each with the store's version check (compare-and-set):

* **claim**: a run reads the thread at version ``v``, finds no live lease, and writes its
  lease based on ``v``. Of two workers claiming at once, one write succeeds; the other gets
  ``SessionConflictError`` and answers ``409 run_in_progress``.
* **renew**: the holder rewrites the lease (the thread as it was claimed, a later expiry)
  every third of the lease, so a live run keeps its thread and a dead one (SIGKILL) frees
  it once the lease expires.
* **commit**: the turn is saved with the lease cleared, based on the last version the holder
  wrote. A holder that lost its lease (paused past the expiry, and another run claimed the
  thread meanwhile) fails this check and writes nothing: it is fenced. A store that is down
  is retried with backoff while the lease lasts; ``RUN_FINISHED`` is only sent once the
  commit is stored.

While a run holds its thread it also holds the thread's session on the control channel
(:mod:`agentkit.session._control`), so ``interrupt_session(store, "serve/<owner>/<thread>")``
and ``POST /threads/{id}/interrupt`` on any worker reach it. A command is
``{"command": name, "run": run id | None, "reply_to": channel | None, "id": str | None,
...}``: ``interrupt`` stops the run; the holder answers ``{"command": "stopped", "id": ...,
"worker": ...}`` on ``reply_to`` once the turn is committed; ``steer`` (``"message": str``)
queues the message into the run (``agent.steer``) and answers through
:class:`~agentkit.session._control.SteerReplies`. :data:`COMMANDS` maps the names to handlers.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio

from agentkit.agent import ReActAgent
from agentkit.exceptions import SessionConflictError, SessionError
from agentkit.serve._threads import RunChannel, ThreadRecord, ThreadStore
from agentkit.session import Session
from agentkit.session._control import SteerReplies, channel_name, control_channel

__all__ = [
    "COMMANDS",
    "DEFAULT_LEASE_SECONDS",
    "Claim",
    "CommitFailed",
    "ThreadBusy",
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


def new_worker_id() -> str:
    """An id for this worker: host, pid and a random part (a restarted pid differs)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def live_lease(record: ThreadRecord) -> dict[str, Any] | None:
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


Command = Callable[["Claim", dict[str, Any]], Awaitable[None]]


async def _interrupt(claim: Claim, command: dict[str, Any]) -> None:
    reply_to, nonce = command.get("reply_to"), command.get("id")
    if isinstance(reply_to, str) and isinstance(nonce, str):
        claim.replies[nonce] = reply_to  # answered once the turn is committed
    claim.channel.stop_requested = True
    text = command.get("message")
    if claim.agent is not None:
        await claim.agent.interrupt(text if isinstance(text, str) and text else None)


async def _steer(claim: Claim, command: dict[str, Any]) -> None:
    if claim.steers is not None:  # queued into the run; answered once it is placed
        await claim.steers.handle(command)


COMMANDS: dict[str, Command] = {"interrupt": _interrupt, "steer": _steer}
"""Control-channel commands a served run obeys, by name."""


class Claim:
    """One run's ownership of one thread: claimed, renewed, then committed (released).

    Args:
        store: The thread store.
        record: The thread as read (its ``version`` is the claim's base).
        channel: The run's channel.
        worker: This worker's id (written in the lease).
        seconds: The lease's duration.
    """

    def __init__(
        self,
        store: ThreadStore,
        record: ThreadRecord,
        channel: RunChannel,
        worker: str,
        seconds: float,
    ) -> None:
        self.store = store
        self.record = record
        self.channel = channel
        self.worker = worker
        self.seconds = seconds
        self.agent: ReActAgent | None = None
        self.steers: SteerReplies | None = None  # while the run is held
        self.expires = 0.0
        self.replies: dict[str, str] = {}  # Stop requests to answer: nonce -> reply channel
        self.lost = False
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

    def _lease(self) -> dict[str, Any]:
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
            await self.store.save(self.record, agent)
        except SessionConflictError:
            raise ThreadBusy(self.record.thread_id) from None
        self._base = self.record.to_dict()  # what renewals rewrite (the thread as claimed)

    async def release(self) -> None:
        """Give the claim back without a turn (the run never started)."""
        self.record.lease = None
        try:
            await self.store.save(self.record)
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

    async def _renew_forever(self) -> None:
        while True:
            await anyio.sleep(self.seconds / 3)
            async with self._lock:
                data = {**self._base, "lease": self._lease()}
                try:
                    self.record.version = await self.session.save_state(
                        self.key, data, expected_version=self.record.version
                    )
                    continue
                except SessionError:  # the store is down: try again at the next tick
                    logger.warning("could not renew the lease of thread %s", self.key)
                    continue
                except SessionConflictError:
                    pass
                try:
                    version = await self._owns_stored()
                except SessionError:
                    continue
                if version is not None:
                    self.record.version = version
                    continue
            self.lost = True  # another run owns the thread now: stop, and commit nothing
            logger.error(
                "run %s lost its lease on thread %s; stopping it",
                self.channel.run_id,
                self.record.thread_id,
            )
            if self.agent is not None:
                await self.agent.interrupt()
            return

    @asynccontextmanager
    async def holding(self, agent: ReActAgent) -> AsyncIterator[None]:
        """Keep the lease renewed and listen on the control channel while the run lives."""
        self.agent = agent

        async def on_command(command: dict[str, Any]) -> None:
            run = command.get("run")
            if run is not None and run != self.channel.run_id:
                return  # meant for an earlier or later run of the thread
            handler = COMMANDS.get(str(command.get("command")))
            if handler is not None:
                await handler(self, command)

        name = channel_name(self.session, self.key)
        async with (
            SteerReplies(self.session, agent, self.worker) as self.steers,
            control_channel(self.session).subscribe(name, on_command),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(self._renew_forever)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

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
        """Tell the workers that asked for a Stop that the run ended (and is committed)."""
        control = control_channel(self.session)
        for nonce, reply_to in self.replies.items():
            answer = {"command": "stopped", "id": nonce, "worker": self.worker}
            try:
                await control.publish(reply_to, answer)
            except Exception:  # the asker times out and reads the store instead
                logger.warning("could not answer a Stop of thread %s", self.key, exc_info=True)
        self.replies.clear()


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

    Returns:
        ``"stopped"`` (the holder answered: stopped and committed), ``"gone"`` (the run
        ended meanwhile: ``still_held()`` said so) or ``"unreachable"`` (no answer within
        ``wait`` seconds while the lease is still held).
    """
    control = control_channel(session)
    nonce = secrets.token_hex(8)
    reply_to = channel_name(session, f"{key}\0reply\0{nonce}")
    answered = anyio.Event()

    async def on_reply(command: dict[str, Any]) -> None:
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
                    return "gone"
    return "unreachable"

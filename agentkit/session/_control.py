"""The control channel: stop a session's run from any process (``interrupt_session``).

A worker running a session's agent *holds* the session while the reply runs::

    async with hold_session(store, session_id, agent):
        reply = await agent(user_msg)

and any process (a web server behind a load balancer, a CLI, another worker) stops it::

    await interrupt_session(store, session_id)

The holder then calls ``agent.interrupt()`` locally, so the reply ends the way a local
interrupt ends it (memory repaired, every tool call answered), one network hop later. The
transport follows the store: ``LISTEN``/``NOTIFY`` on the database of a ``PostgresSession``,
pub/sub on the server of a ``RedisSession``; a mailbox directory next to the store for
the file stores (``JSONSession``, ``SQLiteSession``: :mod:`agentkit.session._file_control`),
which reaches the processes of one machine; other stores get an in-process channel. The
channel is keyed by the store's identity and the session id, so two applications
sharing a server do not hear each other.

Delivery is "at most once, to whoever holds the session now": a message sent while nobody
holds the session is not kept (there is nothing to stop), and ``hold_session`` has
subscribed before its body runs, so an interrupt sent once a reply has started is never
missed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Literal, Protocol, cast

import anyio
from anyio.abc import TaskGroup

from agentkit.exceptions import AgentkitError, SessionError, UsageError
from agentkit.session._base import Session, check_session_id
from agentkit.session._file_control import (
    ControlChannel,
    FileControlChannel,
    Handler,
    LocalHandlers,
    dispatch,
    listening,
)
from agentkit.session._json_session import JSONSession
from agentkit.session._postgres_session import PostgresSession, import_psycopg
from agentkit.session._redis_session import RedisSession
from agentkit.session._sqlite_session import SQLiteSession

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from redis.asyncio.client import PubSub

    from agentkit.messages import MsgInput

__all__ = [
    "ANSWER_GRACE",
    "ControlChannel",
    "FileControlChannel",
    "Interruptible",
    "LocalControlChannel",
    "PostgresControlChannel",
    "RedisControlChannel",
    "SteerReplies",
    "SteerStatus",
    "control_channel",
    "hold_session",
    "interrupt_session",
    "max_payload",
    "send_steer",
    "steer_session",
]

logger = logging.getLogger("agentkit.session")

SteerStatus = Literal["next_request", "follow_up", "no_run", "unreachable"]
"""What became of a steer sent to a session's holder: the agent's own answer
(``agent.steer``), ``"no_run"`` (nobody runs the session) or ``"unreachable"`` (no answer in
time)."""

_REPUBLISH = 0.2  # a steer is sent again this often until the holder acknowledges it
ANSWER_GRACE = 2.0
"""Seconds a holder's answers (steers, relayed events) may still take once its run ended."""
_RECONNECT_FIRST = 0.05  # seconds before a lost subscription reconnects; doubled up to the max
_RECONNECT_MAX = 1.0

MAILBOX_NAME = ".agentkit-control"
"""The mailbox folder of a ``JSONSession``'s control channel, inside its directory."""


class Interruptible(Protocol):
    """What ``hold_session`` needs from an agent: an async ``interrupt(msg)``."""

    async def interrupt(self, msg: MsgInput = None) -> bool:
        """Interrupt the reply in progress; return whether one was."""
        ...


def channel_name(store: Session, session_id: str) -> str:
    """A short, safe channel name for (store, session id) (Postgres allows 63 bytes)."""
    digest = hashlib.sha256(f"{store.store_key}\0{session_id}".encode()).hexdigest()
    return f"agentkit_ctl_{digest[:40]}"


class LocalControlChannel(ControlChannel):
    """In-process channel (stores of other kinds): reaches holders in this process only."""

    async def publish(self, channel: str, command: Mapping[str, object]) -> int | None:
        """Run the handlers registered on ``channel`` in this process."""
        return await LocalHandlers.deliver(channel, command)

    @asynccontextmanager
    async def subscribe(self, channel: str, handler: Handler) -> AsyncIterator[None]:
        """Register ``handler`` while the block runs."""
        with LocalHandlers.registered(channel, handler):
            yield


class RedisControlChannel(ControlChannel):
    """Redis pub/sub on the ``RedisSession``'s server."""

    def __init__(self, store: RedisSession) -> None:
        self.store = store

    async def publish(self, channel: str, command: Mapping[str, object]) -> int | None:
        """``PUBLISH``; returns the number of subscribers reached."""
        return int(await self.store.client.publish(channel, json.dumps(command)))

    @asynccontextmanager
    async def subscribe(self, channel: str, handler: Handler) -> AsyncIterator[None]:
        """``SUBSCRIBE`` on a connection of its own; confirmed before the block runs.

        A connection lost while the block runs is re-established with backoff (the holder's
        run is not torn down by its control channel).

        Raises:
            SessionError: the server cannot be reached when the block starts.
        """
        from redis.exceptions import RedisError

        pubsub = self.store.subscriber.pubsub()  # outside the bounded command pool
        try:
            try:
                await pubsub.subscribe(channel)
                while True:  # the server's confirmation: from here on nothing is missed
                    message = await pubsub.get_message(timeout=None)
                    if message is not None and message.get("type") == "subscribe":
                        break
            except RedisError as exc:
                raise SessionError(
                    f"{self.store!r}: cannot listen for control commands: {exc}"
                ) from exc
            async with listening(self._listen, pubsub, handler):
                yield
        finally:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()

    @staticmethod
    async def _listen(pubsub: PubSub, handler: Handler) -> None:
        from redis.exceptions import RedisError

        delay = _RECONNECT_FIRST
        while True:
            try:
                async for message in pubsub.listen():
                    delay = _RECONNECT_FIRST
                    if message.get("type") == "message":
                        await _dispatch(message.get("data"), handler)
            except RedisError as exc:
                # The server went away (a restart): the holder's run goes on, and the
                # subscription comes back with the server (the pub/sub connection
                # re-subscribes on reconnect). Commands sent meanwhile are lost; their
                # senders send them again until answered.
                logger.warning("control channel lost its Redis connection (retrying): %s", exc)
            await anyio.sleep(delay)
            delay = min(delay * 2, _RECONNECT_MAX)


class PostgresControlChannel(ControlChannel):
    """``LISTEN``/``NOTIFY`` on the ``PostgresSession``'s database."""

    def __init__(self, store: PostgresSession) -> None:
        self.store = store

    async def publish(self, channel: str, command: Mapping[str, object]) -> int | None:
        """``NOTIFY`` (Postgres does not say how many listeners got it: None)."""
        async with self.store.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (channel, json.dumps(command)))
        return None

    async def _listener(self, channel: str) -> AsyncConnection[TupleRow]:
        """A connection of its own that ``LISTEN``s on ``channel``.

        Raises:
            SessionError: the database cannot be reached.
        """
        psycopg = import_psycopg()
        try:
            conn: AsyncConnection[TupleRow] = await psycopg.AsyncConnection.connect(
                self.store.url, autocommit=True
            )
        except psycopg.Error as exc:
            raise SessionError(
                f"{self.store!r}: cannot listen for control commands: {exc}"
            ) from exc
        try:
            await conn.execute(f'LISTEN "{channel}"')  # the name is ours: hex, no quoting issue
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await conn.close()
            if isinstance(exc, psycopg.Error):
                raise SessionError(
                    f"{self.store!r}: cannot listen for control commands: {exc}"
                ) from exc
            raise
        return conn

    @asynccontextmanager
    async def subscribe(self, channel: str, handler: Handler) -> AsyncIterator[None]:
        """``LISTEN`` on a connection of its own; active before the block runs.

        A connection lost while the block runs (the database restarted) is replaced, with
        backoff, until the block ends: the holder's run is not torn down by its control
        channel (commands sent meanwhile are lost; their senders repeat them until answered).

        Raises:
            SessionError: the database cannot be reached when the block starts.
        """
        link = [await self._listener(channel)]
        try:
            async with listening(partial(self._listen, channel), link, handler):
                yield
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await link[0].close()

    async def _listen(
        self, channel: str, link: list[AsyncConnection[TupleRow]], handler: Handler
    ) -> None:
        psycopg = import_psycopg()
        delay = _RECONNECT_FIRST
        while True:
            try:
                async for notify in link[0].notifies():
                    delay = _RECONNECT_FIRST
                    await _dispatch(notify.payload, handler)
            except psycopg.Error as exc:
                logger.warning("control channel lost its Postgres connection (retrying): %s", exc)
            while True:
                await anyio.sleep(delay)
                delay = min(delay * 2, _RECONNECT_MAX)
                try:
                    fresh = await self._listener(channel)
                except SessionError:
                    continue
                old, link[0] = link[0], fresh
                with contextlib.suppress(Exception):
                    await old.close()
                break


_dispatch = dispatch


class SteerReplies:
    """The holder's side of ``steer``: queue it into the agent's run, answer the sender.

    A ``steer`` command is ``{"command": "steer", "message": str, "id": nonce, "reply_to":
    channel}``. The holder answers ``{"command": "steer_received", "id"}`` at once (the
    sender stops sending it again: a command seen twice is queued once) and ``{"command":
    "steered", "id", "outcome", "worker"}`` once the run has placed the message (the outcome
    of ``agent.steer``, or ``"no_run"``). Waiting for the run happens in a task of its own,
    in the holder's task group: the channel's listener is never held up, and the hold needs
    no task group of its own for it.

    Args:
        store: The session store.
        agent: The held run's agent.
        tasks: The holder's task group; the answers wait in it. When the hold ends, call
            :meth:`close` and give the group :data:`ANSWER_GRACE` seconds: the answers
            that are due then go out at once (the run is over).
        worker: The id the answers name (default: this process).
    """

    def __init__(
        self, store: Session, agent: object, tasks: TaskGroup, worker: str | None = None
    ) -> None:
        self.control = control_channel(store)
        self.agent = agent
        self.worker = worker or f"pid-{os.getpid()}"
        self._seen: set[str] = set()
        self._tg: TaskGroup | None = tasks
        self.waiting = 0  # answers waiting in the task group for the run to place them

    def close(self) -> None:
        """Take no more steers into the task group (a later one is answered at once)."""
        self._tg = None

    async def handle(self, command: Mapping[str, object]) -> None:
        """Obey one ``steer`` command (malformed ones are ignored)."""
        nonce, reply_to, text = command.get("id"), command.get("reply_to"), command.get("message")
        if not (isinstance(nonce, str) and isinstance(reply_to, str)) or self._tg is None:
            return
        await self._publish(reply_to, {"command": "steer_received", "id": nonce})
        if nonce in self._seen:  # sent again before our receipt arrived: queued already
            return
        self._seen.add(nonce)
        # Read again: the held run may have ended while the receipt went out.
        tg = cast("TaskGroup | None", self._tg)
        if tg is None:
            await self._answer(nonce, reply_to, text)  # no run any more: answered at once
            return
        self.waiting += 1
        tg.start_soon(self._waiting_answer, nonce, reply_to, text)

    async def _waiting_answer(self, nonce: str, reply_to: str, text: object) -> None:
        try:
            await self._answer(nonce, reply_to, text)
        finally:
            self.waiting -= 1

    async def _answer(self, nonce: str, reply_to: str, text: object) -> None:
        outcome: str = "no_run"
        steer = getattr(self.agent, "steer", None)
        if isinstance(text, str) and text and steer is not None:
            try:
                outcome = await steer(text)
            except AgentkitError:  # no run in progress (ended meanwhile)
                outcome = "no_run"
        answer = {"command": "steered", "id": nonce, "outcome": outcome, "worker": self.worker}
        with anyio.CancelScope(shield=True):
            await self._publish(reply_to, answer)

    async def _publish(self, channel: str, command: Mapping[str, object]) -> None:
        try:
            await self.control.publish(channel, command)
        except Exception:  # the sender times out ("unreachable"); the steer is queued
            logger.warning("could not answer a steer on %s", channel, exc_info=True)


async def send_steer(
    store: Session,
    session_id: str,
    message: str,
    *,
    run: str | None = None,
    wait: float = 10.0,
    still_held: Callable[[], Awaitable[bool]] | None = None,
) -> tuple[SteerStatus, str | None]:
    """Send a steer to whoever holds ``session_id``; wait for what became of it.

    The command is sent again every 0.2 s until the holder acknowledges it (a holder that
    claimed its session a moment ago may not listen yet; ``NOTIFY`` does not say whether
    anyone heard it); the holder queues it once. Then the answer comes when the run has
    placed the message: before its next model request, or in a follow-up turn, so at the
    latest when the tools running now have finished.

    Args:
        store: The session store.
        session_id: The held session.
        message: The user's text.
        run: Only the run with this id obeys (served threads), or any holder (None).
        wait: Seconds to wait for the acknowledgement, and (without ``still_held``) for
            the answer after it.
        still_held: Whether the run still holds the session (read from the store): with
            it, the answer is awaited as long as the run lives.

    Returns:
        ``(status, worker)``: the holder's outcome and its id, ``("no_run", None)`` when
        nobody holds the session, or ``("unreachable", None)`` without an answer in time
        (after an acknowledgement the message is queued there all the same).
    """
    if not isinstance(message, str) or not message:
        raise UsageError("a steer needs a non-empty message")
    control = control_channel(store)
    channel = channel_name(store, check_session_id(session_id))
    nonce = secrets.token_hex(8)  # unguessable: only the asker can read the reply channel
    reply_to = channel_name(store, f"{session_id}\0steer\0{nonce}")
    reply = _SteerReply(nonce)
    command: dict[str, object] = {
        "command": "steer",
        "run": run,
        "reply_to": reply_to,
        "id": nonce,
        "message": message,
    }
    async with control.subscribe(reply_to, reply.on_reply):
        if not await _publish_until_received(control, channel, command, reply, wait, still_held):
            return "no_run", None
        if not reply.received.is_set():
            return "unreachable", None
        await _await_answer(reply, wait, still_held)
    return reply.result()


class _SteerReply:
    """The holder's replies to one steer: its receipt, then its answer."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.received = anyio.Event()
        self.answered = anyio.Event()
        self.answer: dict[str, object] = {}

    async def on_reply(self, reply: dict[str, object]) -> None:
        """Take a reply on the reply channel (one for another steer is ignored)."""
        if reply.get("id") != self.nonce:
            return
        if reply.get("command") == "steered":
            self.answer.update(reply)
            self.answered.set()
        self.received.set()

    def result(self) -> tuple[SteerStatus, str | None]:
        """``(status, worker)`` from the answer, ``("unreachable", None)`` without one."""
        if not self.answered.is_set():
            return "unreachable", None
        outcome = self.answer.get("outcome")
        worker = self.answer.get("worker")
        status: SteerStatus = "no_run"
        if outcome in ("next_request", "follow_up"):
            status = outcome
        return status, worker if isinstance(worker, str) else None


async def _publish_until_received(
    control: ControlChannel,
    channel: str,
    command: Mapping[str, object],
    reply: _SteerReply,
    wait: float,
    still_held: Callable[[], Awaitable[bool]] | None,
) -> bool:
    """Send ``command`` again every 0.2 s until acknowledged or ``wait``; False: no holder."""
    with anyio.move_on_after(wait):
        while not reply.received.is_set():
            reached = await control.publish(channel, command)
            if reached == 0 and still_held is None:
                return False  # the transport counts its holders: none
            with anyio.move_on_after(_REPUBLISH):
                await reply.received.wait()
            if not reply.received.is_set() and still_held is not None and not await still_held():
                return False
    return True


async def _await_answer(
    reply: _SteerReply, wait: float, still_held: Callable[[], Awaitable[bool]] | None
) -> None:
    """Wait for the answer of an acknowledged steer: ``wait`` s, or while the run holds."""
    if still_held is None:  # no way to tell a dead holder: wait the bound out
        with anyio.move_on_after(wait):
            await reply.answered.wait()
        return
    # The holder answers once the run placed it: as long as the run holds.
    while not reply.answered.is_set():
        with anyio.move_on_after(1.0):
            await reply.answered.wait()
        if not reply.answered.is_set() and not await still_held():
            with anyio.move_on_after(ANSWER_GRACE):
                await reply.answered.wait()
            return


async def steer_session(
    store: Session, session_id: str, message: str, *, wait: float = 30.0
) -> SteerStatus:
    """Queue ``message`` into the run holding ``session_id``, on whichever worker it runs.

    The twin of :func:`interrupt_session`: the holder (``hold_session``) calls
    ``agent.steer(message)``, so the message reaches the run's next model request or a
    follow-up turn, and answers which.

    Args:
        store: The session store the worker holds the session in.
        session_id: The session.
        message: The user's text.
        wait: Seconds to wait for the holder's receipt, then for its answer.

    Returns:
        ``"next_request"`` or ``"follow_up"`` (see ``ReActAgent.steer``), ``"no_run"``
        (nobody holds the session, or its agent has no run to steer) or ``"unreachable"``
        (no answer within ``wait``).

    Raises:
        UsageError: for an empty message.
    """
    status, _ = await send_steer(store, session_id, message, wait=wait)
    return status


_NOTIFY_LIMIT = 7999  # bytes: Postgres refuses a NOTIFY payload of 8000 or more
_MESSAGE_LIMIT = 256 * 1024  # the other transports: bounded all the same (one message's cost)


def max_payload(control: ControlChannel) -> int:
    """The largest command (its JSON, in bytes) that ``control`` carries in one message.

    A sender with more to say (a relayed event stream) splits it into numbered parts.
    """
    return _NOTIFY_LIMIT if isinstance(control, PostgresControlChannel) else _MESSAGE_LIMIT


def control_channel(store: Session) -> ControlChannel:
    """The control channel that fits ``store`` (see the module docs)."""
    if isinstance(store, PostgresSession):
        return PostgresControlChannel(store)
    if isinstance(store, RedisSession):
        return RedisControlChannel(store)
    if isinstance(store, JSONSession):
        return FileControlChannel(store.directory / MAILBOX_NAME)
    if isinstance(store, SQLiteSession):
        return FileControlChannel(store.path.with_name(store.path.name + ".control"))
    return LocalControlChannel()


async def interrupt_session(
    store: Session, session_id: str, message: str | None = None
) -> int | None:
    """Interrupt the run holding ``session_id`` in ``store``, on whichever worker it runs.

    Args:
        store: The session store the worker holds the session in (or one on the same
            server: the channel is keyed by the store's identity, not the Python object).
        session_id: The session.
        message: Optional user text added to the agent's memory after the repairs.

    Returns:
        How many holders were reached (Redis, in-process), or None when the transport
        cannot tell (Postgres ``NOTIFY``). 0 means no run holds the session now.
    """
    channel = channel_name(store, check_session_id(session_id))
    command: dict[str, object] = {"command": "interrupt", "message": message}
    return await control_channel(store).publish(channel, command)


@asynccontextmanager
async def hold_session(
    store: Session, session_id: str, agent: Interruptible
) -> AsyncIterator[None]:
    """Make ``agent`` interruptible (``interrupt_session``) and steerable while the block runs.

    ``steer_session`` reaches it too when the agent has a ``steer`` method (``ReActAgent``).

    The subscription is active when the block starts; it ends with the block.

    Example:
        >>> async with hold_session(store, "chat-7", agent):
        ...     reply = await agent("Plan my week.")
    """
    channel = channel_name(store, check_session_id(session_id))

    async with anyio.create_task_group() as tasks:
        steers = SteerReplies(store, agent, tasks)

        async def on_command(command: dict[str, object]) -> None:
            if command.get("command") == "interrupt":
                text = command.get("message")
                await agent.interrupt(text if isinstance(text, str) and text else None)
            elif command.get("command") == "steer":
                await steers.handle(command)

        try:
            async with control_channel(store).subscribe(channel, on_command):
                yield
        finally:
            steers.close()
            tasks.cancel_scope.deadline = anyio.current_time() + ANSWER_GRACE

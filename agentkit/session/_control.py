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

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio

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

__all__ = [
    "ControlChannel",
    "FileControlChannel",
    "Interruptible",
    "LocalControlChannel",
    "PostgresControlChannel",
    "RedisControlChannel",
    "control_channel",
    "hold_session",
    "interrupt_session",
]

logger = logging.getLogger("agentkit.session")

MAILBOX_NAME = ".agentkit-control"
"""The mailbox folder of a ``JSONSession``'s control channel, inside its directory."""


class Interruptible(Protocol):
    """What ``hold_session`` needs from an agent: an async ``interrupt(msg)``."""

    async def interrupt(self, msg: Any = None) -> bool:
        """Interrupt the reply in progress; return whether one was."""
        ...


def channel_name(store: Session, session_id: str) -> str:
    """A short, safe channel name for (store, session id) (Postgres allows 63 bytes)."""
    digest = hashlib.sha256(f"{store.store_key}\0{session_id}".encode()).hexdigest()
    return f"agentkit_ctl_{digest[:40]}"


class LocalControlChannel(ControlChannel):
    """In-process channel (stores of other kinds): reaches holders in this process only."""

    async def publish(self, channel: str, command: dict[str, object]) -> int | None:
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

    async def publish(self, channel: str, command: dict[str, object]) -> int | None:
        """``PUBLISH``; returns the number of subscribers reached."""
        return int(await self.store.client.publish(channel, json.dumps(command)))

    @asynccontextmanager
    async def subscribe(self, channel: str, handler: Handler) -> AsyncIterator[None]:
        """``SUBSCRIBE`` on a connection of its own; confirmed before the block runs."""
        pubsub = self.store.subscriber.pubsub()  # outside the bounded command pool
        try:
            await pubsub.subscribe(channel)
            while True:  # the server's confirmation: from here on nothing is missed
                message = await pubsub.get_message(timeout=None)
                if message is not None and message.get("type") == "subscribe":
                    break
            async with listening(self._listen, pubsub, handler):
                yield
        finally:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()

    @staticmethod
    async def _listen(pubsub: Any, handler: Handler) -> None:
        async for message in pubsub.listen():
            if message.get("type") == "message":
                await _dispatch(message.get("data"), handler)


class PostgresControlChannel(ControlChannel):
    """``LISTEN``/``NOTIFY`` on the ``PostgresSession``'s database."""

    def __init__(self, store: PostgresSession) -> None:
        self.store = store

    async def publish(self, channel: str, command: dict[str, object]) -> int | None:
        """``NOTIFY`` (Postgres does not say how many listeners got it: None)."""
        async with self.store.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (channel, json.dumps(command)))
        return None

    @asynccontextmanager
    async def subscribe(self, channel: str, handler: Handler) -> AsyncIterator[None]:
        """``LISTEN`` on a connection of its own; active before the block runs."""
        psycopg = import_psycopg()
        conn = await psycopg.AsyncConnection.connect(self.store.url, autocommit=True)
        try:
            await conn.execute(f'LISTEN "{channel}"')  # the name is ours: hex, no quoting issue
            async with listening(self._listen, conn, handler):
                yield
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()

    @staticmethod
    async def _listen(conn: Any, handler: Handler) -> None:
        async for notify in conn.notifies():
            await _dispatch(notify.payload, handler)


_dispatch = dispatch


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
    """Make ``agent`` interruptible through ``interrupt_session`` while the block runs.

    The subscription is active when the block starts; it ends with the block.

    Example:
        >>> async with hold_session(store, "chat-7", agent):
        ...     reply = await agent("Plan my week.")
    """
    channel = channel_name(store, check_session_id(session_id))

    async def on_command(command: dict[str, object]) -> None:
        if command.get("command") == "interrupt":
            text = command.get("message")
            await agent.interrupt(text if isinstance(text, str) and text else None)

    async with control_channel(store).subscribe(channel, on_command):
        yield

"""Threads: stored conversations (one session entry each) and the live run of each.

A thread is saved under the session id ``serve/<owner>/<thread id>`` as::

    {"serve_thread": 1, "owner": ..., "thread_id": ..., "title": ..., "created_at": ...,
     "updated_at": ..., "aliases": [...], "agent": <agent.state_dict()>,
     "lease": {"worker": ..., "run": ..., "expires": <epoch seconds>} | null}

The owner prefix namespaces client-chosen thread ids: two owners may both use ``"t1"`` and
never see each other's thread. ``aliases`` are the provisional message ids the server
streamed (so a client that sends them back is recognised, not refused as forging).
``serve_thread`` is the layout's version: a stored thread is migrated to it on load (a
thread without it is version 1), and one from a newer agentkit is refused (``StateError``).

``lease`` names the run that owns the thread now (see :mod:`agentkit.serve._ownership`):
the claim, its renewals and the final commit are one key, each written with the store's
version check, so a worker that lost the lease cannot overwrite the newer state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Sequence
from datetime import UTC, datetime

import anyio

from agentkit._formats import Migration, upgrade
from agentkit.agent import ReActAgent
from agentkit.messages import Msg
from agentkit.session import Session

__all__ = [
    "FINISHED_KEEP_SECONDS",
    "FinishedRuns",
    "RunChannel",
    "ThreadRecord",
    "ThreadStore",
    "events_after",
]

_PREFIX = "serve"
MAX_ALIASES = 2000  # oldest provisional ids are forgotten first
FINISHED_KEEP_SECONDS = 60.0
"""How long a worker keeps the events of a thread's last run for reconnects."""
FINISHED_KEEP_RUNS = 256  # at most this many finished runs kept (the oldest go first)
THREAD_VERSION = 1
"""The version of the stored thread layout this agentkit writes (``serve_thread``)."""
THREAD_MIGRATIONS: dict[int, Migration] = {}
"""``{n: fn}``: ``fn`` turns a version-``n`` thread into a version-``n + 1`` one."""


def events_after(last_event_id: str | None, run_id: str) -> int:
    """The index of the first event of run ``run_id`` a reader that saw ``last_event_id`` lacks.

    An SSE id ``<run id>:<seq>`` of this run continues at ``seq + 1``; anything else (none,
    another run's, malformed) starts at 0 (the run is replayed from its first event).
    """
    run, _, seq = (last_event_id or "").strip().rpartition(":")
    if run != run_id or not seq.isdigit():
        return 0
    return int(seq) + 1


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ThreadRecord:
    """One stored thread (metadata plus the agent's state)."""

    __slots__ = (
        "agent_state",
        "aliases",
        "created_at",
        "frontend_tools",
        "lease",
        "owner",
        "state",
        "thread_id",
        "title",
        "updated_at",
        "version",
    )

    def __init__(
        self,
        owner: str,
        thread_id: str,
        data: dict[str, object] | None = None,
        version: int = 0,
    ) -> None:
        data = data or {}
        self.version = version  # the store's version of what was read (0: not stored yet)
        lease = data.get("lease")
        self.lease: dict[str, object] | None = lease if isinstance(lease, dict) else None
        self.owner = owner
        self.thread_id = thread_id
        self.title: str = str(data.get("title") or "")
        self.created_at: str = str(data.get("created_at") or _now())
        self.updated_at: str = str(data.get("updated_at") or self.created_at)
        aliases = data.get("aliases") or []
        self.aliases: list[str] = [str(a) for a in aliases] if isinstance(aliases, list) else []
        state = data.get("agent")
        self.agent_state: dict[str, object] | None = state if isinstance(state, dict) else None
        # AG-UI: the client's tools of the last run that declared some, the shared state.
        tools = data.get("frontend_tools")
        self.frontend_tools: list[dict[str, object]] = tools if isinstance(tools, list) else []
        self.state: object = data.get("state")

    def to_dict(self) -> dict[str, object]:
        """The stored form."""
        return {
            "serve_thread": THREAD_VERSION,
            "owner": self.owner,
            "thread_id": self.thread_id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "aliases": self.aliases[-MAX_ALIASES:],
            "agent": self.agent_state,
            "frontend_tools": self.frontend_tools,
            "state": self.state,
            "lease": self.lease,
        }

    def set_title(self, msgs: Sequence[Msg]) -> None:
        """Title the thread after its first message with text."""
        first = next((m.get_text() for m in msgs if m.get_text()), "")
        self.title = " ".join(first.split())[:80]

    def summary(self) -> dict[str, object]:
        """What the thread list shows."""
        return {
            "threadId": self.thread_id,
            "title": self.title,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


class ThreadStore:
    """Threads in a :class:`~agentkit.session.Session`, namespaced by owner."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def key(owner: str, thread_id: str) -> str:
        """The session id of a thread."""
        return f"{_PREFIX}/{owner}/{thread_id}"

    async def load(self, owner: str, thread_id: str) -> ThreadRecord | None:
        """The stored thread, or None when this owner has no such thread."""
        found = await self.session.load_versioned(self.key(owner, thread_id))
        if found is None or found[0].get("owner") != owner:
            return None
        data = upgrade(
            found[0],
            what="served thread",
            key="serve_thread",
            current=THREAD_VERSION,
            migrations=THREAD_MIGRATIONS,
            missing=1,
        )
        return ThreadRecord(owner, thread_id, data, found[1])

    async def save(
        self, record: ThreadRecord, agent: ReActAgent | None = None, *, durable: bool = True
    ) -> dict[str, object]:
        """Save the record (with ``agent``'s state when given), if the store still holds it.

        Every save is based on ``record.version`` (the version it was read at, or last
        saved as; 0 creates the thread), and updates it. ``durable`` False: the store may
        skip its flush (``Session.save_state``): for lease-only writes, never for a turn.

        Returns:
            The stored form that was written (``ThreadRecord.to_dict``): a claim's lease
            renewals rewrite it.

        Raises:
            SessionConflictError: another writer changed the thread since; nothing written.
        """
        if agent is not None:
            record.agent_state = agent.state_dict()
        record.updated_at = _now()
        key = self.key(record.owner, record.thread_id)
        stored = record.to_dict()
        record.version = await self.session.save_state(
            key, stored, expected_version=record.version, title=record.title, durable=durable
        )
        return stored

    async def delete(self, owner: str, thread_id: str) -> bool:
        """Delete a thread; return whether it existed."""
        return await self.session.delete(self.key(owner, thread_id))

    async def list(
        self, owner: str, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[dict[str, object]], str | None]:
        """One page of this owner's threads, most recently saved first: summaries only.

        Reads the store's metadata (``Session.list_sessions``), not the threads: a page
        costs the same with 10 threads or 10,000. A thread saved before titles were kept in
        the metadata is read once for its title.

        Returns:
            The page's summaries (``threadId``, ``title``, ``updatedAt``) and the cursor of
            the next page (None: this was the last).
        """
        prefix = f"{_PREFIX}/{owner}/"
        page = await self.session.list_sessions(prefix=prefix, limit=limit, cursor=cursor)
        out: list[dict[str, object]] = []
        for info in page.sessions:
            thread_id = info.session_id[len(prefix) :]
            title = info.title
            if title is None:  # stored before titles were metadata
                record = await self.load(owner, thread_id)
                if record is None:
                    continue
                title = record.title
            out.append(
                {"threadId": thread_id, "title": title, "updatedAt": info.updated_at.isoformat()}
            )
        return out, page.next_cursor


class RunChannel:
    """One live run: its agent, and its encoded events for any number of readers.

    Events are kept for the whole run, so a reader that attaches late (a reloaded page)
    replays the run from ``RUN_STARTED``, and one that reconnects with ``Last-Event-ID``
    gets every later event once, in order; the run never waits for a reader.
    """

    def __init__(self, owner: str, thread_id: str, run_id: str) -> None:
        self.owner = owner
        self.thread_id = thread_id
        self.run_id = run_id
        self.agent: ReActAgent | None = None
        self.events: list[str] = []
        self.done = anyio.Event()  # the run ended and its thread is saved
        self.ended = False  # the last event was pushed (the save may still be running)
        self.stop_requested = False
        self.unavailable = False  # its commit is failing: the thread's requests get 503
        self.written_at: float | None = None  # perf_counter() when a reader wrote the end
        self.written = anyio.Event()  # set with written_at
        self.committed_at: float | None = None  # perf_counter() when the turn was stored
        # The turn's commit has begun: its state is being written, so nothing may reach the
        # agent object any more (a steer placed now would not be in the saved thread).
        self.committing = False
        self.readers = 0
        self._waiters: list[asyncio.Future[None]] = []  # tasks in ``changed``, one future each

    def push(self, encoded: str) -> None:
        """Append one encoded event, with its SSE ``id`` (``<run id>:<seq>``); wake readers."""
        self.events.append(f"id: {self.run_id}:{len(self.events)}\n{encoded}")
        self.wake()

    def end_stream(self) -> None:
        """The last event was pushed: readers get the rest and stop."""
        self.ended = True
        self.wake()

    def close(self) -> None:
        """The run is over and saved (ends the stream too, if not yet)."""
        self.end_stream()
        self.done.set()

    def resume_index(self, last_event_id: str | None) -> int:
        """Where a reader that saw ``last_event_id`` (SSE ``Last-Event-ID``) continues.

        An id of this run continues after that event; anything else (none, another run's,
        malformed) replays this run from its first event.
        """
        return min(events_after(last_event_id, self.run_id), len(self.events))

    async def read(self, start: int = 0) -> AsyncGenerator[str, None]:
        """Yield the encoded events from index ``start`` until the run ends.

        Events pushed since the last read go out together, as one chunk: one write (and
        one trip through the ASGI stack) for a tool call's four events or a stopped run's
        last ones, instead of one each.
        """
        index = start
        self.readers += 1
        try:
            while True:
                end = len(self.events)
                if index < end:
                    chunk = self.events[index:end]
                    yield chunk[0] if len(chunk) == 1 else "".join(chunk)
                    index = end
                    if self.ended and index == len(self.events) and self.written_at is None:
                        self.written_at = time.perf_counter()  # the last event is on its way
                        self.written.set()
                    continue  # more may have been pushed while the chunk was being written
                if self.ended:
                    return
                await self.changed()
        finally:
            self.readers -= 1

    async def changed(self) -> None:
        """Wait until an event is pushed, the stream ends or :meth:`wake` is called.

        Check ``events`` and ``ended`` first (with no await between the check and this
        call): a change that happened before is not waited for again.
        """
        if self.ended:
            return
        # A future per waiting task, not an Event remade at every wake: a wake is then one
        # ``set_result`` (no Event to build for the next one), and a waiter that is
        # cancelled cancels its own future only, never another reader's.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter.cancelled():  # this task was cancelled: no wake took the future
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    def wake(self) -> None:
        """Wake every task waiting in :meth:`changed` (nothing was pushed)."""
        # Most pushes find no one waiting (the reader is still writing the last chunk).
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def wait(self) -> None:
        """Wait until the run has ended (and its thread is saved)."""
        await self.done.wait()


class FinishedRuns:
    """The last finished run of recently active threads, for reconnects (bounded, expiring).

    A client whose connection dropped just before ``RUN_FINISHED`` reconnects with
    ``Last-Event-ID`` and still gets the run's last events exactly once.
    """

    def __init__(
        self, seconds: float = FINISHED_KEEP_SECONDS, most: int = FINISHED_KEEP_RUNS
    ) -> None:
        self.seconds = seconds
        self.most = most
        self._runs: dict[str, tuple[float, RunChannel]] = {}  # insertion order: oldest first

    def keep(self, key: str, channel: RunChannel) -> None:
        """Remember ``channel`` as the last run of thread ``key``."""
        self._runs.pop(key, None)
        self._runs[key] = (time.monotonic() + self.seconds, channel)
        while len(self._runs) > self.most:
            del self._runs[next(iter(self._runs))]

    def get(self, key: str) -> RunChannel | None:
        """The thread's last finished run, if still kept."""
        now = time.monotonic()
        while self._runs:  # expired ones first (they are the oldest)
            oldest = next(iter(self._runs))
            if self._runs[oldest][0] > now:
                break
            del self._runs[oldest]
        found = self._runs.get(key)
        return None if found is None else found[1]

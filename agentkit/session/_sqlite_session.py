"""``SQLiteSession``: the embedded default store, one table in one SQLite file.

Every operation runs in a worker thread (``anyio.to_thread``), so the event loop never blocks
on the disk, on a connection of its own while it runs: connections are kept in a small pool
between operations and closed once the store has been idle for ``IDLE_CLOSE`` seconds. A
connection per operation made SQLite checkpoint the log on every close of the file's last
connection (about four extra fsyncs per save, most of a served turn's store time); a pool
that closes when idle keeps that checkpoint for quiet moments and still leaves no file open
between bursts (a read-only remount, a backup, a move of the file can happen then). A
connection whose operation failed other than by a version conflict (a full disk, a read-only
file, an I/O error) is closed, not kept: the next operation opens a fresh one, which meets
the fault again or finds it gone. The file is
in WAL mode: readers never wait for a writer, and concurrent writers (other tasks, other
threads, other processes) queue on SQLite's lock for up to ``timeout`` seconds. A save
commits with ``synchronous=FULL`` (the log is fsynced), one asked for with ``durable=False``
with ``NORMAL`` (no fsync; see ``Session.save_state``). Each save is one atomic statement; a
versioned save (see ``Session``) is an ``UPDATE ... WHERE version = ?`` (or an ``INSERT``
that must not find the row), so the check and the write cannot be separated by another
writer. The database file is created with mode 0600, like ``JSONSession``'s files (SQLite
gives its ``-wal``/``-shm`` files the same mode).

A full disk or a read-only file fails the save's transaction as a whole (``SessionError``):
the stored state stays the one before it.

Tables (name configurable; a table from before versions or titles gets the columns added, a
database from before items gets the items table; its rows have no items and load as before)::

    CREATE TABLE agentkit_sessions (
        id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL,
        version INTEGER NOT NULL DEFAULT 1, title TEXT, gen TEXT)
    CREATE INDEX agentkit_sessions_by_update ON agentkit_sessions (updated_at DESC, id DESC)
    CREATE TABLE agentkit_sessions_items (
        id TEXT NOT NULL, log TEXT NOT NULL, idx INTEGER NOT NULL, digest BLOB NOT NULL,
        item TEXT NOT NULL, PRIMARY KEY (id, log, idx)) WITHOUT ROWID

``state`` holds the state's head: its message logs are rows of the items table, one per
message (see ``EncodedState``), so a save writes the head and the messages whose digest
changed (a turn's new ones), and deletes those past a log's new end, in the transaction
that checks the version. What it compares with: the items this store object last wrote or
read for the session when the row still has that version and ``gen`` (a token drawn when
the row is created; see ``KnownItems``), else the stored digests, read in the transaction.

``updated_at`` is UTC ISO 8601 with microseconds (``2025-01-02T03:04:05.000006+00:00``), so
text order is time order and ``list_sessions`` pages along the index.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from agentkit.exceptions import SessionConflictError
from agentkit.session._base import (
    EncodedState,
    KnownItems,
    Session,
    SessionInfo,
    check_session_id,
    group_items,
    new_gen,
)

__all__ = ["SQLiteSession"]

_T = TypeVar("_T")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _timestamp(when: datetime) -> str:
    """The stored form of a time: fixed width, so that text order is time order."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


IDLE_CLOSE = 0.5
"""Seconds without an operation after which a store closes its pooled connections."""

# First-use set-up (WAL switch, table) runs one at a time in this process, for every store
# object: concurrent first saves, also through two objects on one file, would race for the
# exclusive lock the WAL switch needs, which ignores the busy timeout.
_SETUP_LOCK = threading.Lock()


# Connections a forked child inherited from its parent's pool: kept referenced, unused, so
# that the child never closes (and checkpoints) them.
_INHERITED: list[sqlite3.Connection] = []


def _close_all(connections: list[sqlite3.Connection]) -> None:
    for conn in connections:
        with contextlib.suppress(sqlite3.Error):  # a failed close still releases the files
            conn.close()


class SQLiteSession(Session):
    """Sessions stored as rows of one table in a SQLite database file.

    Args:
        path: The database file; created (with its parent directories) if missing. An
            in-memory database (``":memory:"``) is refused: it would vanish whenever the
            store's connections close (each operation runs on one of a pool, closed when
            idle).
        table: Table name (letters, digits, ``_``).
        timeout: Seconds a writer waits for another writer's lock before failing.
    """

    backend = "SQLite"
    splits = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "agentkit_sessions",
        timeout: float = 30.0,
    ) -> None:
        if str(path) == ":memory:" or str(path).startswith("file::memory:"):
            raise ValueError(
                "SQLiteSession needs a database file (its connections close when idle, "
                "then the database would vanish); use a temporary file for throwaway sessions"
            )
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"invalid table name {table!r}: use letters, digits and '_'")
        self.path = Path(path)
        self.table = table
        self.items = f"{table}_items"
        self.timeout = timeout
        self.known = KnownItems()
        self._ready = False
        self._key = ""
        # The pool: idle connections, how many are lent out, when the last came back, the
        # pending idle check, and the process they belong to (a forked child opens its own).
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._lent = 0
        self._returned = 0.0
        self._closer: threading.Timer | None = None
        self._pid = os.getpid()

    @property
    def store_key(self) -> str:
        """The database file's resolved path and the table.

        Resolved once: it is asked for on every save and load, and resolving walks the path.
        """
        if not self._key:
            self._key = f"sqlite:{self.path.resolve()}#{self.table}"
        return self._key

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            with _SETUP_LOCK:
                return self._connect_first()
        return self._open()

    def _open(self) -> sqlite3.Connection:
        # Used by one thread at a time (the pool lends it out), not always the same one.
        return sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False)

    def _lend(self) -> sqlite3.Connection:
        """An idle pooled connection, or a new one."""
        with self._lock:
            if self._pid != os.getpid():
                # Inherited over a fork: the parent's connections are not ours to use or
                # close (closing could checkpoint under the parent's feet). Dropped unused.
                _INHERITED.extend(self._idle)
                self._idle, self._lent, self._closer, self._pid = [], 0, None, os.getpid()
            self._lent += 1
            if self._idle:
                return self._idle.pop()
        try:
            return self._connect()
        except BaseException:
            self._give_back(None)
            raise

    def _give_back(self, conn: sqlite3.Connection | None) -> None:
        """Return a lent connection (None: it was closed), arming the idle check."""
        with self._lock:
            self._lent -= 1
            if conn is not None:
                self._idle.append(conn)
            self._returned = time.monotonic()
            if self._closer is None and self._idle:
                self._arm(IDLE_CLOSE)

    def _arm(self, delay: float) -> None:
        closer = threading.Timer(delay, self._close_if_idle)
        closer.daemon = True  # never holds the interpreter's exit
        self._closer = closer
        closer.start()

    def _close_if_idle(self) -> None:
        with self._lock:
            self._closer = None
            if self._pid != os.getpid():
                return
            quiet = time.monotonic() - self._returned
            if self._lent or quiet < IDLE_CLOSE:
                if self._idle:
                    self._arm(IDLE_CLOSE - quiet if not self._lent else IDLE_CLOSE)
                return
            idle, self._idle = self._idle, []
        _close_all(idle)

    async def close(self) -> None:
        """Close the pooled connections (the store opens new ones if used again)."""
        with self._lock:
            idle, self._idle = self._idle, []
            closer, self._closer = self._closer, None
        if closer is not None:
            closer.cancel()  # no timer thread outlives a closed store
        await anyio.to_thread.run_sync(_close_all, idle)

    def _connect_first(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Create the file private before SQLite does (it would use 0644 under a
            # usual umask); an existing file keeps its mode.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        conn = self._open()
        if not self._ready:
            self._wal(conn)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                "id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL, "
                "version INTEGER NOT NULL DEFAULT 1, title TEXT, gen TEXT)"
            )
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({self.table})")}
            if "version" not in columns:  # a table written before versions existed
                conn.execute(
                    f"ALTER TABLE {self.table} ADD COLUMN version INTEGER NOT NULL DEFAULT 1"
                )
            if "gen" not in columns:  # ... or before items (its rows get one when saved)
                conn.execute(f"ALTER TABLE {self.table} ADD COLUMN gen TEXT")
            if "title" not in columns:  # ... or before titles
                conn.execute(f"ALTER TABLE {self.table} ADD COLUMN title TEXT")
                # Times were written without microseconds when they were 0: widen them so
                # that text order stays time order.
                conn.execute(
                    f"UPDATE {self.table} SET updated_at = substr(updated_at, 1, 19) || "
                    "'.000000' || substr(updated_at, 20) WHERE length(updated_at) = 25"
                )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {self.table}_by_update "
                f"ON {self.table} (updated_at DESC, id DESC)"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.items} ("
                "id TEXT NOT NULL, log TEXT NOT NULL, idx INTEGER NOT NULL, "
                "digest BLOB NOT NULL, item TEXT NOT NULL, PRIMARY KEY (id, log, idx)) "
                "WITHOUT ROWID"
            )
            conn.commit()
            self._ready = True
        return conn

    def _wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL, waiting out another process doing the same.

        The switch takes an exclusive lock that ignores the busy timeout, so two processes
        opening a new file at once (two workers' first requests) would fail with "database is
        locked"; the one that loses retries until ``timeout``.
        """
        deadline = time.monotonic() + self.timeout
        delay = 0.01
        while True:
            try:
                if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)  # in a worker thread (see _run), never on the event loop
            delay = min(delay * 2, 0.25)

    async def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in one transaction on a pooled connection, in a worker thread."""

        def run() -> _T:
            conn = self._lend()
            kept: sqlite3.Connection | None = None
            try:
                with conn:  # commits, or rolls back on an error
                    result = operation(conn)
                kept = conn
                return result
            except SessionConflictError:
                kept = conn  # rolled back, nothing wrong with the connection
                raise
            finally:
                if kept is None:
                    _close_all([conn])
                self._give_back(kept)

        # Not abandoned on cancellation: a started write finishes (or rolls back) before
        # the cancellation is delivered, so the file is never left mid-transaction.
        return await anyio.to_thread.run_sync(run)

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        now = _timestamp(datetime.now(UTC))
        table = self.table
        # WAL + FULL: the commit fsyncs the log. NORMAL skips that fsync (the next FULL
        # commit's fsync covers this write too: the log is appended in order), so a power
        # cut can undo only the NORMAL writes since the last FULL one. Set on every write:
        # it is the connection's setting, whatever SQLite's build default.
        synchronous = "PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL"

        def write(conn: sqlite3.Connection) -> tuple[int, str]:
            conn.execute(synchronous)  # outside the transaction, where SQLite applies it
            # BEGIN IMMEDIATE: take the write lock before reading the version (and the
            # digests): the check and every write below are one transaction.
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(f"SELECT version, gen FROM {table} WHERE id = ?", (session_id,))
            found = row.fetchone()
            actual, gen = (0, None) if found is None else (int(found[0]), found[1])
            if expected is not None and expected != actual:
                raise SessionConflictError(session_id, expected, actual, self.backend)
            self._write_items(conn, session_id, state, self.known.valid(session_id, actual, gen))
            gen = gen or new_gen()  # a row from before gens gets one now
            if found is None:
                conn.execute(
                    f"INSERT INTO {table} (id, state, updated_at, version, title, gen) "
                    "VALUES (?, ?, ?, 1, ?, ?)",
                    (session_id, state.head, now, title, gen),
                )
            else:
                conn.execute(
                    f"UPDATE {table} SET state = ?, updated_at = ?, version = ?, "
                    "title = COALESCE(?, title), gen = ? WHERE id = ?",
                    (state.head, now, actual + 1, title, gen, session_id),
                )
            return actual + 1, gen

        try:
            version, gen = await self._run(write)
        except BaseException:
            # It may have committed before a cancellation (or an error after the commit)
            # reached us: what is stored is then unknown here.
            self.known.drop(session_id)
            raise
        self.known.put(session_id, version, gen, state.logs)  # committed
        return version

    def _write_items(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        state: EncodedState,
        known: Mapping[str, list[str]] | None,
    ) -> None:
        """Write the items that differ from what the row holds; cut the logs that shrank.

        In the save's transaction. ``known``: the items this object knows the row holds
        (checked by version and ``gen``); None: compare with the stored digests.
        """
        items = self.items
        if known is not None:
            upserts, cuts = state.changes_since(known)
        else:
            rows = conn.execute(f"SELECT log, idx, digest FROM {items} WHERE id = ?", (session_id,))
            upserts, cuts = state.changes({(log, idx): digest for log, idx, digest in rows})
        if cuts:
            conn.executemany(
                f"DELETE FROM {items} WHERE id = ? AND log = ? AND idx >= ?",
                [(session_id, log, n) for log, n in cuts],
            )
        if upserts:
            conn.executemany(
                f"INSERT OR REPLACE INTO {items} (id, log, idx, digest, item) "
                "VALUES (?, ?, ?, ?, ?)",
                [(session_id, *change) for change in upserts],
            )

    async def _read(
        self, session_id: str
    ) -> tuple[str | dict[str, object], int, dict[str, list[str]]] | None:
        head_sql = f"SELECT state, version, gen FROM {self.table} WHERE id = ?"
        items_sql = f"SELECT log, idx, item FROM {self.items} WHERE id = ? ORDER BY log, idx"

        def read(
            conn: sqlite3.Connection,
        ) -> tuple[str, int, str | None, dict[str, list[str]]] | None:
            conn.execute("BEGIN")  # one snapshot for the head and its items
            row = conn.execute(head_sql, (session_id,)).fetchone()
            if row is None:
                return None
            version, gen = int(row[1]), row[2]
            # The items this object last wrote or read for this (version, gen) are what the
            # row holds (see KnownItems): a served thread's next turn, on the worker that
            # saved it, reads one row instead of one per message.
            known = self.known.valid(session_id, version, gen)
            if known is not None:
                return str(row[0]), version, gen, dict(known)
            logs = group_items(conn.execute(items_sql, (session_id,)), session_id)
            return str(row[0]), version, gen, logs

        found = await self._run(read)
        if found is None:
            return None
        head, version, gen, logs = found
        self.known.put(session_id, version, gen, logs)
        return head, version, logs

    async def _exists(self, session_id: str) -> bool:
        sql = f"SELECT 1 FROM {self.table} WHERE id = ?"
        return await self._run(lambda conn: conn.execute(sql, (session_id,)).fetchone() is not None)

    async def _delete(self, session_id: str) -> bool:
        head_sql = f"DELETE FROM {self.table} WHERE id = ?"
        items_sql = f"DELETE FROM {self.items} WHERE id = ?"

        def delete(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(items_sql, (session_id,))
            return conn.execute(head_sql, (session_id,)).rowcount > 0

        self.known.drop(session_id)
        return await self._run(delete)

    async def _list_ids(self) -> list[str]:
        sql = f"SELECT id FROM {self.table}"
        return await self._run(lambda conn: [str(row[0]) for row in conn.execute(sql)])

    async def _list_page(
        self, prefix: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[SessionInfo]:
        sql = f"SELECT id, version, updated_at, title FROM {self.table} WHERE substr(id, 1, ?) = ?"
        params: tuple[object, ...] = (len(prefix), prefix)
        if after is not None:
            sql += " AND (updated_at, id) < (?, ?)"
            params += (_timestamp(after[0]), after[1])
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = await self._run(lambda conn: conn.execute(sql, (*params, limit)).fetchall())
        return [SessionInfo(str(r[0]), int(r[1]), datetime.fromisoformat(r[2]), r[3]) for r in rows]

    async def updated_at(self, session_id: str) -> datetime | None:
        """When the session was last saved (UTC), or None if it does not exist."""
        sql = f"SELECT updated_at FROM {self.table} WHERE id = ?"
        key = check_session_id(session_id)
        row = await self._run(lambda conn: conn.execute(sql, (key,)).fetchone())
        return None if row is None else datetime.fromisoformat(row[0])

    def __repr__(self) -> str:
        return f"SQLiteSession({str(self.path)!r}, table={self.table!r})"

"""``SQLiteSession``: the embedded default store, one table in one SQLite file.

Every operation opens its own connection in a worker thread (``anyio.to_thread``), so the
event loop never blocks on the disk and no connection is shared between threads. The file
is in WAL mode: readers never wait for a writer, and concurrent writers (other tasks, other
threads, other processes) queue on SQLite's lock for up to ``timeout`` seconds. Each save is
one atomic upsert.

Table (name configurable)::

    CREATE TABLE agentkit_sessions (
        id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL)
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from agentkit.session.base import Session, check_session_id

__all__ = ["SQLiteSession"]

_T = TypeVar("_T")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class SQLiteSession(Session):
    """Sessions stored as rows of one table in a SQLite database file.

    Args:
        path: The database file; created (with its parent directories) if missing. An
            in-memory database (``":memory:"``) is refused: it would vanish between
            operations, which each use their own connection.
        table: Table name (letters, digits, ``_``).
        timeout: Seconds a writer waits for another writer's lock before failing.
    """

    backend = "SQLite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "agentkit_sessions",
        timeout: float = 30.0,
    ) -> None:
        if str(path) == ":memory:" or str(path).startswith("file::memory:"):
            raise ValueError(
                "SQLiteSession needs a database file (each operation opens its own "
                "connection); use a temporary file for throwaway sessions"
            )
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"invalid table name {table!r}: use letters, digits and '_'")
        self.path = Path(path)
        self.table = table
        self.timeout = timeout
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout)
        if not self._ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                "id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL)"
            )
            conn.commit()
            self._ready = True
        return conn

    async def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in one transaction on a fresh connection, in a worker thread."""

        def run() -> _T:
            with contextlib.closing(self._connect()) as conn, conn:
                return operation(conn)

        # Not abandoned on cancellation: a started write finishes (or rolls back) before
        # the cancellation is delivered, so the file is never left mid-transaction.
        return await anyio.to_thread.run_sync(run)

    async def _write(self, session_id: str, text: str) -> None:
        now = datetime.now(UTC).isoformat()
        sql = (
            f"INSERT INTO {self.table} (id, state, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET state = excluded.state, "
            "updated_at = excluded.updated_at"
        )
        await self._run(lambda conn: conn.execute(sql, (session_id, text, now)))

    async def _read(self, session_id: str) -> str | None:
        sql = f"SELECT state FROM {self.table} WHERE id = ?"

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(sql, (session_id,)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(read)

    async def _exists(self, session_id: str) -> bool:
        sql = f"SELECT 1 FROM {self.table} WHERE id = ?"
        return await self._run(lambda conn: conn.execute(sql, (session_id,)).fetchone() is not None)

    async def _delete(self, session_id: str) -> bool:
        sql = f"DELETE FROM {self.table} WHERE id = ?"
        return await self._run(lambda conn: conn.execute(sql, (session_id,)).rowcount > 0)

    async def _list_ids(self) -> list[str]:
        sql = f"SELECT id FROM {self.table}"
        return await self._run(lambda conn: [str(row[0]) for row in conn.execute(sql)])

    async def updated_at(self, session_id: str) -> datetime | None:
        """When the session was last saved (UTC), or None if it does not exist."""
        sql = f"SELECT updated_at FROM {self.table} WHERE id = ?"
        key = check_session_id(session_id)
        row = await self._run(lambda conn: conn.execute(sql, (key,)).fetchone())
        return None if row is None else datetime.fromisoformat(row[0])

    def __repr__(self) -> str:
        return f"SQLiteSession({str(self.path)!r}, table={self.table!r})"

"""``PostgresSession``: sessions as rows of one PostgreSQL table (optional; needs ``psycopg`` 3).

``psycopg`` is imported on first use (``pip install 'agentkit[postgres]'``). Every save is one
statement, so it is atomic; a versioned save (see ``Session``) is an ``UPDATE ... WHERE
version = %s`` or an ``INSERT ... ON CONFLICT DO NOTHING``, so the check and the write are
one step and a stale save cannot overwrite a newer state. States are stored as ``text``
(byte-exact JSON, not ``jsonb``, which would reorder keys).

Table (name configurable, created on first use under an advisory lock so that several
workers starting at once do not race on the DDL)::

    CREATE TABLE agentkit_sessions (
        id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now())

The store keeps a few idle connections (``max_idle``) and opens more when operations run
concurrently; ``close()`` closes them. The same URL serves the control channel
(``LISTEN/NOTIFY``, see :mod:`agentkit.session._control`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from agentkit.exceptions import SessionConflictError
from agentkit.session._base import Session, check_session_id

__all__ = ["PostgresSession"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def import_psycopg() -> Any:
    """Import ``psycopg`` with an install hint when it is missing."""
    try:
        return importlib.import_module("psycopg")
    except ImportError as exc:
        raise ImportError(
            "PostgresSession needs the 'psycopg' package: pip install 'agentkit[postgres]'"
        ) from exc


class PostgresSession(Session):
    """Sessions stored in a PostgreSQL table.

    Args:
        url: A libpq URL (``postgresql://user:pass@host:5432/db``, or with ``?host=/socket/dir``).
        table: Table name (letters, digits, ``_``).
        max_idle: Idle connections kept open between operations.

    Raises:
        ImportError: on first use, if ``psycopg`` is not installed.
    """

    backend = "Postgres"

    def __init__(self, url: str, *, table: str = "agentkit_sessions", max_idle: int = 4) -> None:
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"invalid table name {table!r}: use letters, digits and '_'")
        self.url = url
        self.table = table
        self.max_idle = max_idle
        self._idle: list[Any] = []
        self._ready = False

    @property
    def store_key(self) -> str:
        """The URL and the table."""
        return f"postgres:{self.url}#{self.table}"

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """Borrow an autocommit ``psycopg.AsyncConnection`` (returned to the idle pool)."""
        conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:
            conn = await import_psycopg().AsyncConnection.connect(self.url, autocommit=True)
        try:
            if not self._ready:
                await self._create_table(conn)
            yield conn
        except BaseException:
            await conn.close()  # its state is unknown after an error or a cancellation
            raise
        if len(self._idle) < self.max_idle and not conn.closed:
            self._idle.append(conn)
        else:
            await conn.close()

    async def _create_table(self, conn: Any) -> None:
        async with conn.transaction():
            # Concurrent CREATE TABLE IF NOT EXISTS can still collide in pg_type.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                "id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL, "
                "updated_at timestamptz NOT NULL DEFAULT now())"
            )
        self._ready = True

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> Any:
        async with self.connection() as conn:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchone()

    async def _write(self, session_id: str, text: str, expected: int | None) -> int:
        t = self.table
        if expected is None:
            sql = (
                f"INSERT INTO {t} AS t (id, state, version) VALUES (%s, %s, 1) "
                "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, "
                "version = t.version + 1, updated_at = now() RETURNING version"
            )
            row = await self._fetch(sql, (session_id, text))
        elif expected == 0:
            sql = (
                f"INSERT INTO {t} (id, state, version) VALUES (%s, %s, 1) "
                "ON CONFLICT (id) DO NOTHING RETURNING version"
            )
            row = await self._fetch(sql, (session_id, text))
        else:
            sql = (
                f"UPDATE {t} SET state = %s, version = version + 1, updated_at = now() "
                "WHERE id = %s AND version = %s RETURNING version"
            )
            row = await self._fetch(sql, (text, session_id, expected))
        if row is None:
            actual = await self.version(session_id)
            raise SessionConflictError(session_id, expected or 0, actual, self.backend)
        return int(row[0])

    async def _read(self, session_id: str) -> tuple[str | dict[str, object], int] | None:
        row = await self._fetch(
            f"SELECT state, version FROM {self.table} WHERE id = %s", (session_id,)
        )
        return None if row is None else (str(row[0]), int(row[1]))

    async def _exists(self, session_id: str) -> bool:
        row = await self._fetch(f"SELECT 1 FROM {self.table} WHERE id = %s", (session_id,))
        return row is not None

    async def _delete(self, session_id: str) -> bool:
        row = await self._fetch(
            f"DELETE FROM {self.table} WHERE id = %s RETURNING 1", (session_id,)
        )
        return row is not None

    async def _list_ids(self) -> list[str]:
        async with self.connection() as conn:
            cursor = await conn.execute(f"SELECT id FROM {self.table}")
            return [str(row[0]) for row in await cursor.fetchall()]

    async def updated_at(self, session_id: str) -> datetime | None:
        """When the session was last saved, or None if it does not exist."""
        key = check_session_id(session_id)
        row = await self._fetch(f"SELECT updated_at FROM {self.table} WHERE id = %s", (key,))
        return None if row is None else row[0]

    async def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()

    def __repr__(self) -> str:
        return f"PostgresSession({_redact(self.url)!r}, table={self.table!r})"


def _redact(url: str) -> str:
    """Hide a password in a URL (reprs end up in logs)."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)

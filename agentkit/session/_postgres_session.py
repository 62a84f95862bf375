"""``PostgresSession``: sessions as rows of one PostgreSQL table (optional; needs ``psycopg`` 3).

``psycopg`` and ``psycopg_pool`` are imported on first use (``pip install
'agentkit[postgres]'``). Every save is one statement or one transaction, so it is atomic; a
versioned save (see ``Session``) writes the head with an ``UPDATE ... WHERE version = %s`` or
an ``INSERT ... ON CONFLICT DO NOTHING`` before any item, so the check and the write are one
step (the row lock it takes orders the rest) and a stale save cannot overwrite a newer state.
States are stored as ``text`` (byte-exact JSON, not ``jsonb``, which would reorder keys).

Tables (name configurable, created on first use under an advisory lock so that several
workers starting at once do not race on the DDL; a table from before titles gets the column
and the listing index added, a database from before items gets the items table: its rows
have no items and load as before)::

    CREATE TABLE agentkit_sessions (
        id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(), title text, gen text)
    CREATE TABLE agentkit_sessions_items (
        id text NOT NULL, log text NOT NULL, idx integer NOT NULL, digest bytea NOT NULL,
        item text NOT NULL, PRIMARY KEY (id, log, idx))

``state`` holds the state's head; its message logs are rows of the items table, one per
message (see ``EncodedState``). A save sends only the messages that changed and deletes
those past a log's new end, atomically with the head: a turn sends its new messages, a lease
write none. When this store object knows what the row holds (it last wrote or read it, see
``KnownItems``; or the save creates the session), that is one statement: the head's update
guarded by the version and ``gen`` (a token drawn when the row is created), and the items'
writes gated on it. Otherwise (or when that guard finds the row moved on), one transaction:
the head's versioned write (which locks the row), then the stored digests (16 bytes an item)
are read and compared.

Connections come from a bounded pool (``psycopg_pool.AsyncConnectionPool``), opened on first
use and closed by ``close()``: at most ``max_size`` connections per store object, however many
operations run at once; an operation that finds none free within ``pool_timeout`` seconds
raises ``SessionError``. Size it so that workers x ``max_size`` stays under the server's
``max_connections`` (see docs/scaling.md). Each borrowed connection is checked first, so after
the server restarts the pool replaces its dead connections and the next operation succeeds.
The same URL serves the control channel (``LISTEN/NOTIFY``, see
:mod:`agentkit.session._control`; a subscription holds a connection of its own, outside the
pool).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING

import anyio

from agentkit.exceptions import SessionConflictError, SessionError, StateError
from agentkit.session._base import (
    EncodedState,
    KnownItems,
    Session,
    SessionInfo,
    check_session_id,
    new_gen,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresSession"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def import_psycopg() -> ModuleType:
    """Import ``psycopg`` with an install hint when it is missing."""
    return _import("psycopg")


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"PostgresSession needs the '{name.replace('_', '-')}' package: "
            "pip install 'agentkit[postgres]'"
        ) from exc


class PostgresSession(Session):
    """Sessions stored in a PostgreSQL table, through a bounded connection pool.

    Args:
        url: A libpq URL (``postgresql://user:pass@host:5432/db``, or with ``?host=/socket/dir``).
        table: Table name (letters, digits, ``_``; at most 57 characters, so that the items
            table's ``<table>_items`` is a name Postgres keeps whole).
        min_size: Connections the pool keeps open once it is in use.
        max_size: Most connections the pool opens (operations beyond it wait for one).
        pool_timeout: Seconds an operation waits for a free connection before it raises
            ``SessionError``.

    Raises:
        ValueError: on a bad table name or pool size.
        ImportError: on first use, if ``psycopg`` or ``psycopg-pool`` is not installed.
    """

    backend = "Postgres"
    splits = True

    def __init__(
        self,
        url: str,
        *,
        table: str = "agentkit_sessions",
        min_size: int = 1,
        max_size: int = 10,
        pool_timeout: float = 30.0,
    ) -> None:
        if not _IDENTIFIER.fullmatch(table) or len(table) > 57:
            raise ValueError(
                f"invalid table name {table!r}: use letters, digits and '_' (at most 57)"
            )
        if max_size < 1 or not 0 <= min_size <= max_size:
            raise ValueError(
                f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}"
            )
        if pool_timeout <= 0:
            raise ValueError(f"pool_timeout must be positive, got {pool_timeout}")
        self.url = url
        self.table = table
        self.items = f"{table}_items"
        self.known = KnownItems()
        self.min_size = min_size
        self.max_size = max_size
        self.pool_timeout = pool_timeout
        self._pool: AsyncConnectionPool[AsyncConnection[TupleRow]] | None = None
        self._pool_lock = anyio.Lock()
        self._ready = False

    @property
    def store_key(self) -> str:
        """The URL and the table."""
        return f"postgres:{self.url}#{self.table}"

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConnection[TupleRow]] | None:
        """The ``psycopg_pool.AsyncConnectionPool`` (None until first use and after close)."""
        return self._pool

    async def _open_pool(self) -> AsyncConnectionPool[AsyncConnection[TupleRow]]:
        async with self._pool_lock:  # two first operations at once open one pool
            pool = self._pool
            if pool is None:
                pool_class = _import("psycopg_pool").AsyncConnectionPool
                pool = pool_class(
                    self.url,
                    min_size=self.min_size,
                    max_size=self.max_size,
                    timeout=self.pool_timeout,
                    kwargs={"autocommit": True},
                    # One round trip per borrow buys this: a connection the server dropped
                    # (restart, failover, idle kill) is replaced instead of failing a save.
                    check=pool_class.check_connection,
                    name=f"agentkit:{self.table}",
                    open=False,
                )
                await pool.open()
                self._pool = pool
            return pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[TupleRow]]:
        """Borrow an autocommit ``psycopg.AsyncConnection`` from the pool.

        Raises:
            SessionError: if no connection is free within ``pool_timeout`` seconds.
        """
        pool = self._pool or await self._open_pool()
        try:
            conn = await pool.getconn()
        except _import("psycopg_pool").PoolTimeout as exc:
            raise SessionError(
                f"{self!r}: no database connection free within {self.pool_timeout} s "
                f"(max_size={self.max_size} busy, or the server is unreachable)"
            ) from exc
        try:
            if not self._ready:
                await self._create_table(conn)
            yield conn
        finally:
            # Shielded: a cancelled borrower must still hand the connection back (the pool
            # resets or discards it by its state), or the pool shrinks for good.
            with anyio.CancelScope(shield=True):
                await pool.putconn(conn)

    async def _create_table(self, conn: AsyncConnection[TupleRow]) -> None:
        t = self.table
        async with conn.transaction():
            # Concurrent CREATE TABLE IF NOT EXISTS can still collide in pg_type.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (t,))
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {t} ("
                "id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL, "
                "updated_at timestamptz NOT NULL DEFAULT now(), title text)"
            )
            await conn.execute(f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS title text")
            await conn.execute(f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS gen text")
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS {t[:48]}_by_update ON {t} (updated_at DESC, id DESC)"
            )
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.items} ("
                "id text NOT NULL, log text NOT NULL, idx integer NOT NULL, "
                "digest bytea NOT NULL, item text NOT NULL, PRIMARY KEY (id, log, idx))"
            )
        self._ready = True

    async def _fetch(self, sql: str, params: tuple[object, ...]) -> TupleRow | None:
        async with self.connection() as conn:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchone()

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        t = self.table
        # Not durable: ``synchronous_commit`` off for this transaction (``set_config(...,
        # true)`` is ``SET LOCAL``), in the head's round trip. The commit then returns
        # before its log record is flushed; the log is flushed in order, so a later durable
        # commit covers this one too.
        relaxed = "" if durable else " AND set_config('synchronous_commit', 'off', true) <> ''"
        gen = new_gen()  # the row's token if this save creates it (or it has none yet)
        entry = self.known.get(session_id)
        # One statement when what the row holds is known (a new session holds nothing): the
        # head's write, guarded by the version and gen, and the items' writes gated on it.
        one: tuple[str, tuple[object, ...]] | None = None
        if expected == 0:
            one = (
                f"WITH head AS (INSERT INTO {t} (id, state, version, title, gen) "
                f"SELECT %s::text, %s::text, 1, %s::text, %s::text WHERE true{relaxed} "
                "ON CONFLICT (id) DO NOTHING RETURNING version, gen)",
                (session_id, state.head, title, gen),
            )
            changes = state.changes_since({})
        elif entry is not None and expected in (None, entry[0]):
            one = (
                f"WITH head AS (UPDATE {t} SET state = %s, version = version + 1, "
                "updated_at = now(), title = COALESCE(%s, title) "
                f"WHERE id = %s AND version = %s AND gen = %s{relaxed} RETURNING version, gen)",
                (state.head, title, session_id, entry[0], entry[1]),
            )
            changes = state.changes_since(entry[2])
        try:
            if one is not None:
                items_sql, items_params = self._gated_items(session_id, *changes)
                row = await self._fetch(
                    one[0] + items_sql + " SELECT version, gen FROM head", one[1] + items_params
                )
                if row is not None:
                    self.known.put(session_id, int(row[0]), row[1], state.logs)
                    return int(row[0])
            if expected == 0:
                raise SessionConflictError(
                    session_id, 0, await self.version(session_id), self.backend
                )
            # Nothing known, or the row moved on since (a conflict, or a save through
            # another store object): the head's write first, then compare with the digests.
            row = await self._write_compared(session_id, state, expected, title, gen, relaxed)
        except BaseException:
            self.known.drop(session_id)  # committed or not: unknown here
            raise
        if row is None:  # nothing was written; the connection is back in the pool
            actual = await self.version(session_id)
            raise SessionConflictError(session_id, expected or 0, actual, self.backend)
        self.known.put(session_id, int(row[0]), row[1], state.logs)  # committed
        return int(row[0])

    def _gated_items(
        self,
        session_id: str,
        upserts: list[tuple[str, int, bytes, str]],
        cuts: list[tuple[str, int]],
    ) -> tuple[str, tuple[object, ...]]:
        """CTEs that write ``upserts`` and apply ``cuts`` only if the ``head`` CTE wrote."""
        items = self.items
        sql = ""
        params: tuple[object, ...] = ()
        if cuts:
            sql += (
                f", cut AS (DELETE FROM {items} AS i USING head, "
                "unnest(%s::text[], %s::integer[]) AS c(log, n) "
                "WHERE i.id = %s AND i.log = c.log AND i.idx >= c.n)"
            )
            params += ([log for log, _ in cuts], [n for _, n in cuts], session_id)
        if upserts:
            logs, indexes, digests, texts = (list(column) for column in zip(*upserts, strict=True))
            sql += (
                f", put AS (INSERT INTO {items} AS i (id, log, idx, digest, item) "
                "SELECT %s::text, u.* FROM head, "
                "unnest(%s::text[], %s::integer[], %s::bytea[], %s::text[]) AS u "
                "ON CONFLICT (id, log, idx) DO UPDATE SET digest = EXCLUDED.digest, "
                "item = EXCLUDED.item)"
            )
            params += (session_id, logs, indexes, digests, texts)
        return sql, params

    async def _write_compared(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        gen: str,
        relaxed: str,
    ) -> TupleRow | None:
        """The head's versioned write, then the items compared with the stored digests.

        One transaction; returns the head's ``(version, gen)``, or None on a conflict.
        """
        t = self.table
        if expected is None:
            sql = (
                f"INSERT INTO {t} AS t (id, state, version, title, gen) "
                f"SELECT %s::text, %s::text, 1, %s::text, %s::text WHERE true{relaxed} "
                "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, "
                "version = t.version + 1, updated_at = now(), "
                "title = COALESCE(EXCLUDED.title, t.title), gen = COALESCE(t.gen, EXCLUDED.gen) "
                "RETURNING version, gen"
            )
            params: tuple[object, ...] = (session_id, state.head, title, gen)
        else:
            sql = (
                f"UPDATE {t} SET state = %s, version = version + 1, updated_at = now(), "
                f"title = COALESCE(%s, title), gen = COALESCE(gen, %s) "
                f"WHERE id = %s AND version = %s{relaxed} RETURNING version, gen"
            )
            params = (state.head, title, gen, session_id, expected)
        async with self.connection() as conn, conn.transaction():
            row = await (await conn.execute(sql, params)).fetchone()
            if row is not None:
                await self._write_items(conn, session_id, state)
        return row

    async def _write_items(
        self,
        conn: AsyncConnection[TupleRow],
        session_id: str,
        state: EncodedState,
    ) -> None:
        """Write the items whose stored digest differs; cut the logs that shrank.

        Runs in the transaction of the head's write (which holds the row's lock).
        """
        items = self.items
        # One row per log, its (index, digest) pairs packed into one bytea: psycopg parses a
        # row per item ten times slower than Python slices a string.
        cursor = await conn.execute(
            f"SELECT log, string_agg(int4send(idx) || digest, ''::bytea) FROM {items} "
            "WHERE id = %s GROUP BY log",
            (session_id,),
        )
        stored: dict[tuple[str, int], bytes] = {}
        for log, packed in await cursor.fetchall():
            for at in range(0, len(packed), 20):
                stored[log, int.from_bytes(packed[at : at + 4])] = packed[at + 4 : at + 20]
        upserts, cuts = state.changes(stored)
        if cuts:
            await conn.execute(
                f"DELETE FROM {items} AS i USING unnest(%s::text[], %s::integer[]) AS c(log, n) "
                "WHERE i.id = %s AND i.log = c.log AND i.idx >= c.n",
                ([log for log, _ in cuts], [n for _, n in cuts], session_id),
            )
        if upserts:
            logs, indexes, digests, texts = (list(column) for column in zip(*upserts, strict=True))
            await conn.execute(
                f"INSERT INTO {items} AS i (id, log, idx, digest, item) SELECT %s::text, * FROM "
                "unnest(%s::text[], %s::integer[], %s::bytea[], %s::text[]) "
                "ON CONFLICT (id, log, idx) DO UPDATE SET digest = EXCLUDED.digest, "
                "item = EXCLUDED.item",
                (session_id, logs, indexes, digests, texts),
            )

    async def _read(
        self, session_id: str
    ) -> tuple[str | dict[str, object], int, dict[str, list[str]]] | None:
        # One statement: one snapshot for the head and its items, one row per log (the
        # items joined by newlines, which compact JSON texts never hold).
        row_sql = (
            f"SELECT s.state, s.version, s.gen, g.log, g.n, g.top, g.items FROM {self.table} s "
            "LEFT JOIN LATERAL (SELECT log, count(*) AS n, max(idx) AS top, "
            "string_agg(item, E'\\n' ORDER BY idx) AS items "
            f"FROM {self.items} i WHERE i.id = s.id GROUP BY log) g ON true WHERE s.id = %s"
        )
        async with self.connection() as conn:
            rows = await (await conn.execute(row_sql, (session_id,))).fetchall()
        if not rows:
            return None
        logs: dict[str, list[str]] = {}
        for _, _, _, log, n, top, joined in rows:
            if log is None:  # no items (LEFT JOIN)
                continue
            texts = joined.split("\n")
            if n != top + 1 or len(texts) != n:
                raise StateError(f"session {session_id!r}: the items of log {log} have gaps")
            logs[log] = texts
        self.known.put(session_id, int(rows[0][1]), rows[0][2], logs)
        return str(rows[0][0]), int(rows[0][1]), logs

    async def _exists(self, session_id: str) -> bool:
        row = await self._fetch(f"SELECT 1 FROM {self.table} WHERE id = %s", (session_id,))
        return row is not None

    async def _delete(self, session_id: str) -> bool:
        # The head first: its row lock orders this delete with a save (which locks the head
        # before it touches the items), so the two never deadlock.
        self.known.drop(session_id)
        async with self.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                f"DELETE FROM {self.table} WHERE id = %s RETURNING 1", (session_id,)
            )
            existed = await cursor.fetchone() is not None
            await conn.execute(f"DELETE FROM {self.items} WHERE id = %s", (session_id,))
        return existed

    async def _list_ids(self) -> list[str]:
        async with self.connection() as conn:
            cursor = await conn.execute(f"SELECT id FROM {self.table}")
            return [str(row[0]) for row in await cursor.fetchall()]

    async def _list_page(
        self, prefix: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[SessionInfo]:
        sql = f"SELECT id, version, updated_at, title FROM {self.table} WHERE starts_with(id, %s)"
        params: tuple[object, ...] = (prefix,)
        if after is not None:
            sql += " AND (updated_at, id) < (%s, %s)"
            params += after
        sql += " ORDER BY updated_at DESC, id DESC LIMIT %s"
        async with self.connection() as conn:
            cursor = await conn.execute(sql, (*params, limit))
            rows = await cursor.fetchall()
        return [SessionInfo(str(r[0]), int(r[1]), r[2], r[3]) for r in rows]

    async def updated_at(self, session_id: str) -> datetime | None:
        """When the session was last saved, or None if it does not exist."""
        key = check_session_id(session_id)
        row = await self._fetch(f"SELECT updated_at FROM {self.table} WHERE id = %s", (key,))
        return None if row is None else row[0]

    async def close(self) -> None:
        """Close the pool and its connections (a later operation opens a new pool)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def __repr__(self) -> str:
        return f"PostgresSession({_redact(self.url)!r}, table={self.table!r})"


def _redact(url: str) -> str:
    """Hide a password in a URL (reprs end up in logs)."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)

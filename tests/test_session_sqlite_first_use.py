"""Two processes opening a new SQLite store at once: the WAL switch waits out the other."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentkit.exceptions import SessionError
from agentkit.session import SQLiteSession
from agentkit.session import _sqlite_session as sqlite_module


class _Contended:
    """A connection whose WAL switch meets another process's lock ``times`` times.

    The switch takes an exclusive lock that ignores SQLite's busy timeout, so the loser of
    two workers' first requests on a new file got "database is locked" at once.
    """

    def __init__(self, conn: sqlite3.Connection, times: int) -> None:
        self.conn, self.times = conn, times

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "PRAGMA journal_mode=WAL" and self.times > 0:
            self.times -= 1
            raise sqlite3.OperationalError("database is locked")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def __enter__(self) -> Any:
        return self.conn.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.conn.__exit__(*exc)


def _contend(monkeypatch: pytest.MonkeyPatch, times: int) -> list[float]:
    real_connect = sqlite3.connect
    waits: list[float] = []
    state = {"first": True}

    def connect(*args: Any, **kwargs: Any) -> Any:
        conn = real_connect(*args, **kwargs)
        if state["first"]:  # the store's first connection does the set-up
            state["first"] = False
            return _Contended(conn, times)
        return conn

    monkeypatch.setattr(sqlite_module.sqlite3, "connect", connect)
    monkeypatch.setattr(sqlite_module.time, "sleep", waits.append)
    return waits


async def test_the_wal_switch_retries_while_another_process_holds_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = _contend(monkeypatch, times=3)
    store = SQLiteSession(tmp_path / "t.db", timeout=10)
    assert await store.save_state("s", {"v": 1}) == 1
    assert len(waits) == 3 and waits == sorted(waits)  # backed off, then switched
    assert await store.load_state("s") == {"v": 1}


async def test_the_wal_switch_gives_up_after_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _contend(monkeypatch, times=10**6)
    clock = iter(range(10**6))
    monkeypatch.setattr(sqlite_module.time, "monotonic", lambda: float(next(clock)))
    store = SQLiteSession(tmp_path / "t.db", timeout=5)
    with pytest.raises(SessionError, match="locked"):
        await store.save_state("s", {"v": 1})

"""Bytes a save sends to its store, and its CPU, for a thread of N messages (issue #34).

Run: ``python -m benchmarks.session_delta [--rounds R] [--stores sqlite,postgres,redis]``.
For each store and N in (20, 200): save a served thread's state with N messages, then the
three saves of a served turn (the lease claim: the lease field changes; the commit: 2
messages appended, the lease kept; the release: the lease cleared), each through the
store's public ``save_state``. "Bytes sent" is the sum of the lengths (UTF-8) of every text
and bytes parameter the store passes to its driver: SQLite ``execute``/``executemany``
parameters, psycopg ``execute`` parameters, redis-py ``eval`` arguments (the SQL and the
scripts themselves are not counted: they are constant per save). CPU is
``time.process_time`` around one ``save_state`` (the client process only: the database
servers run in other processes), median of the rounds. The last lines compare encoding
alone: one ``json.dumps`` of the state against ``EncodedState`` (split into head and items,
a dumps and a BLAKE2b digest per item), when this agentkit has it.

Measures whatever agentkit is importable, so the same file measures a checkout before the
change (``PYTHONPATH=<old checkout> python path/to/session_delta.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from agentkit.session import PostgresSession, RedisSession, Session, SQLiteSession

SIZES = (20, 200)
SENT = [0]  # bytes counted by the patched drivers


def _size(value: object) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(_size(v) for v in value)
    return 0


class CountingConnection(sqlite3.Connection):
    """A sqlite3 connection that counts the bytes of the parameters it is given."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        SENT[0] += _size(parameters)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]
        rows = list(parameters)
        SENT[0] += sum(_size(row) for row in rows)
        return super().executemany(sql, rows)


@contextlib.contextmanager
def counting() -> Iterator[None]:
    """Patch the three drivers so that what they are sent is counted in ``SENT``."""
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", CountingConnection)
        return real_connect(*args, **kwargs)

    patches: list[tuple[Any, str, Any]] = [(sqlite3, "connect", connect)]
    with contextlib.suppress(ImportError):
        import psycopg

        real_execute = psycopg.AsyncConnection.execute

        async def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            SENT[0] += _size(list(params or ()))
            return await real_execute(self, query, params, **kw)

        patches.append((psycopg.AsyncConnection, "execute", execute))
    with contextlib.suppress(ImportError):
        import redis.asyncio

        real_eval = redis.asyncio.Redis.eval

        async def eval_(self: Any, script: str, numkeys: int, *args: Any) -> Any:
            SENT[0] += _size(list(args))
            return await real_eval(self, script, numkeys, *args)

        patches.append((redis.asyncio.Redis, "eval", eval_))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def message(i: int) -> dict[str, Any]:
    """A stored message of about 200 bytes (what a short chat turn holds)."""
    role = "user" if i % 2 == 0 else "assistant"
    text = f"message {i}: " + "lorem ipsum dolor sit amet " * 5
    return {"role": role, "name": role, "content": [{"type": "text", "text": text}], "id": i}


def served_thread(n: int) -> dict[str, Any]:
    """A served thread's state (agent + lease + title), shaped like ``ThreadStore``'s."""
    return {
        "schema_version": 1,
        "agent": {
            "schema_version": 3,
            "name": "assistant",
            "memory": {"schema_version": 1, "messages": [message(i) for i in range(n)]},
            "toolkit": {"tools": ["search", "fetch"]},
        },
        "lease": None,
        "title": "a thread",
    }


async def measure(store: Session, n: int, rounds: int) -> dict[str, tuple[int, float]]:
    """Per save kind: (bytes sent, median CPU ms)."""
    samples: dict[str, list[tuple[int, float]]] = {}

    async def save(kind: str, sid: str, state: dict[str, Any]) -> None:
        before, cpu = SENT[0], time.process_time()
        await store.save_state(sid, state)
        cpu = time.process_time() - cpu
        samples.setdefault(kind, []).append((SENT[0] - before, cpu * 1000))

    for r in range(rounds):
        sid = f"bench/{n}/{r}"
        state = served_thread(n)
        await save("first save", sid, state)
        state = copy.deepcopy(state)
        state["lease"] = {"owner": "worker-1", "until": 1234567890.5}
        await save("lease claim", sid, state)
        state["agent"]["memory"]["messages"] += [message(n), message(n + 1)]
        await save("commit (+2)", sid, state)
        state["lease"] = None
        await save("release", sid, state)
    out = {
        kind: (int(statistics.median(b for b, _ in s)), statistics.median(c for _, c in s))
        for kind, s in samples.items()
    }
    turn = [out[k] for k in ("lease claim", "commit (+2)", "release")]
    out["served turn (3 saves)"] = (sum(b for b, _ in turn), sum(c for _, c in turn))
    return out


def encoding(n: int, rounds: int) -> list[str]:
    """One dumps of the whole state vs the split encoding (when available), CPU per call."""
    state = served_thread(n)
    lines = []
    whole = []
    for _ in range(rounds * 20):
        start = time.process_time()
        json.dumps(state, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        whole.append(time.process_time() - start)
    lines.append(f"  encode N={n}: json.dumps whole {statistics.median(whole) * 1e6:.0f} us")
    try:
        from agentkit.session import EncodedState  # type: ignore[attr-defined]
    except ImportError:
        return lines
    split = []
    for _ in range(rounds * 20):
        start = time.process_time()
        EncodedState(state, None, split=True)
        split.append(time.process_time() - start)
    lines.append(f"  encode N={n}: EncodedState split {statistics.median(split) * 1e6:.0f} us")
    return lines


async def run(stores: list[str], rounds: int) -> None:
    from benchmarks import servers
    from benchmarks.common import NotAvailable

    with counting(), tempfile.TemporaryDirectory() as tmp:
        for kind in stores:
            with contextlib.ExitStack() as stack:
                try:
                    if kind == "sqlite":
                        store: Session = SQLiteSession(Path(tmp) / "bench.db")
                    elif kind == "postgres":
                        store = PostgresSession(stack.enter_context(servers.postgres()))
                    else:
                        store = RedisSession(stack.enter_context(servers.redis()))
                except NotAvailable as exc:
                    print(f"{kind}: not available ({exc})")
                    continue
                async with store:
                    for n in SIZES:
                        for save_kind, (sent, cpu) in (await measure(store, n, rounds)).items():
                            print(
                                f"{kind:8} N={n:<3} {save_kind:22} {sent:>8} B  {cpu:6.2f} ms CPU"
                            )
    for n in SIZES:
        print("\n".join(encoding(n, rounds)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    args = parser.parse_args()
    anyio.run(run, args.stores.split(","), args.rounds)


if __name__ == "__main__":
    main()

"""List 10,000 stored threads on SQLite: ``list_sessions`` pages vs loading every thread.

Run: ``python -m benchmarks.session_listing [N]``. Prints one line per method: wall time and
how many states were decoded. The second method is what ``GET /threads`` did before
``list_sessions`` (``list_ids`` then ``load_state`` of each).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import anyio

from agentkit.session import SQLiteSession


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "threads.db"
        store = SQLiteSession(path)
        await store.save_state("serve/u/t0", {})
        state = json.dumps({"agent": {"memory": ["m" * 200] * 20}, "title": "x"})
        rows = [
            (f"serve/u/t{i}", state, f"2025-01-01T00:00:00.{i:06d}+00:00", f"title {i}")
            for i in range(1, count)
        ]
        with sqlite3.connect(path) as conn:
            conn.executemany(
                "INSERT INTO agentkit_sessions (id, state, updated_at, version, title) "
                "VALUES (?, ?, ?, 1, ?)",
                rows,
            )
        conn.close()

        start = time.perf_counter()
        page = await store.list_sessions(prefix="serve/u/", limit=100)
        first = time.perf_counter() - start
        start = time.perf_counter()
        listed, cursor = 0, None
        while True:
            page = await store.list_sessions(prefix="serve/u/", limit=1000, cursor=cursor)
            listed += len(page.sessions)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        every = time.perf_counter() - start
        print(f"list_sessions first page of 100 of {count}: {first * 1000:.1f} ms, 0 states")
        print(f"list_sessions all {listed} in pages of 1000: {every * 1000:.1f} ms, 0 states")

        start = time.perf_counter()
        loaded = [await store.load_state(key) for key in await store.list_ids()]
        full = time.perf_counter() - start
        print(
            f"list_ids + load_state of all {len(loaded)}: {full * 1000:.1f} ms, "
            f"{len(loaded)} states"
        )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)

"""Subprocess half of the session conflict and crash tests.

Usage:
  python tests/_session_conflict_worker.py conflict KIND LOCATION SESSION_ID NAME
      Reads commands from stdin, one per line, and answers one JSON line each:
      ``load`` (load the session into a Box), ``save`` (append NAME to the Box and save).
  python tests/_session_conflict_worker.py hammer DIRECTORY
      Saves a large state to a JSONSession forever (the test SIGKILLs it mid-save).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from agentkit.exceptions import SessionConflictError
from agentkit.session import JSONSession, PostgresSession, RedisSession, Session, SQLiteSession


class Box:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.session_versions: dict[tuple[str, str], int] = {}  # opts in to conflict checks

    def state_dict(self) -> dict[str, Any]:
        return {"items": list(self.items)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.items = list(state["items"])


def open_store(kind: str, location: str) -> Session:
    if kind == "json":
        return JSONSession(location)
    if kind == "sqlite":
        return SQLiteSession(location)
    if kind == "redis":
        url, prefix = location.split("#", 1)
        return RedisSession(url, prefix=prefix)
    url, table = location.rsplit("#", 1)
    return PostgresSession(url, table=table)


def answer(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


async def conflict(kind: str, location: str, sid: str, name: str) -> None:
    box = Box()
    async with open_store(kind, location) as store:
        while line := (await anyio.to_thread.run_sync(sys.stdin.readline)).strip():
            if line == "load":
                found = await store.load(sid, box)
                answer({"found": found, "items": box.items})
            elif line == "save":
                box.items.append(name)
                try:
                    version = await store.save(sid, box)
                except SessionConflictError as exc:
                    answer(
                        {
                            "conflict": str(exc),
                            "expected": exc.expected,
                            "actual": exc.actual,
                            "items": box.items,
                        }
                    )
                else:
                    answer({"version": version, "items": box.items})


async def hammer(directory: str) -> None:
    store = JSONSession(directory)
    box = Box()
    box.items = ["x" * 1000] * 2000  # ~2 MB: a save takes long enough to be cut
    await store.save("big", box, force=True)  # one complete state, then saves to cut
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        box.items[0] = str(n)
        await store.save("big", box, force=True)


if __name__ == "__main__":
    if sys.argv[1] == "conflict":
        anyio.run(conflict, *sys.argv[2:6])
    else:
        anyio.run(hammer, sys.argv[2])

"""Random ids: the one generator for messages, tool calls, runs, responses, protocol messages.

Ids come from one ``os.urandom`` call per 64 ids: the system call was half the cost of
building a message. ``next`` on a list iterator is atomic, so threads never share an id (two
threads that find the pool empty each make their own); a forked child empties the pool it
inherited, so two processes never hand out the same ids. The bytes are the operating
system's cryptographic randomness, but an id names something: a value that grants access
(a nonce, a session capability, a run claim) is made with ``secrets`` where it is used.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

__all__ = ["new_id", "new_id_bytes", "new_uuid"]

_SIZE = 16
_BATCH = 64
_pool: Iterator[bytes] = iter(())


def new_id_bytes() -> bytes:
    """16 fresh random bytes."""
    global _pool
    raw = next(_pool, None)
    if raw is None:
        block = os.urandom(_SIZE * _BATCH)
        pool = iter([block[i : i + _SIZE] for i in range(0, _SIZE * _BATCH, _SIZE)])
        _pool = pool
        raw = next(pool)
    return raw


def new_id(prefix: str = "", nbytes: int = 16) -> str:
    """``prefix`` followed by ``nbytes`` random bytes as lowercase hex (``2 * nbytes`` digits).

    The default is shaped like ``uuid4().hex`` (32 digits).

    Raises:
        ValueError: if ``nbytes`` is not 1 to 16.
    """
    if not 1 <= nbytes <= _SIZE:
        raise ValueError(f"nbytes must be 1 to {_SIZE}, got {nbytes}")
    return prefix + new_id_bytes()[:nbytes].hex()


def new_uuid() -> str:
    """A random (version 4) UUID in its dashed form, for ids a protocol defines as UUIDs."""
    return str(uuid.UUID(bytes=new_id_bytes(), version=4))


def _empty_pool() -> None:
    global _pool
    _pool = iter(())


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_empty_pool)

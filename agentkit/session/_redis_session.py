"""``RedisSession``: sessions as Redis string keys (optional; needs the ``redis`` package).

``redis.asyncio`` is imported on first use, so this module costs nothing when unused. Keys
are ``prefix + session_id``; Redis keys are binary-safe, so ids need no encoding. Each key is
a hash ``{state, version}``; a save is one Lua script (check the version, write, expire), so
it is atomic and a stale save cannot slip in between the check and the write. A plain string
key (written before versions existed) reads as version 1.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentkit.exceptions import SessionConflictError
from agentkit.session._base import Session

__all__ = ["RedisSession"]


# KEYS[1] = the key; ARGV = text, expected version ("" = any), ttl in ms ("" = none).
# Returns the new version, or {-1, stored version} on a conflict.
_WRITE = """
local kind = redis.call('TYPE', KEYS[1]).ok
local current = 0
if kind == 'string' then current = 1
elseif kind == 'hash' then current = tonumber(redis.call('HGET', KEYS[1], 'version')) or 1
end
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= current then return {-1, current} end
if kind ~= 'hash' then redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'version', current + 1)
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3])
else redis.call('PERSIST', KEYS[1]) end
return current + 1
"""

_READ = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'string' then return {redis.call('GET', KEYS[1]), '1'} end
if kind == 'hash' then return redis.call('HMGET', KEYS[1], 'state', 'version') end
return false
"""


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _glob_escape(text: str) -> str:
    """Escape Redis ``SCAN MATCH`` glob characters so ``text`` matches literally."""
    return "".join("\\" + c if c in "*?[]\\^-" else c for c in text)


class RedisSession(Session):
    """Sessions stored in Redis under ``prefix + session_id``.

    Args:
        url: A Redis URL (``redis://localhost:6379/0``, ``rediss://...``, ``unix://...``).
        prefix: Key prefix, so several applications can share one database.
        ttl: Expire each session this many seconds after its last save (None: never).
        client: An existing ``redis.asyncio.Redis`` client to use instead of ``url`` (it is
            not closed by :meth:`close`).
        client_kwargs: Extra keyword arguments for ``redis.asyncio.from_url``.

    Raises:
        ImportError: on first use, if the ``redis`` package is not installed.
    """

    backend = "Redis"

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "agentkit:session:",
        ttl: float | None = None,
        client: Any = None,
        client_kwargs: dict[str, object] | None = None,
    ) -> None:
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl must be positive (or None for no expiry)")
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        self._client: Any = client
        self._owns_client = client is None
        self._client_kwargs = client_kwargs or {}

    @property
    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client, created on first use."""
        if self._client is None:
            try:
                redis_asyncio = importlib.import_module("redis.asyncio")
            except ImportError as exc:
                raise ImportError(
                    "RedisSession needs the 'redis' package: pip install 'agentkit[redis]'"
                ) from exc
            self._client = redis_asyncio.from_url(
                self.url, decode_responses=True, **self._client_kwargs
            )
        return self._client

    @property
    def store_key(self) -> str:
        """The URL and the key prefix."""
        return f"redis:{self.url}#{self.prefix}"

    async def _write(self, session_id: str, text: str, expected: int | None) -> int:
        ttl_ms = "" if self.ttl is None else str(max(1, int(self.ttl * 1000)))
        wanted = "" if expected is None else str(expected)
        result = await self.client.eval(_WRITE, 1, self.prefix + session_id, text, wanted, ttl_ms)
        if isinstance(result, list):
            raise SessionConflictError(session_id, expected or 0, int(result[1]), self.backend)
        return int(result)

    async def _read(self, session_id: str) -> tuple[str | dict[str, object], int] | None:
        found = await self.client.eval(_READ, 1, self.prefix + session_id)
        if not found or found[0] is None:
            return None
        return _text(found[0]), int(found[1])

    async def _exists(self, session_id: str) -> bool:
        return bool(await self.client.exists(self.prefix + session_id))

    async def _delete(self, session_id: str) -> bool:
        return bool(await self.client.delete(self.prefix + session_id))

    async def _list_ids(self) -> list[str]:
        ids: list[str] = []
        start = len(self.prefix)
        async for key in self.client.scan_iter(match=_glob_escape(self.prefix) + "*", count=500):
            ids.append(_text(key)[start:])
        return ids

    async def close(self) -> None:
        """Close the connection pool (only if this session created the client)."""
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            await client.aclose()

    def __repr__(self) -> str:
        return f"RedisSession({self.url!r}, prefix={self.prefix!r})"

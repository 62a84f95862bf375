"""``RedisSession``: sessions as Redis hashes (optional; needs the ``redis`` package).

``redis.asyncio`` is imported on first use, so this module costs nothing when unused. Keys
are ``prefix + session_id``; Redis keys are binary-safe, so ids need no encoding. Each key is
a hash ``{state, version, updated_at, title}``; a save is one Lua script (check the version,
write, stamp the server's time, expire), so it is atomic and a stale save cannot slip in
between the check and the write. A plain string key (written before versions existed) reads
as version 1.

Commands go through a bounded pool (``redis.asyncio.BlockingConnectionPool``): at most
``max_connections`` per store object; an operation that finds none free within
``pool_timeout`` seconds raises ``SessionError``, and so does one that cannot reach the
server (after redis-py's own retries). A connection the server dropped is replaced on the next
operation. Subscriptions of the control channel (see :mod:`agentkit.session._control`) use a
client of their own, so held sessions never take the pool's connections.

A save is as durable as the server's persistence: see docs/scaling.md (``appendonly yes`` with
``appendfsync always``, or ``WAITAOF``, for a save that survives a server crash).
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from typing import Any

from agentkit.exceptions import SessionConflictError
from agentkit.session._base import Session, SessionInfo

__all__ = ["RedisSession"]

_EPOCH = datetime.fromtimestamp(0, UTC)


# KEYS[1] = the key; ARGV = text, expected version ("" = any), ttl in ms ("" = none),
# title ("" = keep the stored one, else "=" + title).
# Returns the new version, or {-1, stored version} on a conflict.
_WRITE = """
local kind = redis.call('TYPE', KEYS[1]).ok
local current = 0
if kind == 'string' then current = 1
elseif kind == 'hash' then current = tonumber(redis.call('HGET', KEYS[1], 'version')) or 1
end
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= current then return {-1, current} end
if kind ~= 'hash' then redis.call('DEL', KEYS[1]) end
local now = redis.call('TIME')
local stamp = now[1] .. string.format('%06d', tonumber(now[2]))
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'version', current + 1, 'updated_at', stamp)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'title', string.sub(ARGV[4], 2)) end
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

# KEYS = session keys; returns {version, updated_at in microseconds, title} per key ("" for
# a key gone since the scan; version "0").
_META = """
local out = {}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key).ok
  if kind == 'hash' then
    local m = redis.call('HMGET', key, 'version', 'updated_at', 'title')
    out[i] = {m[1] or '1', m[2] or '0', m[3] or false}
  elseif kind == 'string' then out[i] = {'1', '0', false}
  else out[i] = {'0', '0', false} end
end
return out
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
        max_connections: Most connections the pool opens (operations beyond it wait).
        pool_timeout: Seconds an operation waits for a free connection before it raises
            ``SessionError``.
        client: An existing ``redis.asyncio.Redis`` client to use instead of ``url`` (it is
            not closed by :meth:`close`, and its own pool applies).
        client_kwargs: Extra keyword arguments for the connections (``redis.asyncio``'s
            ``BlockingConnectionPool.from_url``), e.g. ``retry`` or ``socket_timeout``.

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
        max_connections: int = 10,
        pool_timeout: float = 30.0,
        client: Any = None,
        client_kwargs: dict[str, object] | None = None,
    ) -> None:
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl must be positive (or None for no expiry)")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        if pool_timeout <= 0:
            raise ValueError(f"pool_timeout must be positive, got {pool_timeout}")
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self._client: Any = client
        self._owns_client = client is None
        self._subscriber: Any = None
        self._client_kwargs = client_kwargs or {}

    @staticmethod
    def _redis() -> Any:
        try:
            return importlib.import_module("redis.asyncio")
        except ImportError as exc:
            raise ImportError(
                "RedisSession needs the 'redis' package: pip install 'agentkit[redis]'"
            ) from exc

    @property
    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client on the bounded pool, created on first use."""
        if self._client is None:
            redis_asyncio = self._redis()
            pool = redis_asyncio.BlockingConnectionPool.from_url(
                self.url,
                max_connections=self.max_connections,
                timeout=self.pool_timeout,
                decode_responses=True,
                **self._client_kwargs,
            )
            self._client = redis_asyncio.Redis(connection_pool=pool)
        return self._client

    @property
    def subscriber(self) -> Any:
        """The client for long-lived subscriptions (its connections are outside the pool)."""
        if not self._owns_client:
            return self.client
        if self._subscriber is None:
            self._subscriber = self._redis().from_url(
                self.url, decode_responses=True, **self._client_kwargs
            )
        return self._subscriber

    @property
    def store_key(self) -> str:
        """The URL and the key prefix."""
        return f"redis:{self.url}#{self.prefix}"

    async def _write(
        self,
        session_id: str,
        text: str,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        # ``durable`` changes nothing: the server's persistence setting decides (docs/scaling.md).
        ttl_ms = "" if self.ttl is None else str(max(1, int(self.ttl * 1000)))
        wanted = "" if expected is None else str(expected)
        titled = "" if title is None else "=" + title
        key = self.prefix + session_id
        result = await self.client.eval(_WRITE, 1, key, text, wanted, ttl_ms, titled)
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

    async def _list_infos(self, prefix: str) -> list[SessionInfo]:
        # Redis keeps no order by time: every matching key's metadata is fetched (500 keys a
        # script call), never a state, and the base class sorts and pages.
        start = len(self.prefix)
        match = _glob_escape(self.prefix + prefix) + "*"
        keys = [_text(k) async for k in self.client.scan_iter(match=match, count=500)]
        infos: list[SessionInfo] = []
        for i in range(0, len(keys), 500):
            batch = keys[i : i + 500]
            metas = await self.client.eval(_META, len(batch), *batch)
            for key, (version, stamp, title) in zip(batch, metas, strict=True):
                if int(version) == 0:
                    continue  # deleted or expired since the scan
                when = _EPOCH + timedelta(microseconds=int(stamp))
                infos.append(SessionInfo(key[start:], int(version), when, title))
        return infos

    async def close(self) -> None:
        """Close the connection pools (only those this session created)."""
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None:
            await subscriber.aclose()
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            await client.aclose(close_connection_pool=True)

    def __repr__(self) -> str:
        return f"RedisSession({self.url!r}, prefix={self.prefix!r})"

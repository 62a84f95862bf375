"""``RedisSession``: sessions as Redis hashes (optional; needs the ``redis`` package).

``redis.asyncio`` is imported on first use, so this module costs nothing when unused. Keys
are ``prefix + session_id``; Redis keys are binary-safe, so ids need no encoding. Each key is
a hash ``{state, version, updated_at, title, gen, logs}`` plus two fields per message of the
state's logs (its text and its digest; see ``EncodedState``): ``state`` is the head. A save
compares the state with the items this store object last wrote or read for the session
(``KnownItems``; else it reads the stored digests first, one script), then sends the head and
only the messages that changed to a Lua script that checks the version, checks that the
stored items are still the ones compared with (same version and ``gen``, a token drawn when
the hash is created), writes, deletes the messages past each log's new end, stamps the
server's time and expires, all atomically: a stale save cannot slip in between the check
and the write, and a save that finds the items changed since writes nothing and reads the
digests again. A plain
string key (written before versions existed) reads as version 1; a hash written before
logs has no item fields and loads as before.

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
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from agentkit.exceptions import SessionConflictError
from agentkit.session._base import EncodedState, KnownItems, Session, SessionInfo, new_gen

__all__ = ["RedisSession"]

_EPOCH = datetime.fromtimestamp(0, UTC)


# Item fields of a session's hash: "i:" .. log .. ":" .. index (the text) and "d:" .. log ..
# ":" .. index (its digest, hex). A log path is a JSON array, so it ends with "]" and the
# last ":" always separates the index. "logs" = JSON [[log, length], ...]; "gen" = a token
# drawn when the hash is created, so that (gen, version) names one stored content even
# across a delete and a re-creation.

# KEYS[1] = the key; ARGV = head, expected version ("" = any), ttl in ms ("" = none),
# title ("" = keep the stored one, else "=" + title), seen version and gen (seen version ""
# = write every item, no check), the gen for a new hash, the new "logs" ("" = none), then
# (log, index, digest, text) per item to write.
# Returns {new version, gen}, {-1, stored version} on a conflict, {-2, stored version} when
# the stored items are not the ones seen (stale: read them again).
_WRITE = """
local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
local current, gen, logs = 0, '', false
if kind == 'string' then current = 1
elseif kind == 'hash' then
  local m = redis.call('HMGET', key, 'version', 'gen', 'logs')
  current, gen, logs = tonumber(m[1]) or 1, m[2] or '', m[3]
end
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= current then return {-1, current} end
if ARGV[5] ~= '' and (tonumber(ARGV[5]) ~= current or ARGV[6] ~= gen) then
  return {-2, current}
end
if kind ~= 'hash' then redis.call('DEL', key) end
if gen == '' then gen = ARGV[7] end
local now = redis.call('TIME')
local stamp = now[1] .. string.format('%06d', tonumber(now[2]))
redis.call('HSET', key, 'state', ARGV[1], 'version', current + 1, 'updated_at', stamp,
  'gen', gen)
local length = {}
if ARGV[8] ~= '' then
  for _, log in ipairs(cjson.decode(ARGV[8])) do length[log[1]] = log[2] end
  redis.call('HSET', key, 'logs', ARGV[8])
else redis.call('HDEL', key, 'logs') end
if logs then
  for _, log in ipairs(cjson.decode(logs)) do
    for i = (length[log[1]] or 0), log[2] - 1 do
      local suffix = log[1] .. ':' .. i
      redis.call('HDEL', key, 'i:' .. suffix, 'd:' .. suffix)
    end
  end
end
for i = 9, #ARGV, 4 do
  local suffix = ARGV[i] .. ':' .. ARGV[i + 1]
  redis.call('HSET', key, 'i:' .. suffix, ARGV[i + 3], 'd:' .. suffix, ARGV[i + 2])
end
if ARGV[4] ~= '' then redis.call('HSET', key, 'title', string.sub(ARGV[4], 2)) end
if ARGV[3] ~= '' then redis.call('PEXPIRE', key, ARGV[3])
else redis.call('PERSIST', key) end
return {current + 1, gen}
"""

# KEYS[1] = the key; ARGV[1] = "i" (the items' texts) or "d" (their digests). Returns false,
# or {head or "", version, gen, logs or "", the texts joined by newlines or the digests
# concatenated, in the logs' order}. One string, not one reply element per item: redis-py
# parses each element in Python (5 us apiece), and a compact JSON text holds no newline.
_READ = """
local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
if kind == 'string' then return {redis.call('GET', key), '1', '', '', ''} end
if kind ~= 'hash' then return false end
local m = redis.call('HMGET', key, 'state', 'version', 'gen', 'logs')
if not m[1] then return false end
local out, missing = {}, ARGV[1] == 'i' and '' or string.rep('0', 32)
if m[4] then
  for _, log in ipairs(cjson.decode(m[4])) do
    for i = 0, log[2] - 1 do
      out[#out + 1] = redis.call('HGET', key, ARGV[1] .. ':' .. log[1] .. ':' .. i) or missing
    end
  end
end
local head = ARGV[1] == 'i' and m[1] or ''
return {head, m[2], m[3] or '', m[4] or '', table.concat(out, ARGV[1] == 'i' and '\\n' or '')}
"""

_STALE_TRIES = 3  # guarded tries before a save sends every item (always consistent)

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
    splits = True

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
        self.known = KnownItems()

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
        state: EncodedState,
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
        logs = json.dumps([[path, len(texts)] for path, texts in state.logs.items()])
        entry = self.known.get(session_id)
        try:
            for attempt in range(_STALE_TRIES + 1):
                guard = ("", "")  # no check: every item is sent
                if expected == 0:  # a new session: nothing to compare with
                    upserts, _ = state.changes_since({})
                elif attempt == 0 and entry is not None and expected in (None, entry[0]):
                    # What this object last wrote or read, if the hash still holds it.
                    guard = (str(entry[0]), entry[1])
                    upserts, _ = state.changes_since(entry[2])
                elif attempt < _STALE_TRIES:
                    version, gen, stored = await self._seen(key)
                    if expected is not None and int(version) != expected:
                        raise SessionConflictError(session_id, expected, int(version), self.backend)
                    guard = (version, gen)
                    upserts, _ = state.changes(stored)
                else:  # the last try: unchecked, so a save under a storm of writers ends
                    upserts, _ = state.changes({})
                # The script cuts the logs that shrank itself (it reads the stored lengths).
                items: list[str] = []
                for path, i, digest, text in upserts:
                    items += (path, str(i), digest.hex(), text)
                result = await self.client.eval(
                    _WRITE,
                    1,
                    key,
                    state.head,
                    wanted,
                    ttl_ms,
                    titled,
                    *guard,
                    new_gen(),
                    logs if state.logs else "",
                    *items,
                )
                if int(result[0]) > 0:
                    self.known.put(session_id, int(result[0]), _text(result[1]), state.logs)
                    return int(result[0])
                if int(result[0]) == -1:
                    raise SessionConflictError(
                        session_id, expected or 0, int(result[1]), self.backend
                    )
        except BaseException:
            self.known.drop(session_id)  # written or not: unknown here
            raise
        raise AssertionError("the last try writes unchecked")  # pragma: no cover

    async def _seen(self, key: str) -> tuple[str, str, dict[tuple[str, int], bytes]]:
        """The stored ``(version, gen, {(log, index): digest})`` ("0" for none)."""
        found = await self.client.eval(_READ, 1, key, "d")
        if not found:
            return "0", "", {}
        _, version, gen, logs, digests = (_text(v) for v in found)
        stored: dict[tuple[str, int], bytes] = {}
        at = 0
        for path, n in json.loads(logs) if logs else ():
            for i in range(n):
                # A digest field gone missing (corruption) reads as zeros: rewritten.
                stored[path, i] = bytes.fromhex(digests[at : at + 32])
                at += 32
        return version, gen, stored

    async def _read(
        self, session_id: str
    ) -> tuple[str | dict[str, object], int, dict[str, list[str]]] | None:
        found = await self.client.eval(_READ, 1, self.prefix + session_id, "i")
        if not found:
            return None
        head, version, gen, logs_text, joined = (_text(v) for v in found)
        logs: dict[str, list[str]] = {}
        if logs_text:
            texts = joined.split("\n")
            at = 0
            for path, n in json.loads(logs_text):
                logs[path] = texts[at : at + n]
                at += n
        self.known.put(session_id, int(version), gen or None, logs)
        return head, int(version), logs

    async def _exists(self, session_id: str) -> bool:
        return bool(await self.client.exists(self.prefix + session_id))

    async def _delete(self, session_id: str) -> bool:
        self.known.drop(session_id)
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

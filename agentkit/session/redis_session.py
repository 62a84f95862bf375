"""``RedisSession``: sessions as Redis string keys (optional; needs the ``redis`` package).

``redis.asyncio`` is imported on first use, so this module costs nothing when unused. Keys
are ``prefix + session_id``; Redis keys are binary-safe, so ids need no encoding. A ``SET``
is atomic, so concurrent saves of one id leave one complete state (the last one).
"""

from __future__ import annotations

import importlib
from typing import Any

from agentkit.session.base import Session

__all__ = ["RedisSession"]


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
        client_kwargs: dict[str, Any] | None = None,
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

    async def _write(self, session_id: str, text: str) -> None:
        ttl_ms = None if self.ttl is None else max(1, int(self.ttl * 1000))
        await self.client.set(self.prefix + session_id, text, px=ttl_ms)

    async def _read(self, session_id: str) -> str | None:
        value = await self.client.get(self.prefix + session_id)
        if value is None:
            return None
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    async def _exists(self, session_id: str) -> bool:
        return bool(await self.client.exists(self.prefix + session_id))

    async def _delete(self, session_id: str) -> bool:
        return bool(await self.client.delete(self.prefix + session_id))

    async def _list_ids(self) -> list[str]:
        ids: list[str] = []
        start = len(self.prefix)
        async for key in self.client.scan_iter(match=_glob_escape(self.prefix) + "*", count=500):
            name = key.decode("utf-8") if isinstance(key, bytes) else str(key)
            ids.append(name[start:])
        return ids

    async def close(self) -> None:
        """Close the connection pool (only if this session created the client)."""
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            await client.aclose()

    def __repr__(self) -> str:
        return f"RedisSession({self.url!r}, prefix={self.prefix!r})"

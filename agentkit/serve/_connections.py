"""A guard on uvicorn's connections: slow clients cannot hold the server's sockets.

uvicorn (0.3x-0.5x) has a keep-alive timeout between requests but none while a request's
headers or body arrive, and no cap on connections per client: 300 sockets that each send a
header byte every few seconds (slowloris) hold 300 file descriptors for ever, and under
``ulimit -n 256`` nobody else gets in. :func:`guarded_protocol` wraps uvicorn's HTTP
protocol class (whichever implementation it picked) with:

* a **header timeout**: a connection whose request headers are not complete
  ``header_timeout`` seconds after it opened (or after its previous response) is closed;
* a **body timeout**: a request whose body stalls for ``body_timeout`` seconds is closed;
* **caps**: at most ``per_client`` connections per peer address and ``total`` in all.
  At a cap, the oldest connection still waiting for its headers (a slow one: a real client
  sends its headers at once) is closed to make room; a connection is refused only when
  every one is busy with a request.

One timer per server sweeps every second; the bookkeeping is a few attribute writes per
``data_received``. Behind a proxy every connection has the proxy's address: raise
``per_client`` there (the proxy has its own limits), see docs/scaling.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["ConnectionGuard", "ConnectionLimits", "default_total", "guarded_protocol"]

SWEEP_INTERVAL = 1.0


def default_total() -> int:
    """Connections allowed in all: three quarters of the file descriptor limit."""
    try:
        import resource  # POSIX only
    except ImportError:  # pragma: no cover - Windows: no such limit to stay under
        return 4096
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 4096
    return max(16, soft * 3 // 4 - 16)  # the rest: the store, the model's connections, logs


class ConnectionLimits:
    """The guard's settings (see the module docs).

    Args:
        header_timeout: Seconds for a request's headers to arrive.
        body_timeout: Seconds a request body may stall between two reads.
        per_client: Most connections one peer address may hold.
        total: Most connections in all (default: from the file descriptor limit).
    """

    def __init__(
        self,
        header_timeout: float = 8.0,
        body_timeout: float = 30.0,
        per_client: int = 64,
        total: int | None = None,
    ) -> None:
        if header_timeout <= 0 or body_timeout <= 0 or per_client < 1:
            raise ValueError("timeouts must be > 0 and per_client >= 1")
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.per_client = per_client
        self.total = total if total is not None else default_total()


class _Conn:
    __slots__ = ("cycle", "host", "proto", "since", "transport", "waiting_headers")

    def __init__(self, proto: object, transport: asyncio.BaseTransport, host: str) -> None:
        self.proto = proto
        self.transport = transport
        self.host = host
        self.since = time.monotonic()  # start of the current phase (headers, or body)
        self.waiting_headers = True
        self.cycle: object = None


class ConnectionGuard:
    """Tracks the server's connections; closes slow ones, enforces the caps."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.conns: dict[int, _Conn] = {}
        self.by_host: dict[str, dict[int, _Conn]] = {}
        self.closed_slow = 0  # counters, for tests and monitoring
        self.refused = 0
        self._timer: asyncio.TimerHandle | None = None

    def opened(self, proto: object, transport: asyncio.BaseTransport) -> bool:
        """A new connection; False when it must be refused (closed at once)."""
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
        mine = self.by_host.get(host, {})
        if len(mine) >= self.limits.per_client and not self._evict(mine.values()):
            self.refused += 1
            return False
        if len(self.conns) >= self.limits.total and not self._evict(self.conns.values()):
            self.refused += 1
            return False
        conn = _Conn(proto, transport, host)
        self.conns[id(proto)] = conn
        self.by_host.setdefault(host, {})[id(proto)] = conn
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(SWEEP_INTERVAL, self._sweep)
        return True

    def progressed(self, proto: object) -> None:
        """Data arrived: note whether the connection's request has its headers now."""
        conn = self.conns.get(id(proto))
        if conn is None:
            return
        cycle = getattr(proto, "cycle", None)
        now = time.monotonic()
        if cycle is not None and cycle is not conn.cycle:  # a new request's headers are in
            conn.cycle, conn.waiting_headers, conn.since = cycle, False, now
        elif not conn.waiting_headers and _request_done(cycle):  # the next request begins
            conn.waiting_headers, conn.since = True, now
        elif not conn.waiting_headers:
            conn.since = now  # body bytes: the body timeout counts from the last ones

    def closed(self, proto: object) -> None:
        """The connection is gone."""
        conn = self.conns.pop(id(proto), None)
        if conn is None:
            return
        mine = self.by_host.get(conn.host)
        if mine is not None:
            mine.pop(id(proto), None)
            if not mine:
                del self.by_host[conn.host]

    def _evict(self, candidates: Iterable[_Conn]) -> bool:
        """Close the oldest connection still waiting for headers; False when none is."""
        slow = [c for c in candidates if c.waiting_headers]
        if not slow:
            return False
        self._close(min(slow, key=lambda c: c.since))
        return True

    def _close(self, conn: _Conn) -> None:
        self.closed_slow += 1
        self.closed(conn.proto)
        conn.transport.close()

    def _sweep(self) -> None:
        now = time.monotonic()
        limits = self.limits
        for conn in list(self.conns.values()):
            if conn.waiting_headers:
                if now - conn.since > limits.header_timeout:
                    self._close(conn)
            elif _reading_body(conn.proto) and now - conn.since > limits.body_timeout:
                self._close(conn)
            elif _request_done(getattr(conn.proto, "cycle", None)):
                conn.waiting_headers, conn.since = True, now  # keep-alive: uvicorn's timer
        self._timer = None
        if self.conns:
            self._timer = asyncio.get_running_loop().call_later(SWEEP_INTERVAL, self._sweep)


def _request_done(cycle: object) -> bool:
    return cycle is not None and bool(getattr(cycle, "response_complete", False))


def _reading_body(proto: object) -> bool:
    cycle = getattr(proto, "cycle", None)
    return cycle is not None and bool(getattr(cycle, "more_body", False))


def guarded_protocol(base: type[asyncio.Protocol], guard: ConnectionGuard) -> type[Any]:
    """A subclass of uvicorn's HTTP protocol class ``base`` that reports to ``guard``."""
    parent: Any = base

    class Guarded(parent):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:
            if not guard.opened(self, transport):
                transport.close()  # over a cap with every connection busy: refused
                self._refused = True
                return
            self._refused = False
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            super().data_received(data)
            guard.progressed(self)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self)
            if not self._refused:
                super().connection_lost(exc)

    Guarded.__name__ = f"Guarded{base.__name__}"
    return Guarded

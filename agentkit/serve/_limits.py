"""Per-client caps of the serve app: how many runs one client may have going at once.

A run holds a model, tools and a task for as long as it lasts; without a cap, one token
can start hundreds at once (one per new thread) and take the server from everyone else.
The client is the authenticated owner (a token, or a user of a token mapping) when the app
has tokens, else the peer address (behind a proxy, have uvicorn take the client address from
``X-Forwarded-For``: ``--proxy-headers --forwarded-allow-ips``, see docs/scaling.md).
"""

from __future__ import annotations

from starlette.requests import Request

from agentkit.serve._convert import ClientInputError

__all__ = ["DEFAULT_MAX_RUNS_PER_CLIENT", "RETRY_AFTER_S", "RunSlot", "RunsPerClient"]

DEFAULT_MAX_RUNS_PER_CLIENT = 8
RETRY_AFTER_S = 2
"""Seconds a refused client is told to wait (``Retry-After``): about one reply's length."""


class RunSlot:
    """One client's claim on one run; :meth:`release` it when the run has ended (idempotent)."""

    __slots__ = ("_client", "_limits")

    def __init__(self, limits: RunsPerClient | None, client: str) -> None:
        self._limits = limits
        self._client = client

    def release(self) -> None:
        """Give the slot back (a second call does nothing)."""
        limits, self._limits = self._limits, None
        if limits is not None:
            limits.release(self._client)


class RunsPerClient:
    """Counts live runs per client; refuses one over ``limit`` with 429 and ``Retry-After``.

    Args:
        limit: Most runs one client may have going at once (None: no cap).
        by_owner: Tell clients apart by their authenticated owner (the app has tokens);
            else by peer address.
    """

    def __init__(self, limit: int | None, *, by_owner: bool) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"max_runs_per_client must be >= 1 or None, got {limit!r}")
        self.limit = limit
        self.by_owner = by_owner
        self.live: dict[str, int] = {}

    def client(self, request: Request, owner: str) -> str:
        """The client a request counts against."""
        if self.by_owner:
            return owner
        return f"peer:{request.client.host if request.client else 'unknown'}"

    def acquire(self, request: Request, owner: str) -> RunSlot:
        """Claim a run slot for the request's client.

        Raises:
            ClientInputError: 429 ``too_many_runs`` (with ``Retry-After``) at the cap.
        """
        client = self.client(request, owner)
        if self.limit is None:
            return RunSlot(None, client)
        count = self.live.get(client, 0)
        if count >= self.limit:
            raise ClientInputError(
                429,
                "too_many_runs",
                f"this client already has {count} replies running (the limit is {self.limit}); "
                "wait for one to finish",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        self.live[client] = count + 1
        return RunSlot(self, client)

    def release(self, client: str) -> None:
        """One run of ``client`` ended."""
        count = self.live.get(client, 0) - 1
        if count > 0:
            self.live[client] = count
        else:
            self.live.pop(client, None)

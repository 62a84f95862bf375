"""A bounded in-memory event store: resumable SSE streams for the streamable-HTTP server.

With it, the server gives every SSE event an id, and a client that lost a stream mid-call
reconnects with ``Last-Event-ID`` and gets what it missed (SEP-1699). Memory is bounded: only
the last ``max_events`` events are kept (older ones cannot be replayed).
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.streamable_http import EventCallback

__all__ = ["memory_event_store"]


def memory_event_store(max_events: int = 10_000) -> Any:
    """A new :class:`MemoryEventStore` (the SDK base class is imported lazily)."""
    from mcp.server.streamable_http import EventMessage, EventStore

    class MemoryEventStore(EventStore):
        """Events per stream, in order; the oldest dropped past ``max_events``."""

        def __init__(self) -> None:
            self._events: deque[tuple[str, int, Any]] = deque(maxlen=max_events)
            self._ids = itertools.count(1)

        async def store_event(self, stream_id: str, message: Any) -> str:
            event_id = next(self._ids)
            self._events.append((stream_id, event_id, message))
            return str(event_id)

        async def replay_events_after(
            self, last_event_id: str, send_callback: EventCallback
        ) -> str | None:
            try:
                after = int(last_event_id)
            except ValueError:
                return None
            stream = next((s for s, i, _ in self._events if i == after), None)
            if stream is None:
                return None
            for sid, event_id, message in list(self._events):
                if sid == stream and event_id > after and message is not None:
                    await send_callback(EventMessage(message, str(event_id)))
            return stream

    return MemoryEventStore()

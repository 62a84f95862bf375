"""W3C trace context across A2A: ``traceparent`` out on requests, continued on the server.

Both halves are ``agentkit.observability``'s (``trace_headers`` written by an httpx request
hook here, ``continue_trace`` around a served task): they act only while instrumented.
"""

from __future__ import annotations

import httpx

from agentkit.observability import continue_trace, trace_headers

__all__ = ["add_trace_hook", "continue_trace"]


async def _inject(request: httpx.Request) -> None:
    """An httpx request hook: the current span's context as headers of ``request``."""
    request.headers.update(trace_headers())


def add_trace_hook(http: httpx.AsyncClient) -> None:
    """Make every request of ``http`` carry the caller's trace context (once per client)."""
    hooks = http.event_hooks
    requests = list(hooks.get("request", []))
    if _inject not in requests:
        hooks["request"] = [*requests, _inject]
        http.event_hooks = hooks

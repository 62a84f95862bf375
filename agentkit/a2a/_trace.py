"""W3C trace context across A2A: ``traceparent`` out on requests, continued on the server.

Both halves act only while :func:`agentkit.observability.instrument` is in effect, and import
OpenTelemetry only then (it is the optional ``otel`` extra). The headers are written and read
by OpenTelemetry's global propagator (W3C ``traceparent``/``tracestate`` by default, or
whatever the application configured), so agentkit keeps no trace format of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import httpx

from agentkit.observability import is_instrumented

__all__ = ["add_trace_hook", "continue_trace"]


async def _inject(request: httpx.Request) -> None:
    """An httpx request hook: the current span's context as headers of ``request``."""
    if not is_instrumented():
        return
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    request.headers.update(carrier)


def add_trace_hook(http: httpx.AsyncClient) -> None:
    """Make every request of ``http`` carry the caller's trace context (once per client)."""
    hooks = http.event_hooks
    requests = list(hooks.get("request", []))
    if _inject not in requests:
        hooks["request"] = [*requests, _inject]
        http.event_hooks = hooks


@contextlib.contextmanager
def continue_trace(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Make the trace context of an incoming request's ``headers`` current while it runs.

    Without instrumentation, headers, or a valid ``traceparent`` in them, nothing changes
    (the run's spans start a trace of their own, or follow one already current).
    """
    if not headers or not is_instrumented():
        yield
        return
    from opentelemetry import context, trace
    from opentelemetry.propagate import extract

    incoming = extract({k.lower(): v for k, v in headers.items()})
    if not trace.get_current_span(incoming).get_span_context().is_valid:
        yield
        return
    token = context.attach(incoming)
    try:
        yield
    finally:
        context.detach(token)

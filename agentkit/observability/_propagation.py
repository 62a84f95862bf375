"""W3C trace context across processes: continue the trace an incoming request names.

Every served protocol (AG-UI in ``agentkit.serve``, A2A in ``agentkit.a2a``) runs its agent
under the ``traceparent``/``tracestate`` headers of the request that started it, so one
trace spans browser -> agent -> remote agent -> tool server. Outgoing requests carry the
current context the other way: A2A through an httpx request hook, MCP in ``params._meta``
(the mcp SDK writes it, and reads it back on agentkit's own MCP server).

Acts only while :func:`agentkit.observability.instrument` is in effect, and imports
OpenTelemetry only then (the optional ``otel`` extra). The headers are read and written by
OpenTelemetry's global propagator (W3C trace context by default, or whatever the
application configured), so agentkit keeps no trace format of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from agentkit._seams import installed

__all__ = ["continue_trace", "trace_headers"]


@contextlib.contextmanager
def continue_trace(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Make the trace context of an incoming request's ``headers`` current while it runs.

    Tasks started inside the block inherit it (their context is copied at start). Without
    instrumentation, headers, or a valid ``traceparent`` in them, nothing changes (the
    run's spans start a trace of their own, or follow one already current).

    Example:
        >>> with continue_trace(request.headers):  # doctest: +SKIP
        ...     await agent.run(msg)  # its invoke_agent span is the caller's child
    """
    if not headers or installed() is None:
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


def trace_headers() -> dict[str, str]:
    """The current trace context as headers for an outgoing request (empty when off)."""
    if installed() is None:
        return {}
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier

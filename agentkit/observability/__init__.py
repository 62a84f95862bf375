"""See what agents do: OpenTelemetry traces and metrics (GenAI semantic conventions).

Call :func:`instrument` once at start-up. Until then (and without the ``agentkit[otel]``
extra) nothing here imports OpenTelemetry and the agent loop pays one global read per seam.

Example:
    >>> from agentkit.observability import instrument
    >>> instrument()  # doctest: +SKIP  (spans go to the global TracerProvider)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._seams import conversation, current_conversation, install, installed
from agentkit.observability._propagation import continue_trace, trace_headers

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = [
    "continue_trace",
    "conversation",
    "current_conversation",
    "instrument",
    "is_instrumented",
    "trace_headers",
    "uninstrument",
]


def instrument(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool = False,
) -> None:
    """Trace every agent reply, model request and tool call of this process.

    Spans follow the OpenTelemetry GenAI conventions: ``invoke_agent {agent}``,
    ``chat {model}``, ``execute_tool {tool}``; metrics ``gen_ai.client.token.usage`` and
    ``gen_ai.client.operation.duration``. Calling it again replaces the configuration.

    Args:
        tracer_provider: Where spans go (None: the global ``TracerProvider``, so an
            application that sets it up later is still followed).
        meter_provider: Where metrics go (None: the global ``MeterProvider``).
        capture_content: Also record prompts, answers, tool arguments and tool results on
            the spans. Off by default: they may hold personal or secret data.

    Raises:
        ImportError: when ``opentelemetry-api`` is not installed (``pip install
            'agentkit[otel]'``).
    """
    try:
        from agentkit.observability._otel import OTelInstrumentation
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ImportError(
            "agentkit.observability.instrument() needs opentelemetry-api: "
            "pip install 'agentkit[otel]'"
        ) from exc
    install(OTelInstrumentation(tracer_provider, meter_provider, capture_content))


def uninstrument() -> None:
    """Stop tracing (the seams go back to no-ops)."""
    install(None)


def is_instrumented() -> bool:
    """Whether :func:`instrument` is in effect."""
    return installed() is not None

"""The OpenTelemetry implementation of the loop's seams (GenAI semantic conventions).

Imported only by :func:`agentkit.observability.instrument`. Spans:

- ``invoke_agent {agent}`` (INTERNAL) per reply, with the run's total usage at the end;
- ``chat {model}`` (CLIENT) per model request, with usage, finish reason, cost;
- ``execute_tool {tool}`` (INTERNAL) per tool call; concurrent calls are siblings under the
  reply's span (each call's task starts from the reply's context). MCP tools add
  ``mcp.method.name`` and the server's address (HTTP) or command (stdio).

Interrupts, approvals asked for and denied calls are events on the reply's span; a call or
request cut by an interrupt ends with an ERROR status and ``error.type="interrupted"``.

Each seam returns a small context-manager object rather than a generator-based one: the
instrumentation runs twice per turn, and a generator frame plus ``contextlib``'s wrapper
cost more than the attribute work itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from agentkit._seams import EventValue, Instrumentation, current_conversation
from agentkit._version import __version__
from agentkit.agent._result import stop_reason as run_stop_reason
from agentkit.observability._content import dumps as content_dumps
from agentkit.observability._content import (
    request_attributes,
    response_attributes,
    result_parts,
)
from agentkit.observability._otel_attributes import (
    Attributes,
    chat_attributes,
    metric_attributes,
    tool_attributes,
)

if TYPE_CHECKING:
    from agentkit.agent._react import ReActAgent
    from agentkit.agent._state import Run
    from agentkit.messages import Msg
    from agentkit.models._base import ChatResponse
    from agentkit.tools._response import ToolResponse
    from agentkit.tools._toolkit import Toolkit

__all__ = ["OTelInstrumentation"]

_SCOPE = "agentkit"
# Bucket boundaries the GenAI metric conventions recommend.
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                     40.96, 81.92)  # fmt: skip
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                  16777216, 67108864)  # fmt: skip


_CUT = {"interrupted": "interrupted by the user", "cancelled": "cancelled"}


def _error_type(exc: BaseException, run: Run | None) -> str:
    import anyio

    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "interrupted" if run is not None and run.control.interrupted else "cancelled"
    return type(exc).__qualname__


def _fail(span: trace.Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute("error.type", error_type)
    # A cancellation's message names tasks and scopes: useless, and different every run.
    span.set_status(Status(StatusCode.ERROR, _CUT.get(error_type) or description or error_type))


class _Scope:
    """A span started and made current by ``__enter__``, ended by ``__exit__``.

    Subclasses fill the span on exit (``_finish``); an exception is recorded on the span
    and propagates.
    """

    __slots__ = ("_start", "_token", "span")

    span: trace.Span

    def __init__(
        self,
        tracer: trace.Tracer,
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, AttributeValue],
        parent: otel_context.Context | None = None,
    ) -> None:
        self._start = (tracer, name, kind, attributes, parent)

    def __enter__(self) -> None:
        tracer, name, kind, attributes, parent = self._start
        self.span = span = tracer.start_span(name, parent, kind, attributes)
        self._token = otel_context.attach(trace.set_span_in_context(span, parent))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self.span
        try:
            self._finish(span, exc)
        finally:
            otel_context.detach(self._token)
            span.end()

    def _finish(self, span: trace.Span, exc: BaseException | None) -> None:
        if exc is not None:
            _fail(span, _error_type(exc, None), str(exc) or None)


class _RunScope(_Scope):
    """The ``invoke_agent {agent}`` span of one reply."""

    __slots__ = ("agent", "run")

    def __init__(self, tracer: trace.Tracer, agent: ReActAgent[Any, Any], run: Run) -> None:
        attributes: Attributes = {
            **chat_attributes(agent.model),
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": str(agent.name),
        }
        conversation = current_conversation()
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        self.agent = agent
        self.run = run
        super().__init__(tracer, f"invoke_agent {agent.name}", SpanKind.INTERNAL, attributes)

    def _finish(self, span: trace.Span, exc: BaseException | None) -> None:
        run = self.run
        if exc is not None:
            _fail(span, _error_type(exc, run), str(exc) or None)
            stop_reason = "error"
        elif run.control.interrupted:
            span.add_event("agentkit.interrupted")
            stop_reason = "interrupted"
        else:
            stop_reason = run_stop_reason(run, False, bool(self.agent.pending_tool_calls))
        span.set_attributes(_run_end_attributes(run, stop_reason))


def _run_end_attributes(run: Run, stop_reason: str) -> Attributes:
    usage = run.outcome.usage
    attributes: Attributes = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "agentkit.iterations": run.iteration,
        "agentkit.stop_reason": stop_reason,
    }
    if run.usage_limit is not None:
        attributes["agentkit.usage_limit"] = run.usage_limit
    cost = getattr(usage, "cost", None)
    if cost is not None:
        attributes["agentkit.usage.cost"] = cost
    # Which model answered (a FallbackModel's choice), as on the chat spans.
    answered = run.outcome.answered_by
    if answered is not None:
        attributes["gen_ai.response.model"] = answered
    models = run.counts.models
    if models:
        attributes["agentkit.models"] = list(models)
    return attributes


class _ChatScope(_Scope):
    """The ``chat {model}`` span of one model request; the answer is in ``run.turn.partial``."""

    __slots__ = ("instrumentation", "request", "run", "started")

    def __init__(self, instrumentation: OTelInstrumentation, request: Attributes, run: Run) -> None:
        self.instrumentation = instrumentation
        self.request = request
        self.run = run
        name = "chat " + str(request["gen_ai.request.model"])
        super().__init__(instrumentation.tracer, name, SpanKind.CLIENT, request)

    def __enter__(self) -> None:
        super().__enter__()
        self.started = time.perf_counter()

    def _finish(self, span: trace.Span, exc: BaseException | None) -> None:
        elapsed = time.perf_counter() - self.started
        error: str | None = None
        if exc is not None:
            error = _error_type(exc, self.run)
            _fail(span, error, str(exc) or None)
        response = self.run.turn.partial
        response_model: str | None = None
        if response is not None:
            response_model = self._describe(span, response)
        self.instrumentation.record(self.request, response, response_model, error, elapsed)

    def _describe(self, span: trace.Span, response: ChatResponse) -> str:
        """Set the answer's attributes on the span; returns the model that answered."""
        metadata = response.metadata or {}
        model = str(metadata.get("model") or self.request["gen_ai.request.model"])
        attributes: Attributes = {
            "gen_ai.response.model": model,
            "gen_ai.response.id": str(response.id),
        }
        reason = metadata.get("finish_reason")
        if isinstance(reason, str):
            attributes["gen_ai.response.finish_reasons"] = (reason,)
        if self.instrumentation.capture_content:
            attributes.update(response_attributes(response.content, reason))
        usage = response.usage
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            cost = usage.cost
            if cost is not None:
                attributes["agentkit.usage.cost"] = cost
        span.set_attributes(attributes)  # one call: the SDK takes its lock once
        return model


class _ToolScope(_Scope):
    """The ``execute_tool {tool}`` span of call ``run.batch[index]``."""

    __slots__ = ("capture", "index", "run")

    def __init__(
        self,
        instrumentation: OTelInstrumentation,
        run: Run,
        index: int,
        toolkit: Toolkit | None,
    ) -> None:
        call = (run.batch or [])[index]
        name = str(call["name"])
        tool = toolkit.get_tool(name) if toolkit is not None else None
        attributes: Attributes = {
            **tool_attributes(name, tool),
            "gen_ai.tool.call.id": str(call["id"]),
        }
        self.capture = instrumentation.capture_content
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = content_dumps(call.get("input"))
        self.run = run
        self.index = index
        tracer = instrumentation.tracer
        super().__init__(tracer, f"execute_tool {name}", SpanKind.INTERNAL, attributes)

    def _finish(self, span: trace.Span, exc: BaseException | None) -> None:
        run = self.run
        if exc is not None:
            _fail(span, _error_type(exc, run), str(exc) or None)
            return
        results = run.calls.results
        result = results[self.index] if self.index < len(results) else None
        if result is not None:
            _end_tool(span, result, self.capture)


def _end_tool(span: trace.Span, result: ToolResponse, capture: bool) -> None:
    if capture:
        span.set_attribute("gen_ai.tool.call.result", result_parts(result.content))
    if result.is_interrupted:
        _fail(span, "interrupted", "interrupted by the user")
    elif result.is_error:
        kind = (result.metadata or {}).get("error")
        _fail(span, str(kind or "tool_error"), result.get_text()[:200] or None)


class OTelInstrumentation(Instrumentation):
    """Spans and metrics on an OpenTelemetry tracer and meter.

    Args:
        tracer_provider: Where spans go (None: the global provider, looked up per span).
        meter_provider: Where metrics go (None: the global provider).
        capture_content: Record prompts, answers, tool arguments and results on the spans.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider)
        meter = metrics.get_meter(_SCOPE, __version__, meter_provider)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        self.capture_content = capture_content

    # The seams pass the loop's objects as ``object`` (agentkit._seams sits below the agent
    # package); these are the agent's own ReActAgent, Run and Toolkit.
    def run_span(self, agent: object, run: object) -> _Scope:
        """The ``invoke_agent {agent}`` span of one reply."""
        return _RunScope(self.tracer, cast("ReActAgent[Any, Any]", agent), cast("Run", run))

    def model_span(
        self,
        agent: object,
        run: object,
        messages: Sequence[Msg],
        tools: Sequence[object] | None,
    ) -> _Scope:
        """The ``chat {model}`` span of one model request; the answer is in ``run.turn.partial``."""
        request = chat_attributes(cast("ReActAgent[Any, Any]", agent).model)
        if self.capture_content:
            request = {**request, **request_attributes(messages)}
        return _ChatScope(self, request, cast("Run", run))

    def record(
        self,
        request: Attributes,
        response: ChatResponse | None,
        response_model: str | None,
        error: str | None,
        elapsed: float,
    ) -> None:
        """Record one request's duration and token usage on the GenAI metrics."""
        sets = metric_attributes(request, response_model, error)
        usage = response.usage if response is not None else None
        if usage is not None:
            self.tokens.record(usage.input_tokens, sets.input_tokens)
            self.tokens.record(usage.output_tokens, sets.output_tokens)
        self.duration.record(elapsed, sets.duration)

    def tool_span(self, agent: object, run: object, index: int, toolkit: object = None) -> _Scope:
        """The ``execute_tool {tool}`` span of call ``run.batch[index]``."""
        return _ToolScope(self, cast("Run", run), index, cast("Toolkit | None", toolkit))

    def server_tool_span(
        self, name: str, call_id: str, meta: Mapping[str, object] | None
    ) -> _Scope:
        """An ``execute_tool`` span for a call served over MCP, under the caller's trace.

        The mcp SDK's server middleware makes the caller's context (from the request's
        ``_meta``) current already; the explicit extraction covers a server built without
        that middleware.
        """
        parent = None
        if meta and not trace.get_current_span().get_span_context().is_valid:
            parent = extract({k: v for k, v in meta.items() if isinstance(v, str)})
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "mcp.method.name": "tools/call",
        }
        kind = SpanKind.INTERNAL
        return _Scope(self.tracer, f"execute_tool {name}", kind, attributes, parent)

    def event(self, name: str, attributes: Mapping[str, EventValue]) -> None:
        """Add an event to the current span (the reply's, where the loop reports it)."""
        trace.get_current_span().add_event(name, attributes)

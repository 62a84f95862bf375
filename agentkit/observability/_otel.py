"""The OpenTelemetry implementation of the loop's seams (GenAI semantic conventions).

Imported only by :func:`agentkit.observability.instrument`. Spans:

- ``invoke_agent {agent}`` (INTERNAL) per reply, with the run's total usage at the end;
- ``chat {model}`` (CLIENT) per model request, with usage, finish reason, cost;
- ``execute_tool {tool}`` (INTERNAL) per tool call; concurrent calls are siblings under the
  reply's span (each call's task starts from the reply's context). MCP tools add
  ``mcp.method.name`` and the server's address (HTTP) or command (stdio).

Interrupts, approvals asked for and denied calls are events on the reply's span; a call or
request cut by an interrupt ends with an ERROR status and ``error.type="interrupted"``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from agentkit import __version__
from agentkit.observability import _content
from agentkit.observability.seams import EventValue, Instrumentation, current_conversation

if TYPE_CHECKING:
    from agentkit.agent.react import ReActAgent
    from agentkit.agent.state import Run
    from agentkit.messages import Msg
    from agentkit.models.base import ChatUsage
    from agentkit.tools.response import ToolResponse
    from agentkit.tools.toolkit import Toolkit

__all__ = ["OTelInstrumentation"]

_SCOPE = "agentkit"
# Bucket boundaries the GenAI metric conventions recommend.
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                     40.96, 81.92)  # fmt: skip
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                  16777216, 67108864)  # fmt: skip


_CUT = {"interrupted": "interrupted by the user", "cancelled": "cancelled"}


def _error_type(exc: BaseException, run: object) -> str:
    import anyio

    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "interrupted" if getattr(run, "interrupted", False) else "cancelled"
    return type(exc).__qualname__


def _fail(span: trace.Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute("error.type", error_type)
    # A cancellation's message names tasks and scopes: useless, and different every run.
    span.set_status(Status(StatusCode.ERROR, _CUT.get(error_type) or description or error_type))


def _model_attributes(model: object) -> dict[str, AttributeValue]:
    return {
        "gen_ai.provider.name": str(getattr(model, "provider", "unknown")),
        "gen_ai.request.model": str(getattr(model, "model_name", "unknown")),
    }


def _mcp_attributes(tool: object) -> dict[str, AttributeValue]:
    """``mcp.*``/``server.*``/``network.transport`` of an MCP tool (empty for others)."""
    client = getattr(tool, "client", None)
    server = getattr(client, "server", None)
    if server is None or not hasattr(tool, "mcp_name"):
        return {}
    attributes: dict[str, AttributeValue] = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.type": "extension",
        "agentkit.mcp.server.name": str(getattr(client, "name", "")),
    }
    url = getattr(server, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        attributes["network.transport"] = "tcp"
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port:
            attributes["server.port"] = parts.port
    else:
        attributes["network.transport"] = "pipe"
        command = " ".join([str(server.command), *map(str, getattr(server, "args", ()))])
        attributes["agentkit.mcp.server.command"] = command
    return attributes


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

    # -- spans -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _span(
        self,
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, AttributeValue],
        parent: otel_context.Context | None = None,
    ) -> Iterator[trace.Span]:
        """A span made current for the block; exceptions are recorded by the caller."""
        span = self.tracer.start_span(name, parent, kind, attributes)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            yield span
        finally:
            otel_context.detach(token)
            span.end()

    @contextlib.contextmanager
    def run_span(self, agent: ReActAgent, run: Run) -> Iterator[None]:
        """The ``invoke_agent {agent}`` span of one reply."""
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": str(agent.name),
            **_model_attributes(agent.model),
        }
        conversation = current_conversation()
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        with self._span(f"invoke_agent {agent.name}", SpanKind.INTERNAL, attributes) as span:
            try:
                yield
            except BaseException as exc:
                _fail(span, _error_type(exc, run), str(exc) or None)
                self._end_run(span, agent, run, "error")
                raise
            if run.interrupted:
                span.add_event("agentkit.interrupted")
                self._end_run(span, agent, run, "interrupted")
            elif agent.pending_tool_calls:
                self._end_run(span, agent, run, "pending_approval")
            else:
                self._end_run(span, agent, run, "final")

    def _end_run(self, span: trace.Span, agent: ReActAgent, run: Run, stop_reason: str) -> None:
        usage = run.usage
        attributes: dict[str, AttributeValue] = {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "agentkit.iterations": run.iteration,
            "agentkit.stop_reason": stop_reason,
        }
        cost = getattr(usage, "cost", None)
        if cost is not None:
            attributes["agentkit.usage.cost"] = cost
        # Which model answered (a FallbackModel's choice), as on the chat spans.
        answered = getattr(run, "answered_by", None)
        if answered is not None:
            attributes["gen_ai.response.model"] = answered
        models = getattr(getattr(run, "counts", None), "models", None)
        if models:
            attributes["agentkit.models"] = list(models)
        span.set_attributes(attributes)

    @contextlib.contextmanager
    def model_span(
        self,
        agent: ReActAgent,
        run: Run,
        messages: Sequence[Msg],
        tools: list[dict[str, object]] | None,
    ) -> Iterator[None]:
        """The ``chat {model}`` span of one model request; the answer is in ``run.partial``."""
        model = agent.model
        attributes = {"gen_ai.operation.name": "chat", **_model_attributes(model)}
        if self.capture_content:
            attributes.update(_content.request_attributes(messages))
        started = time.perf_counter()
        name = f"chat {attributes['gen_ai.request.model']}"
        with self._span(name, SpanKind.CLIENT, attributes) as span:
            error: str | None = None
            try:
                yield
            except BaseException as exc:
                error = _error_type(exc, run)
                _fail(span, error, str(exc) or None)
                raise
            finally:
                self._end_chat(span, run, attributes, time.perf_counter() - started, error)

    def _end_chat(
        self,
        span: trace.Span,
        run: Run,
        request: dict[str, AttributeValue],
        elapsed: float,
        error: str | None,
    ) -> None:
        response = run.partial
        metric_attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": request["gen_ai.provider.name"],
            "gen_ai.request.model": request["gen_ai.request.model"],
        }
        if response is not None:
            metadata = response.metadata or {}
            model = str(metadata.get("model") or request["gen_ai.request.model"])
            metric_attrs["gen_ai.response.model"] = model
            attributes: dict[str, AttributeValue] = {
                "gen_ai.response.model": model,
                "gen_ai.response.id": str(response.id),
            }
            reason = metadata.get("finish_reason")
            if isinstance(reason, str):
                attributes["gen_ai.response.finish_reasons"] = [reason]
            if self.capture_content:
                attributes.update(_content.response_attributes(response.content, reason))
            usage = response.usage
            if usage is not None:
                attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
                attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
                cost = getattr(usage, "cost", None)
                if cost is not None:
                    attributes["agentkit.usage.cost"] = cost
            span.set_attributes(attributes)  # one call: the SDK takes its lock once
            if usage is not None:
                self._record_tokens(usage, metric_attrs)
        if error is not None:
            metric_attrs["error.type"] = error
        self.duration.record(elapsed, metric_attrs)

    def _record_tokens(self, usage: ChatUsage, metric_attrs: dict[str, AttributeValue]) -> None:
        self.tokens.record(usage.input_tokens, {**metric_attrs, "gen_ai.token.type": "input"})
        self.tokens.record(usage.output_tokens, {**metric_attrs, "gen_ai.token.type": "output"})

    @contextlib.contextmanager
    def tool_span(
        self, agent: ReActAgent, run: Run, index: int, toolkit: Toolkit | None = None
    ) -> Iterator[None]:
        """The ``execute_tool {tool}`` span of call ``run.batch[index]``."""
        call = (run.batch or [])[index]
        name = str(call["name"])
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(call["id"]),
            "gen_ai.tool.type": "function",
        }
        tool = toolkit.get_tool(name) if toolkit is not None else None
        if tool is not None:
            if tool.description:
                attributes["gen_ai.tool.description"] = tool.description[:500]
            attributes.update(_mcp_attributes(tool))
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _content.dumps(call.get("input"))
        with self._span(f"execute_tool {name}", SpanKind.INTERNAL, attributes) as span:
            try:
                yield
            except BaseException as exc:
                _fail(span, _error_type(exc, run), str(exc) or None)
                raise
            self._end_tool(span, run.results[index] if index < len(run.results) else None)

    def _end_tool(self, span: trace.Span, result: ToolResponse | None) -> None:
        if result is None:
            return
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", _content.dumps(result.content))
        if result.is_interrupted:
            _fail(span, "interrupted", "interrupted by the user")
        elif result.is_error:
            kind = (result.metadata or {}).get("error")
            _fail(span, str(kind or "tool_error"), result.get_text()[:200] or None)

    @contextlib.contextmanager
    def server_tool_span(
        self, name: str, call_id: str, meta: Mapping[str, object] | None
    ) -> Iterator[None]:
        """An ``execute_tool`` span for a call served over MCP, under the caller's trace.

        The mcp SDK's server middleware makes the caller's context (from the request's
        ``_meta``) current already; the explicit extraction covers a server built without
        that middleware.
        """
        parent = None
        if meta and not trace.get_current_span().get_span_context().is_valid:
            parent = extract({k: v for k, v in meta.items() if isinstance(v, str)})
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "mcp.method.name": "tools/call",
        }
        with self._span(f"execute_tool {name}", SpanKind.INTERNAL, attributes, parent) as span:
            try:
                yield
            except BaseException as exc:
                _fail(span, _error_type(exc, None), str(exc) or None)
                raise

    def event(self, name: str, attributes: Mapping[str, EventValue]) -> None:
        """Add an event to the current span (the reply's, where the loop reports it)."""
        trace.get_current_span().add_event(name, attributes)

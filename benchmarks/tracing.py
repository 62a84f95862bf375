"""Trace overhead: agentkit with ``instrument()`` (SDK + a no-op exporter) vs untraced.

Run: ``.venv/bin/python -m benchmarks.tracing [--rounds 7] [--steps 20]``

Two figures, each a ratio against a baseline measured interleaved in the same run:

- per turn over HTTP (mock OpenAI server, ``steps-N``): traced / untraced, target < 1.05;
- per span in-process (ScriptedModel): (traced - untraced) / spans per run, target < 30 us.

Each figure comes with its floor, measured in the same run: what the OpenTelemetry SDK alone
costs for the same spans and metric records (bare ``start_span``/``set_attributes``/``end``
and ``Histogram.record`` calls in a loop, no agentkit code). A target below its floor cannot
be met by any instrumentation that uses the SDK on this machine.

The exporter drops every span (``SimpleSpanProcessor`` over an exporter that returns
SUCCESS), so the figure is the cost of creating, filling and ending spans and recording
the metrics: what an application pays before its exporter's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NoOpTracerProvider, SpanKind, set_span_in_context

import agentkit._seams as seams
from agentkit.observability import instrument, uninstrument
from benchmarks import kit
from benchmarks.common import median, timed
from benchmarks.mock_server import MockServerProcess
from benchmarks.scenarios.turns import _script


class NoOpExporter(SpanExporter):
    """Accepts and drops every span (counts them and the ``chat`` spans among them)."""

    def __init__(self) -> None:
        self.count = 0
        self.chats = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        self.chats += sum(span.name.startswith("chat ") for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


async def _interleaved(
    untraced: Callable[[], Awaitable[Any]],
    traced: Callable[[], Awaitable[Any]],
    rounds: int,
    reps: int,
    per: float,
) -> tuple[list[float], list[float]]:
    """Per-round seconds (divided by ``per``) of both variants.

    The order alternates from round to round (ABBA...): on a busy machine whichever variant
    runs second in a round is measurably slower, which would bias a fixed order.
    """
    a: list[float] = []
    b: list[float] = []
    await untraced()
    await traced()
    for i in range(rounds):
        if i % 2 == 0:
            a.append(await timed(untraced, reps) / per)
            b.append(await timed(traced, reps) / per)
        else:
            b.append(await timed(traced, reps) / per)
            a.append(await timed(untraced, reps) / per)
    return a, b


def _tracing(
    exporter: NoOpExporter | None,
) -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """Wrap a run in ``instrument()``: the SDK with ``exporter``, or (None) the API alone.

    The API alone (no-op tracer and meter providers) is agentkit's own share of the cost:
    building attributes, opening and closing the seams, making each span current.
    """
    if exporter is None:
        instrument(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    else:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrument(tracer_provider=provider, meter_provider=MeterProvider())
    active = seams.installed()  # built once, like an application's start-up
    uninstrument()

    def wrap(fn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        async def traced() -> Any:
            seams.install(active)
            try:
                return await fn()
            finally:
                seams.install(None)

        return traced

    return wrap


async def http_overhead(
    base_url: str, steps: int, rounds: int, reps: int, floor: SdkFloor
) -> dict[str, Any]:
    """Traced vs untraced per-turn time over HTTP against the mock server."""
    model = kit.openai_model(f"steps-{steps}", base_url, stream=False)
    toolkit = kit.toolkit_with(kit.step)

    async def run() -> None:
        kit.check_answer(await kit.ask(kit.make_agent(model, toolkit)), steps)

    exporter = NoOpExporter()
    traced_run = _tracing(exporter)(run)
    try:
        await traced_run()  # one run counted: its spans and chat spans
        spans, chats = exporter.count, exporter.chats
        plain, traced = await _interleaved(run, traced_run, rounds, reps, steps + 1)
    finally:
        await model.aclose()
    ratios = [t / p for p, t in zip(plain, traced, strict=True)]
    sdk_per_turn = floor.cost(spans, chats) / (steps + 1)
    floor_ratio = (median(plain) + sdk_per_turn) / median(plain)
    return {
        "untraced_per_turn_s": median(plain),
        "traced_per_turn_s": median(traced),
        "ratio": median(ratios),
        "sdk_alone_per_turn_s": sdk_per_turn,
        "sdk_floor_ratio": floor_ratio,
        "target": "< 1.05",
        "ok": median(ratios) < 1.05,
        "target_below_floor": floor_ratio >= 1.05,
    }


async def span_cost(steps: int, rounds: int, reps: int) -> dict[str, Any]:
    """Extra in-process time per span (ScriptedModel, so the framework is all there is)."""
    from agentkit.testing import ScriptedModel

    toolkit = kit.toolkit_with(kit.step)
    n = ((rounds + 1) * reps * 2 + 4) * 2
    models = iter([ScriptedModel(_script(steps)) for _ in range(n)])

    async def run() -> None:
        kit.check_answer(await kit.ask(kit.make_agent(next(models), toolkit)), steps)

    exporter = NoOpExporter()
    traced_fn = _tracing(exporter)(run)
    await traced_fn()
    spans_per_run, chats_per_run = exporter.count, exporter.chats
    plain, traced = await _interleaved(run, traced_fn, rounds, reps, 1)
    plain_api, api_only = await _interleaved(run, _tracing(None)(run), rounds, reps, 1)
    own = [(t - p) / spans_per_run for p, t in zip(plain_api, api_only, strict=True)]
    floor = await SdkFloor.measure(rounds, reps * spans_per_run)
    sdk_per_span = floor.cost(spans_per_run, chats_per_run) / spans_per_run
    extra = [(t - p) / spans_per_run for p, t in zip(plain, traced, strict=True)]
    per_span = median(extra)
    return {
        "spans_per_run": spans_per_run,
        "untraced_run_s": median(plain),
        "traced_run_s": median(traced),
        "per_span_s": per_span,
        "raw_sdk_span_s": floor.span_s,
        "raw_sdk_record_s": floor.record_s,
        "ratio_to_raw_sdk_span": per_span / floor.span_s,
        "agentkit_own_per_span_s": median(own),
        "sdk_alone_per_span_s": sdk_per_span,
        "target": "< 30 us",
        "ok": per_span < 30e-6,
        "target_below_floor": sdk_per_span >= 30e-6,
    }


class SdkFloor:
    """What the OpenTelemetry SDK alone costs per span and per metric record, measured.

    The span is what agentkit's ``chat`` span carries (three attributes at the start, five at
    the end, made current while it runs); the record is one ``Histogram.record`` with the
    four attributes of a ``chat`` request's metric sets. Medians of ``rounds`` rounds.
    """

    def __init__(self, span_s: float, record_s: float) -> None:
        self.span_s = span_s
        self.record_s = record_s

    @classmethod
    async def measure(cls, rounds: int, n: int) -> SdkFloor:
        """Time ``n`` bare spans and ``n`` bare records, ``rounds`` times each."""
        spans, records = _raw_sdk_spans(n), _raw_records(n)
        span_s: list[float] = []
        record_s: list[float] = []
        for _ in range(max(rounds, 3)):
            span_s.append(await timed(spans, 1) / n)
            record_s.append(await timed(records, 1) / n)
        return cls(median(span_s), median(record_s))

    def cost(self, spans: int, chats: int) -> float:
        """The SDK's own cost of ``spans`` spans, ``chats`` of them ``chat`` spans.

        Each ``chat`` span comes with three records (duration, input and output tokens).
        """
        return spans * self.span_s + 3 * chats * self.record_s


def _raw_records(n: int) -> Callable[[], Awaitable[None]]:
    """``n`` bare histogram records with a chat request's attribute set."""
    histogram = MeterProvider().get_meter("baseline").create_histogram("duration")
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "model",
        "gen_ai.response.model": "model",
    }

    async def records() -> None:
        for _ in range(n):
            histogram.record(0.5, attributes)

    return records


def _raw_sdk_spans(n: int) -> Callable[[], Awaitable[None]]:
    """``n`` bare SDK spans shaped like agentkit's ``chat`` span, each made current."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(NoOpExporter()))
    tracer = provider.get_tracer("baseline")
    start = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "model",
    }
    end = {
        "gen_ai.response.model": "model",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 10,
    }

    async def spans() -> None:
        for _ in range(n):
            span = tracer.start_span("chat model", None, SpanKind.CLIENT, start)
            token = otel_context.attach(set_span_in_context(span))
            span.set_attributes(end)
            otel_context.detach(token)
            span.end()

    return spans


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    floor = await SdkFloor.measure(args.rounds, 500)
    with MockServerProcess(interval=0.005) as server:
        http = await http_overhead(server.base_url, args.steps, args.rounds, args.reps, floor)
    spans = await span_cost(args.steps, args.rounds, args.reps * 10)
    result = {"per_turn_over_http": http, "per_span_in_process": spans}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    asyncio.run(main())

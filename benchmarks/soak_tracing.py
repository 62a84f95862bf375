"""Soak with tracing on: agent runs without pause for N minutes under ``instrument()``.

Run: ``python -m benchmarks.soak_tracing [--minutes 10] [--quick] [--workers 8] [--json PATH]``

Each of ``--workers`` tasks runs fresh agents one after another (``steps-3`` against the mock
OpenAI server in a child process: three tool calls and an answer per run, half of the workers
streaming), the way a server gives every conversation its own agent. Tracing goes through
``agentkit.observability.instrument()`` into an SDK ``TracerProvider`` with a
``BatchSpanProcessor`` (default queue and batch sizes) over an exporter that counts and drops
spans, and a ``MeterProvider`` read by an ``InMemoryMetricReader`` at every sample.

Every ``--every`` seconds it samples: the process's RSS, the span processor's queue length,
then (the queue flushed, so that spans waiting for export do not count) the number of live
objects tracked by the garbage collector by type after a full collection, the spans exported
so far and the metric data points. The verdict reads the second half of
the samples (the first half warms caches, pools and the allocator): a least-squares slope per
minute for each series, and the growth that slope makes over the half, against a bound:
RSS < max(2 MB, 2%), live objects < max(500, 1%), the queue never full, and after the final
flush every span of every run exported (none dropped). ``--quick`` runs 30 s (a smoke run:
too short to call anything flat, the verdict is printed all the same).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from agentkit.observability import instrument, uninstrument
from benchmarks import kit
from benchmarks.mock_server import MockServerProcess

STEPS = 3
SPANS_PER_RUN = 1 + (STEPS + 1) + STEPS  # invoke_agent, chat per model call, execute_tool


class CountingExporter(SpanExporter):
    """Counts and drops spans (the exporter's own cost is not what is soaked here)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def rss_bytes() -> int:
    """The resident set size now (Linux ``/proc``; 0 where there is none)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def queue_length(processor: BatchSpanProcessor) -> int:
    """Spans waiting in the processor's queue (the SDK keeps it in ``_batch_processor``)."""
    inner = getattr(processor, "_batch_processor", processor)
    queue = getattr(inner, "_queue", None)
    return len(queue) if queue is not None else -1


def queue_capacity(processor: BatchSpanProcessor) -> int:
    inner = getattr(processor, "_batch_processor", processor)
    return int(getattr(inner, "_max_queue_size", 2048))


def data_points(reader: InMemoryMetricReader) -> int:
    """How many metric data points the reader holds (one per attribute set and instrument)."""
    data = reader.get_metrics_data()
    if data is None:
        return 0
    return sum(
        len(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )


def live_objects() -> collections.Counter[str]:
    """Objects tracked by the collector, by type name, after a full collection."""
    gc.collect()
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 60.0


async def _worker(base_url: str, stream: bool, toolkit: Any, stop: asyncio.Event) -> int:
    model = kit.openai_model(f"steps-{STEPS}", base_url, stream=stream)
    runs = 0
    try:
        while not stop.is_set():
            kit.check_answer(await kit.ask(kit.make_agent(model, toolkit)), STEPS)
            runs += 1
    finally:
        await model.aclose()
    return runs


async def soak(
    base_url: str, seconds: float, every: float, workers: int, log: bool = True
) -> dict[str, Any]:
    """Run the soak; the samples and the verdict."""
    exporter = CountingExporter()
    processor = BatchSpanProcessor(exporter)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    toolkit = kit.toolkit_with(kit.step)
    stop = asyncio.Event()
    tasks = [
        asyncio.ensure_future(_worker(base_url, i % 2 == 1, toolkit, stop)) for i in range(workers)
    ]
    samples: list[dict[str, Any]] = []
    first_types: collections.Counter[str] | None = None
    half_types: collections.Counter[str] | None = None
    last_types: collections.Counter[str] = collections.Counter()
    started = time.perf_counter()
    max_queue = 0
    try:
        while True:
            # Short waits: the queue length is caught between exports, not only at samples.
            deadline = time.perf_counter() + every
            while time.perf_counter() < deadline and not any(t.done() for t in tasks):
                await asyncio.sleep(min(0.25, every))
                max_queue = max(max_queue, queue_length(processor))
            failed = [t for t in tasks if t.done()]
            if failed:
                failed[0].result()  # a worker that stopped raises here
            elapsed = time.perf_counter() - started
            queued = queue_length(processor)
            # Counted with the queue drained: the spans waiting for export (0-2048, about a
            # dozen objects each) would otherwise swamp a leak of a few objects per run.
            processor.force_flush()
            last_types = live_objects()
            if first_types is None:
                first_types = last_types
            if half_types is None and elapsed >= seconds / 2:
                half_types = last_types
            sample = {
                "t_s": round(elapsed, 2),
                "rss_mb": round(rss_bytes() / 2**20, 2),
                "objects": sum(last_types.values()),
                "queue": queued,
                "exported": exporter.count,
                "metric_points": data_points(reader),
            }
            samples.append(sample)
            if log:
                print(json.dumps(sample), file=sys.stderr, flush=True)
            if elapsed >= seconds:
                break
    finally:
        stop.set()
        runs = sum(await asyncio.gather(*tasks))
        processor.force_flush()
        uninstrument()
        tracer_provider.shutdown()
        meter_provider.shutdown()
    result = verdict(samples, half_types or last_types, last_types)
    result.update(
        runs=runs,
        runs_per_s=runs / (time.perf_counter() - started),
        spans_expected=runs * SPANS_PER_RUN,
        spans_exported=exporter.count,
        max_queue=max_queue,
        queue_capacity=queue_capacity(processor),
        samples=samples,
    )
    result["dropped"] = result["spans_expected"] - exporter.count
    result["flat"] = bool(
        result["flat"] and result["dropped"] == 0 and max_queue < result["queue_capacity"]
    )
    return result


def verdict(
    samples: list[dict[str, Any]],
    half_types: collections.Counter[str],
    last_types: collections.Counter[str],
) -> dict[str, Any]:
    """Slopes over the second half of the samples and whether each stays within its bound."""
    second = samples[len(samples) // 2 :]
    span_min = (second[-1]["t_s"] - second[0]["t_s"]) / 60 if len(second) > 1 else 0.0
    out: dict[str, Any] = {"second_half_minutes": round(span_min, 2)}
    flat = True
    for key, floor, share in (("rss_mb", 2.0, 0.02), ("objects", 500, 0.01)):
        points = [(s["t_s"], float(s[key])) for s in second]
        slope = slope_per_minute(points)
        mean = sum(v for _, v in points) / len(points)
        growth = slope * span_min
        bound = max(floor, share * mean)
        out[f"{key}_slope_per_min"] = round(slope, 3)
        out[f"{key}_growth"] = round(growth, 2)
        out[f"{key}_bound"] = round(bound, 2)
        flat = flat and growth < bound
    points = [(s["t_s"], float(s["metric_points"])) for s in second]
    out["metric_points_slope_per_min"] = round(slope_per_minute(points), 3)
    grew = {k: last_types[k] - half_types.get(k, 0) for k in last_types}
    out["top_growth_types"] = sorted(
        ((k, v) for k, v in grew.items() if v > 0), key=lambda kv: -kv[1]
    )[:8]
    out["flat"] = flat
    return out


def table(result: dict[str, Any]) -> str:
    """A Markdown table of the verdict."""
    s0, s1 = result["samples"][0], result["samples"][-1]
    rows = [
        ("runs (steps-3; 8 spans each)", f"{result['runs']} ({result['runs_per_s']:.1f}/s)"),
        ("RSS first / last sample", f"{s0['rss_mb']:.1f} / {s1['rss_mb']:.1f} MB"),
        (
            "RSS slope, second half",
            f"{result['rss_mb_slope_per_min']:+.3f} MB/min "
            f"({result['rss_mb_growth']:+.2f} MB over the half; bound {result['rss_mb_bound']})",
        ),
        ("live objects first / last", f"{s0['objects']} / {s1['objects']}"),
        (
            "live objects slope, second half",
            f"{result['objects_slope_per_min']:+.1f}/min "
            f"({result['objects_growth']:+.0f} over the half; bound {result['objects_bound']:.0f})",
        ),
        ("span queue: max seen / capacity", f"{result['max_queue']} / {result['queue_capacity']}"),
        (
            "spans exported / expected",
            f"{result['spans_exported']} / {result['spans_expected']} "
            f"(dropped {result['dropped']})",
        ),
        ("metric data points, last", str(s1["metric_points"])),
        ("verdict", "flat" if result["flat"] else "NOT FLAT"),
    ]
    lines = ["| figure | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 1 when the soak is not flat (a full run only)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak_tracing", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="30 s, samples every 2 s")
    parser.add_argument("--every", type=float, default=None, help="seconds between samples")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--json", default="", help="write the result here")
    args = parser.parse_args(argv)
    seconds = 30.0 if args.quick else args.minutes * 60
    every = args.every or (2.0 if args.quick else 10.0)
    with MockServerProcess() as server:
        result = asyncio.run(soak(server.base_url, seconds, every, max(1, args.workers)))
    print(table(result))
    print("types that grew most over the second half:", result["top_growth_types"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if (result["flat"] or args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())

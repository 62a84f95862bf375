"""Time to first token: ``agent.stream()`` against the raw SDK stream and a bare httpx2 stream.

Each sample is one streamed answer (``text-20``: 20 words, one per SSE chunk) from the start
of the call to the first piece of answer text in the caller's hands: the first ``TextDelta``
event of ``agent.stream()``, the first chunk with ``delta.content`` of the SDK's stream, the
first ``data:`` line with content read by hand from ``httpx2``; and to the end of the stream
(the total: the last event, the connection back in the pool). Variants are interleaved
sample by sample; the figures are medians, as ratios to the bare httpx2 stream (the floor).
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.common import Config, NotAvailable, Row, median, require
from benchmarks.scenarios.turns import http_clients

_MODEL = "text-20"
_MESSAGES = [{"role": "user", "content": "hi"}]

Probe = Callable[[], Awaitable[tuple[float, float]]]
"""One streamed answer: (seconds to the first text, seconds to the end of the stream)."""


def _sdk_probe(sdk: Any) -> Probe:
    async def probe() -> tuple[float, float]:
        start, first = time.perf_counter(), 0.0
        stream = await sdk.chat.completions.create(model=_MODEL, messages=_MESSAGES, stream=True)
        async for chunk in stream:
            if not first and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - start
        return first, time.perf_counter() - start

    return probe


def _httpx_probe(raw: Any, base_url: str) -> Probe:
    body = {"model": _MODEL, "messages": _MESSAGES, "stream": True}

    async def probe() -> tuple[float, float]:
        start, first = time.perf_counter(), 0.0
        url = base_url + "/chat/completions"
        text: list[str] = []
        async with raw.stream("POST", url, json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices")
                if choices and choices[0]["delta"].get("content"):
                    text.append(choices[0]["delta"]["content"])
                    if not first:
                        first = time.perf_counter() - start
        "".join(text)
        return first, time.perf_counter() - start

    return probe


def _agent_probe(model: Any) -> Probe:
    (text_delta,) = require("agentkit.events", "TextDelta")
    agent = kit.make_agent(model, kit.toolkit_with(kit.step))

    async def probe() -> tuple[float, float]:
        await agent.memory.clear()
        start, first = time.perf_counter(), 0.0
        async for event in agent.stream("hi"):
            if not first and isinstance(event, text_delta):
                first = time.perf_counter() - start
        return first, time.perf_counter() - start

    return probe


async def rows(cfg: Config) -> list[Row]:
    """The TTFT row (agentkit vs raw SDK) and the bare httpx2 floor."""
    scenario = "time to first token, stream (text-20)"
    n = 3 if cfg.quick else 60
    sdk, raw = http_clients(cfg)
    probes: dict[str, Probe] = {"sdk": _sdk_probe(sdk), "httpx": _httpx_probe(raw, cfg.base_url)}
    model = None
    try:
        model = kit.openai_model(_MODEL, cfg.base_url, stream=True)
        probes["agentkit"] = _agent_probe(model)
    except NotAvailable as exc:
        return [Row(scenario, "agentkit TTFT", None, "s", note=f"n/a ({exc})")]
    samples: dict[str, list[float]] = {k: [] for k in probes}
    totals: dict[str, list[float]] = {k: [] for k in probes}
    cpu: dict[str, list[float]] = {k: [] for k in probes}
    try:
        for probe in probes.values():  # warm-up: connections, first-time code paths
            await probe()
        gc.collect()
        for _ in range(n):
            for key, probe in probes.items():
                started = time.process_time()
                first, total = await probe()
                cpu[key].append(time.process_time() - started)
                samples[key].append(first)
                totals[key].append(total)
    finally:
        await sdk.close()
        await raw.aclose()
        await model.aclose()
    ak, sdk_t, floor = (median(samples[k]) for k in ("agentkit", "sdk", "httpx"))
    ak_total, floor_total = median(totals["agentkit"]), median(totals["httpx"])
    ak_cpu, floor_cpu = median(cpu["agentkit"]), median(cpu["httpx"])
    note = f"median of {n} streams each, interleaved; agentkit - SDK = {(ak - sdk_t) * 1e3:+.3f} ms"
    r_first, r_total = ak / floor, ak_total / floor_total
    return [
        Row(scenario, "agentkit.stream(): first TextDelta", ak, "s", floor,
            "bare httpx2 stream: first content line", r_first, "<= 1.1x httpx2",
            r_first <= 1.1, note, {"samples": samples, "totals": totals}),
        Row(scenario, "agentkit.stream(): whole stream", ak_total, "s", floor_total,
            "bare httpx2 stream: whole stream", r_total, "<= 1.1x httpx2", r_total <= 1.1),
        Row(scenario, "agentkit.stream(): client CPU per stream", ak_cpu, "s", floor_cpu,
            "bare httpx2 stream", ak_cpu / floor_cpu,
            note="time.process_time(), server excluded: steadier than wall time under load",
            extra={"cpu": cpu}),
        Row(scenario, "raw openai SDK stream: first content chunk", sdk_t, "s", floor,
            "bare httpx2 stream: first content line", sdk_t / floor),
    ]  # fmt: skip

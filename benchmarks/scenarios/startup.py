"""Start-up costs: agent construction (time, tracemalloc memory), cold ``import agentkit`` in a
fresh interpreter, and whether the first request of a fresh process stalls on lazy imports.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from benchmarks import kit
from benchmarks.common import ROOT, Config, NotAvailable, Row, median, ratio, require

HEAVY = ("openai", "anthropic", "mcp", "httpx2", "jsonschema", "pydantic", "docstring_parser")

_IMPORT_PROBE = """
import sys, time, json
t = time.perf_counter()
import {module}
dt = time.perf_counter() - t
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"seconds": dt, "heavy": heavy}}))
"""

# A fresh process: import, build, then time the first three requests. The first one pays for
# everything deferred (lazy SDK imports, client creation, connection set-up).
_FIRST_REQUEST_PROBE = """
import asyncio, json, sys, time
t0 = time.perf_counter()
{setup}
t1 = time.perf_counter()
async def main():
    out = []
    for _ in range(4):
        t = time.perf_counter()
        await {request}
        out.append(time.perf_counter() - t)
    return out
times = asyncio.run(main())
print(json.dumps({{"setup": t1 - t0, "requests": times}}))
"""

_AGENTKIT_SETUP = """
from benchmarks import kit
agent = kit.make_agent(kit.openai_model("answer", sys.argv[1], stream=False),
                       kit.toolkit_with(kit.step))
"""
_SDK_SETUP = """
import openai
client = openai.AsyncOpenAI(api_key="bench", base_url=sys.argv[1], max_retries=0)
"""
_SDK_REQUEST = (
    'client.chat.completions.create(model="answer", messages=[{"role": "user", "content": "hi"}])'
)


def _probe(code: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "probe failed")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _per_object(make: Callable[[], Any], n: int) -> tuple[float, float]:
    """(seconds, bytes) per object, for ``n`` objects kept alive."""
    gc.collect()
    start = time.perf_counter()
    keep = [make() for _ in range(n)]
    seconds = (time.perf_counter() - start) / n
    del keep
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keep = [make() for _ in range(n)]
    size = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    del keep
    return seconds, size


def _construction_rows(cfg: Config) -> list[Row]:
    scenario = "agent construction (one tool)"
    try:
        scripted, text = require("agentkit.testing", "ScriptedModel", "text")
        model = scripted([text("x")])
        toolkit = kit.toolkit_with(kit.step)
        kit.agent_class()
        agent_samples, agent_mem, full_samples, full_mem = [], [], [], []
        for _ in range(cfg.rounds):
            t, m = _per_object(lambda: kit.make_agent(model, toolkit), cfg.construct)
            agent_samples.append(t)
            agent_mem.append(m)
            t, m = _per_object(
                lambda: kit.make_agent(model, kit.toolkit_with(kit.step)), cfg.construct // 4
            )
            full_samples.append(t)
            full_mem.append(m)
    except NotAvailable as exc:
        na = f"n/a (not available: {exc})"
        return [Row(scenario, "ReActAgent(...) time", None, "s", note=na)]
    t, m = median(agent_samples), median(agent_mem)
    ft, fm = median(full_samples), median(full_mem)
    return [
        Row(scenario, "ReActAgent(...) with a shared 1-tool Toolkit: time", t, "s",
            target="< 20 us", met=t < 20e-6),
        Row(scenario, "ReActAgent(...) with a shared 1-tool Toolkit: memory", m, "B",
            target="< 10 KiB", met=m < 10 * 1024),
        Row(scenario, "Toolkit() + register 1 function + ReActAgent: time", ft, "s"),
        Row(scenario, "Toolkit() + register 1 function + ReActAgent: memory", fm, "B"),
    ]  # fmt: skip


def _import_rows(cfg: Config) -> list[Row]:
    scenario = "cold import (fresh interpreter)"
    ak, sdk, heavy = [], [], []
    for _ in range(cfg.imports):
        result = _probe(_IMPORT_PROBE.format(module="agentkit", heavy=HEAVY))
        ak.append(result["seconds"])
        heavy = result["heavy"]
        sdk.append(_probe(_IMPORT_PROBE.format(module="openai", heavy=HEAVY))["seconds"])
    a, s = median(ak), median(sdk)
    note = "heavy modules loaded: " + (", ".join(heavy) or "none")
    return [
        Row(scenario, "import agentkit", a, "s", s, "import openai", ratio(a, s),
            "< 0.25 s", a < 0.25, note),
    ]  # fmt: skip


def _first_request_rows(cfg: Config) -> list[Row]:
    scenario = "first request in a fresh process (mock server, non-stream)"
    sdk = _probe(_FIRST_REQUEST_PROBE.format(setup=_SDK_SETUP, request=_SDK_REQUEST), cfg.base_url)
    sdk_first, sdk_steady = sdk["requests"][0], median(sdk["requests"][1:])
    try:
        require("agentkit.models.openai", "OpenAIChatModel")
        kit.agent_class()
        ak = _probe(
            _FIRST_REQUEST_PROBE.format(setup=_AGENTKIT_SETUP, request='agent("hi")'),
            cfg.base_url,
        )
    except (NotAvailable, RuntimeError) as exc:
        na = f"n/a (not available: {exc})"
        return [Row(scenario, "agentkit first-request stall", None, "s", note=na)]
    first, steady = ak["requests"][0], median(ak["requests"][1:])
    note = (
        f"setup (imports + construction): agentkit {ak['setup'] * 1e3:.0f} ms, "
        f"SDK {sdk['setup'] * 1e3:.0f} ms; steady request: agentkit {steady * 1e3:.2f} ms, "
        f"SDK {sdk_steady * 1e3:.2f} ms"
    )
    stall, sdk_stall = first - steady, sdk_first - sdk_steady
    return [
        Row(scenario, "agentkit first-request stall (first - steady)", stall, "s", sdk_stall,
            "raw openai SDK (same)", ratio(stall, sdk_stall), "no import stall (< 50 ms)",
            stall < 0.05, note,
            {"agentkit": ak, "sdk": sdk}),
    ]  # fmt: skip


async def run(cfg: Config) -> list[Row]:
    """Construction, import and first-request rows."""
    return _construction_rows(cfg) + _import_rows(cfg) + _first_request_rows(cfg)

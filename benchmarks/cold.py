"""Cold start in fresh processes: import + build + first run, agentkit against the raw SDK.

Each probe is a fresh interpreter that times its imports (asyncio included), the build (model
or client, toolkit, agent), the registration of one function tool, and four requests to the
mock server (the first pays for everything deferred: lazy imports, client creation,
connection set-up). During each request a task that sleeps 1 ms at a time records how late
it woke: the longest the request held the event loop. Variants run interleaved,
``cfg.imports`` processes each; the ratio is the median of the per-round ratios. The
interpreter's own start is left out: both sides pay it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from benchmarks.common import ROOT, Config, NotAvailable, Row, median, ratio, require

HEAVY = (
    "openai",
    "anthropic",
    "mcp",
    "httpx2",
    "jsonschema",
    "pydantic",
    "docstring_parser",
    "opentelemetry",
)

_PROBE = """
import time
t0 = time.perf_counter()
import asyncio, json, sys
{imports}
t1 = time.perf_counter()
{build}
t2 = time.perf_counter()
{tools}
t3 = time.perf_counter()
async def watch(done):
    # The longest the event loop went without running this task (beyond its 1 ms sleep).
    worst = 0.0
    while not done.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        worst = max(worst, time.perf_counter() - t - 0.001)
    return worst
async def main():
    out, stalls = [], []
    for _ in range(4):
        done = asyncio.Event()
        watcher = asyncio.ensure_future(watch(done))
        await asyncio.sleep(0)
        t = time.perf_counter()
        await {request}
        out.append(time.perf_counter() - t)
        done.set()
        stalls.append(await watcher)
    return out, stalls
times, stalls = asyncio.run(main())
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps({{"import": t1 - t0, "build": t2 - t1, "tools": t3 - t2, "requests": times,
                  "loop_stalls": stalls, "heavy": heavy}}))
"""

_AK_IMPORTS = """
from agentkit import ReActAgent, Toolkit
from agentkit.models import OpenAIChatModel
"""
_AK_BUILD = """
model = OpenAIChatModel("answer", api_key="bench", base_url=sys.argv[1], stream=False)
toolkit = Toolkit()
agent = ReActAgent(name="bench", sys_prompt="s", model=model, toolkit=toolkit, print_hint=False)
"""
_AK_TOOL = '''
async def step(i: int) -> str:
    """Benchmark step.

    Args:
        i: Step number.
    """
    return f"step {i} ok"
toolkit.register_tool_function(step)
'''
_SDK_IMPORTS = "import openai"
_SDK_BUILD = """
client = openai.AsyncOpenAI(api_key="bench", base_url=sys.argv[1], max_retries=0)
"""
# The raw loop's tool is a hand-written schema (nothing to build), sent with every request.
_SDK_TOOL = """
tools = [{"type": "function", "function": {"name": "step", "description": "Benchmark step.",
          "parameters": {"type": "object", "properties": {"i": {"type": "integer"}},
                         "required": ["i"]}}}]
"""
_SDK_REQUEST = (
    'client.chat.completions.create(model="answer", tools=tools, '
    'messages=[{"role": "user", "content": "hi"}])'
)
VARIANTS = {
    "sdk": (_SDK_IMPORTS, _SDK_BUILD, _SDK_TOOL, _SDK_REQUEST),
    "agentkit": (_AK_IMPORTS, _AK_BUILD, _AK_TOOL, 'agent("hi")'),
    "agentkit_no_tool": (_AK_IMPORTS, _AK_BUILD, "", 'agent("hi")'),
    # The first run calls the tool once (``steps-1``): what the first tool call loads.
    "agentkit_tool_call": (
        _AK_IMPORTS,
        _AK_BUILD.replace('"answer"', '"steps-1"'),
        _AK_TOOL,
        'agent("hi")',
    ),
}
_FULL_ONLY = ("agentkit_no_tool", "agentkit_tool_call")


def probe(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; its last stdout line, decoded as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "probe failed")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def samples(cfg: Config) -> dict[str, list[dict[str, Any]]]:
    """``cfg.imports`` fresh processes per variant, interleaved (drift hits every variant)."""
    # A quick run only proves the probes work: the extra variants are left out (time).
    keys = [k for k in VARIANTS if not (cfg.quick and k in _FULL_ONLY)]
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    for _ in range(cfg.imports):
        for key in keys:
            imports, build, tools, request = VARIANTS[key]
            code = _PROBE.format(
                imports=imports, build=build, tools=tools, request=request, heavy=HEAVY
            )
            out[key].append(probe(code, cfg.base_url))
    return out


def _cold(sample: dict[str, Any]) -> float:
    """Import + build (tool included) + first request."""
    return float(sample["import"] + sample["build"] + sample["tools"] + sample["requests"][0])


# The raw SDK builds its client (and imports all it needs) before its first request, so its
# own first-request stall is what a first request costs anyway here (the event loop's first
# connection, the resolver's thread, code run for the first time): 40-110 ms on this machine
# depending on its load. A lazy import or build left on agentkit's first request would add
# about 95 ms (httpx2 and its parser, anyio's backend) on top of that, as measured here
# with the warm-up thread turned off.
_STALL_MARGIN_S = 0.020
# The bound on how long the first run may hold the event loop (other tasks, a
# server's other requests, wait that long): PydanticAI #7405's first-request stall.
_LOOP_STALL_S = 0.050


def _stall(sample: dict[str, Any]) -> float:
    return float(sample["requests"][0] - median(sample["requests"][1:]))


def _med(items: list[dict[str, Any]], key: str) -> float:
    return median([float(s[key]) for s in items])


def _parts(ak: list[dict[str, Any]], sdk: list[dict[str, Any]]) -> str:
    first = median([s["requests"][0] for s in ak]), median([s["requests"][0] for s in sdk])
    return (
        f"agentkit: import {_med(ak, 'import') * 1e3:.0f} ms, build "
        f"{_med(ak, 'build') * 1e3:.2f} ms, register the tool {_med(ak, 'tools') * 1e3:.0f} ms, "
        f"first run {first[0] * 1e3:.1f} ms; SDK: import {_med(sdk, 'import') * 1e3:.0f} ms, "
        f"client {_med(sdk, 'build') * 1e3:.1f} ms, first request {first[1] * 1e3:.1f} ms; "
        f"heavy modules in the agentkit process: {', '.join(ak[-1]['heavy']) or 'none'}"
    )


def rows(cfg: Config) -> list[Row]:
    """Cold start (with and without a tool), first-agent build time and first-request stall."""
    scenario = "cold start: fresh process, import + build + first run (mock server)"
    try:
        require("agentkit.models._openai", "OpenAIChatModel")
        found = samples(cfg)
    except (NotAvailable, RuntimeError) as exc:
        return [Row(scenario, "agentkit cold start", None, "s", note=f"n/a ({exc})")]
    sdk, ak = found["sdk"], found["agentkit"]
    runs = f"median of {cfg.imports} fresh processes per variant, interleaved"
    c_sdk, c_ak = median([_cold(s) for s in sdk]), median([_cold(s) for s in ak])
    r_ak = median([_cold(a) / _cold(b) for a, b in zip(ak, sdk, strict=True)])
    build, sdk_build = _med(ak, "build"), _med(sdk, "build")
    stall, sdk_stall = median([_stall(s) for s in ak]), median([_stall(s) for s in sdk])
    loop_stall = median([s["loop_stalls"][0] for s in ak])
    sdk_loop_stall = median([s["loop_stalls"][0] for s in sdk])
    rows = [
        Row(scenario, "agentkit, one function tool: import + build + first run", c_ak, "s",
            c_sdk, "raw openai SDK: import + client + first request", r_ak, "<= 0.9x",
            r_ak <= 0.9, f"{runs}; {_parts(ak, sdk)}", {"agentkit": ak, "sdk": sdk}),
        Row(scenario, "build the first agent: OpenAIChatModel + Toolkit + ReActAgent", build,
            "s", sdk_build, "openai.AsyncOpenAI(...)", ratio(build, sdk_build), "< 5 ms",
            build < 5e-3, "after the imports; registering the first tool is in the note above"),
        Row(scenario, "agentkit first-request stall (first - steady)", stall, "s", sdk_stall,
            "raw openai SDK (same)", ratio(stall, sdk_stall), "no import stall (<= SDK + 20 ms)",
            stall <= sdk_stall + _STALL_MARGIN_S, runs),
        Row(scenario, "longest event-loop stall during the first run", loop_stall, "s",
            sdk_loop_stall, "raw openai SDK: during its first request",
            ratio(loop_stall, sdk_loop_stall), "<= 50 ms", loop_stall <= _LOOP_STALL_S,
            f"{runs}; worst {max(s['loop_stalls'][0] for s in ak) * 1e3:.1f} ms (a task "
            "sleeping 1 ms, how late it woke)"),
    ]  # fmt: skip
    if "agentkit_no_tool" in found:
        rows.insert(1, _no_tool_row(scenario, found["agentkit_no_tool"], sdk, runs))
    if "agentkit_tool_call" in found:
        calls = found["agentkit_tool_call"]
        worst = max(s["loop_stalls"][0] for s in calls)
        stall_call = median([s["loop_stalls"][0] for s in calls])
        rows.append(
            Row(scenario, "longest event-loop stall during a first run that calls the tool",
                stall_call, "s", sdk_loop_stall, "raw openai SDK: during its first request",
                ratio(stall_call, sdk_loop_stall), "<= 50 ms", stall_call <= _LOOP_STALL_S,
                f"{runs}; steps-1 (two requests, one tool call); worst {worst * 1e3:.1f} ms",
                {"agentkit_tool_call": calls})
        )  # fmt: skip
    return rows


def _no_tool_row(
    scenario: str, bare: list[dict[str, Any]], sdk: list[dict[str, Any]], runs: str
) -> Row:
    r_bare = median([_cold(a) / _cold(b) for a, b in zip(bare, sdk, strict=True)])
    return Row(scenario, "agentkit, no tool: import + build + first run",
               median([_cold(s) for s in bare]), "s", median([_cold(s) for s in sdk]),
               "raw openai SDK (same)", r_bare, "<= 0.9x", r_bare <= 0.9, runs,
               {"agentkit_no_tool": bare})  # fmt: skip

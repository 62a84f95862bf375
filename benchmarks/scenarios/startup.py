"""Start-up costs: agent construction (time, tracemalloc memory), cold ``import agentkit`` in a
fresh interpreter, and the cold start of a fresh process (``benchmarks.cold``).
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from benchmarks import cold, kit
from benchmarks.baselines import SYSTEM
from benchmarks.common import Config, NotAvailable, Row, median, paired, ratio, require

HEAVY = cold.HEAVY

_IMPORT_PROBE = """
import sys, time, json
t = time.perf_counter()
import {module}
dt = time.perf_counter() - t
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"seconds": dt, "heavy": heavy}}))
"""


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


def _construction_variants(model: Any) -> dict[str, Callable[[], Any]]:
    """The ways a chat server gets one more agent, each with one function tool."""
    agent_cls = kit.agent_class()
    toolkit = kit.toolkit_with(kit.step)
    template = kit.make_agent(model, toolkit)

    def build(tk: Any) -> Any:
        return agent_cls(name="bench", sys_prompt="s", model=model, toolkit=tk, max_iters=100)

    def full() -> Any:
        own = type(toolkit)()
        own.register_tool_function(kit.step)
        return build(own)

    variants: dict[str, Callable[[], Any]] = {"shared": lambda: build(toolkit), "full": full}
    if hasattr(toolkit, "copy") and hasattr(template, "copy"):
        variants["copy"] = lambda: template.copy(toolkit=toolkit.copy())
        variants["init_copy"] = lambda: build(toolkit.copy())
    return variants


_CONSTRUCTION_LABELS = {
    "shared": ("ReActAgent(...) with a shared 1-tool Toolkit", 20e-6, 10 * 1024),
    "copy": ("template.copy(toolkit=template.toolkit.copy()): own Toolkit, 1 tool", 10e-6, 1536),
    "init_copy": ("ReActAgent(..., toolkit=template_toolkit.copy())", 10e-6, 1536),
    "full": ("Toolkit() + register 1 function + ReActAgent", None, 1536),
}


def _construction_rows(cfg: Config) -> list[Row]:
    scenario = "agent construction (one tool)"
    try:
        scripted, text = require("agentkit.testing", "ScriptedModel", "text")
        variants = _construction_variants(scripted([text("x")]))
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        for _ in range(cfg.rounds):
            for key, make in variants.items():  # interleaved: drift hits every variant
                n = cfg.construct if key != "full" else max(cfg.construct // 4, 1)
                samples[key].append(_per_object(make, n))
    except NotAvailable as exc:
        na = f"n/a (not available: {exc})"
        return [Row(scenario, "ReActAgent(...) time", None, "s", note=na)]
    rows = []
    for key, pairs in samples.items():
        label, t_target, m_target = _CONSTRUCTION_LABELS[key]
        t, m = median([p[0] for p in pairs]), median([p[1] for p in pairs])
        rows.append(
            Row(
                scenario,
                f"{label}: time",
                t,
                "s",
                target="" if t_target is None else f"<= {t_target * 1e6:.0f} us",
                met=None if t_target is None else t <= t_target,
            )
        )
        rows.append(
            Row(
                scenario,
                f"{label}: memory",
                m,
                "B",
                target=f"<= {m_target} B",
                met=m <= m_target,
                note="tracemalloc, per object kept alive",
            )
        )
    return rows  # fmt: skip


HISTORY_LENGTH = 20
"""Messages in the stored history a conversation is rebuilt from (user and answer turns)."""


def _history_variants(model: Any) -> dict[str, Callable[[], Any]]:
    """One more conversation from a stored history: agentkit and the raw loops' equivalent."""
    (msg_cls,) = require("agentkit.messages", "Msg")
    (memory_cls,) = require("agentkit.memory", "InMemoryMemory")
    template = kit.make_agent(model, kit.toolkit_with(kit.step))
    turns = [
        ("user" if i % 2 == 0 else "assistant", f"Message {i} of the stored conversation.")
        for i in range(HISTORY_LENGTH)
    ]
    saved = [msg_cls("bench" if r == "assistant" else "user", t, r).to_dict() for r, t in turns]

    def from_texts() -> Any:
        history = [msg_cls("bench" if r == "assistant" else "user", t, r) for r, t in turns]
        return template.copy(memory=memory_cls(history))

    def from_saved() -> Any:
        return template.copy(memory=memory_cls([msg_cls.from_dict(d) for d in saved]))

    def raw_from_texts() -> Any:  # what the raw SDK and httpx2 loops hold: OpenAI dicts
        return [{"role": "system", "content": SYSTEM}] + [
            {"role": r, "content": t} for r, t in turns
        ]

    def raw_from_saved() -> Any:
        return [{"role": "system", "content": SYSTEM}] + [
            {"role": d["role"], "content": d["content"]} for d in saved
        ]

    return {"texts": from_texts, "saved": from_saved, "raw_texts": raw_from_texts,
            "raw_saved": raw_from_saved}  # fmt: skip


def _history_rows(cfg: Config) -> list[Row]:
    scenario = f"a conversation with a {HISTORY_LENGTH}-message history"
    try:
        scripted, text = require("agentkit.testing", "ScriptedModel", "text")
        variants = _history_variants(scripted([text("x")]))
    except NotAvailable as exc:
        return [Row(scenario, "build", None, "s", note=f"n/a (not available: {exc})")]
    samples: dict[str, list[float]] = {k: [] for k in variants}
    n = max(cfg.construct // 10, 5)
    for _ in range(cfg.rounds):
        for key, make in variants.items():  # interleaved: drift hits every variant
            samples[key].append(_per_object(make, n)[0])
    rows = []
    for key, label in (("texts", "from (role, text) pairs"), ("saved", "from saved dicts")):
        t, base = median(samples[key]), median(samples[f"raw_{key}"])
        r = paired(samples, key, f"raw_{key}")
        rows.append(
            Row(scenario, f"agent copy + InMemoryMemory of Msgs, {label}", t, "s", base,
                "the raw loops' list of message dicts", r, "no slower than the raw loops",
                r is not None and r <= 1.0, "time per conversation")
        )  # fmt: skip
    return rows


def _import_rows(cfg: Config) -> list[Row]:
    scenario = "cold import (fresh interpreter)"
    ak, sdk, heavy = [], [], []
    for _ in range(cfg.imports):
        result = cold.probe(_IMPORT_PROBE.format(module="agentkit", heavy=HEAVY))
        ak.append(result["seconds"])
        heavy = result["heavy"]
        sdk.append(cold.probe(_IMPORT_PROBE.format(module="openai", heavy=HEAVY))["seconds"])
    a, s = median(ak), median(sdk)
    note = "heavy modules loaded: " + (", ".join(heavy) or "none")
    return [
        Row(scenario, "import agentkit", a, "s", s, "import openai", ratio(a, s),
            "< 0.25 s", a < 0.25, note),
    ]  # fmt: skip


async def run(cfg: Config) -> list[Row]:
    """Construction, import and first-request rows."""
    return _construction_rows(cfg) + _history_rows(cfg) + _import_rows(cfg) + cold.rows(cfg)

"""Shared benchmark plumbing: rows, timing, medians, and probes for agentkit pieces."""

from __future__ import annotations

import gc
import importlib
import pathlib
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
"""The repository root (child processes run there so ``benchmarks`` is importable)."""


class NotAvailable(Exception):
    """An agentkit piece a scenario needs is not there (yet)."""


@dataclass
class Row:
    """One line of the results table.

    ``value`` is the agentkit figure (median over rounds), ``baseline`` the reference figure
    measured in the same run, ``ratio`` = value / baseline (lower is better for times).
    """

    scenario: str
    metric: str
    value: float | None
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return asdict(self)


@dataclass
class Config:
    """Sizes for one benchmark run (``--quick`` shrinks them all)."""

    rounds: int = 5
    quick: bool = False
    base_url: str = ""
    url: str = ""
    steps: int = 20
    reps: int = 5
    parallel: int = 8
    tool_sleep: float = 0.2
    agents: int = 200
    agent_steps: int = 3
    interrupts: int = 200
    construct: int = 2000
    mcp_calls: int = 200
    imports: int = 5
    stream_chunks: int = 2000
    history: int = 200
    conversations: int = 10_000
    active: int = 500

    @classmethod
    def quick_config(cls, rounds: int = 1) -> Config:
        """Tiny sizes that only prove every scenario runs."""
        return cls(
            rounds=rounds,
            quick=True,
            steps=3,
            reps=1,
            parallel=4,
            tool_sleep=0.02,
            agents=10,
            agent_steps=2,
            interrupts=5,
            construct=50,
            mcp_calls=5,
            imports=1,
            stream_chunks=40,
            history=200,
            conversations=300,
            active=20,  # scale: 3 x 180 turns, enough to run every phase
        )


def median(values: list[float]) -> float:
    """Median of ``values``."""
    return statistics.median(values)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def timed(fn: Callable[[], Awaitable[Any]], reps: int = 1, *, collect: bool = True) -> float:
    """Mean seconds of ``reps`` sequential awaits of ``fn()``, after a GC.

    Args:
        fn: What to time.
        reps: Sequential awaits to average over.
        collect: Run a full collection first, so that no garbage of an earlier variant is
            collected inside this one's timing. A ``--quick`` run passes False: with the
            SDKs imported a full collection costs 0.1-0.2 s, and its figures are no
            measurement anyway.
    """
    if collect:
        gc.collect()
    start = time.perf_counter()
    for _ in range(reps):
        await fn()
    return (time.perf_counter() - start) / reps


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either is missing."""
    if value is None or not baseline:
        return None
    return value / baseline


def require(module: str, *names: str) -> list[Any]:
    """Import ``names`` from ``module`` or raise ``NotAvailable``."""
    try:
        mod = importlib.import_module(module)
        return [getattr(mod, n) for n in names]
    except (ImportError, AttributeError) as exc:
        raise NotAvailable(f"{module}.{'/'.join(names)} missing ({exc})") from exc


def fmt_value(value: float | None, unit: str) -> str:
    """Human-readable value with its unit."""
    if value is None:
        return "n/a"
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.1f} us"
        if value < 1:
            return f"{value * 1e3:.2f} ms"
        return f"{value:.3f} s"
    if unit == "B":
        return f"{value / 1024:.2f} KiB"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,.1f} {unit}"


def paired(samples: dict[str, list[float]], name: str, base: str) -> float | None:
    """Median of the per-round ratios ``samples[name][i] / samples[base][i]``.

    Variants are measured interleaved within each round, so pairing them by round cancels
    most of the drift a shared, noisy machine adds between rounds.
    """
    if name not in samples or base not in samples:
        return None
    return median([a / b for a, b in zip(samples[name], samples[base], strict=True)])

"""Run the agentkit benchmark suite: one command, a table on stdout, JSON on disk.

    python -m benchmarks.run                  # full run (~5 minutes on 2 cores)
    python -m benchmarks.run --quick          # tiny sizes, proves every scenario runs
    python -m benchmarks.run --only turns,mcp --rounds 3

Every figure is the median of ``--rounds`` rounds; each agentkit figure is shown next to a
baseline measured in the same process run (a hand-written raw ``openai`` SDK loop unless the
row says otherwise) and as a ratio to it. Variants are interleaved within each round and the
ratio is the median of the per-round ratios, which cancels most of the drift that a shared
machine adds between rounds. The mock LLM server runs in a child process so that
it does not compete with the measured loop for the event loop (or the GIL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from typing import Any

from benchmarks.common import ROOT, Config, NotAvailable, Row, fmt_value
from benchmarks.mock_server import MockServerProcess

SCENARIOS = (
    "turns",
    "streaming",
    "parallel",
    "concurrency",
    "interrupts",
    "startup",
    "mcp_call",
    "mcp_fleet",
    "cross_worker_interrupts",
    "durable",
    "serve",
    "long_history",
    "scale",
    "a2a",
)
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "latest.json"
DEFAULT_SUMMARY = ROOT / "benchmarks" / "results" / "summary.json"
SUMMARY_FORMAT = "agentkit-benchmark-summary/1"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        info["cpu_model"] = names[0] if names else ""
    except OSError:
        pass
    with contextlib.suppress(OSError):
        info["loadavg"] = os.getloadavg()
    for package in ("openai", "httpx2", "mcp", "anyio"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            info[package] = importlib.metadata.version(package)
    return info


async def run_scenario(name: str, cfg: Config) -> list[Row]:
    """Run one scenario module; a missing piece or a failure becomes a row, never a crash."""
    module = importlib.import_module(f"benchmarks.scenarios.{name}")
    try:
        rows: list[Row] = await module.run(cfg)
        return rows
    except NotAvailable as exc:
        return [Row(name, "-", None, "", note=f"n/a (not available: {exc})")]
    except Exception as exc:
        traceback.print_exc()
        return [Row(name, "-", None, "", note=f"error: {type(exc).__name__}: {exc}")]


def _load() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _commit() -> str | None:
    """The measured tree's git commit (``-dirty`` when it has changes), best effort."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=40"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def summary(
    rows: list[Row], cfg: Config, names: list[str], info: dict[str, Any], load: dict[str, Any]
) -> dict[str, Any]:
    """The machine-readable summary of a run: where and under what load it ran, and every
    figure with its same-run baseline and ratio (``docs/benchmarks.md`` describes the format)."""
    machine_info = {k: v for k, v in info.items() if k != "loadavg"}
    return {
        "format": SUMMARY_FORMAT,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "quick": cfg.quick,
        "rounds": cfg.rounds,
        "scenarios": names,
        "machine": machine_info,
        "load": load,
        "figures": [
            {
                "scenario": r.scenario,
                "metric": r.metric,
                "value": r.value,
                "unit": r.unit,
                "baseline": r.baseline,
                "baseline_name": r.baseline_name,
                "ratio": r.ratio,
                "target": r.target,
                "met": r.met,
                "note": r.note,
            }
            for r in rows
        ],
    }


def _ratio(row: Row) -> str:
    return "" if row.ratio is None else f"{row.ratio:.2f}x"


def _met(row: Row) -> str:
    if row.met is None:
        return row.target
    return f"{row.target} {'ok' if row.met else 'MISSED'}"


def table(rows: list[Row]) -> str:
    """A Markdown table of ``rows``."""
    lines = [
        "| scenario | metric | agentkit | baseline | ratio | target | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        base = "" if r.baseline is None else f"{fmt_value(r.baseline, r.unit)} ({r.baseline_name})"
        lines.append(
            f"| {r.scenario} | {r.metric} | {fmt_value(r.value, r.unit)} | {base} | "
            f"{_ratio(r)} | {_met(r)} | {r.note} |"
        )
    return "\n".join(lines)


async def run_all(cfg: Config, names: list[str]) -> list[Row]:
    """Run ``names`` in order, printing progress to stderr."""
    rows: list[Row] = []
    for name in names:
        start = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        rows += await run_scenario(name, cfg)
        print(f"[bench] {name} done in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line options."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--rounds", type=int, default=None, help="rounds per figure (5)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {SCENARIOS}")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON output path")
    parser.add_argument(
        "--summary", default=str(DEFAULT_SUMMARY), help="machine-readable summary path"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (1 if a scenario errored)."""
    args = parse_args(argv)
    cfg = Config.quick_config() if args.quick else Config()
    if args.rounds is not None:
        cfg.rounds = max(1, args.rounds)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SCENARIOS)
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenario(s): {', '.join(unknown)}; choose from {SCENARIOS}")
    started, load_at_start = time.perf_counter(), _load()
    with MockServerProcess() as server:
        cfg.base_url, cfg.url = server.base_url, server.url
        rows = asyncio.run(run_all(cfg, names))
    elapsed = time.perf_counter() - started
    print(table(rows))
    info = machine()
    print(f"\n{info['cpus']} CPUs, Python {info['python']}, {cfg.rounds} rounds, {elapsed:.0f} s")
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": info,
        "config": {k: v for k, v in cfg.__dict__.items() if k not in ("base_url", "url")},
        "elapsed_s": elapsed,
        "rows": [r.to_dict() for r in rows],
    }
    load = {"start": load_at_start, "end": _load(), "cpus": info["cpus"], "elapsed_s": elapsed}
    for path, data in ((args.out, result), (args.summary, summary(rows, cfg, names, info, load))):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f, indent=2, default=str)
        print(f"wrote {path}")
    return 1 if any(r.note.startswith("error:") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

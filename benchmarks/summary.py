"""Render benchmark summaries (``benchmarks.run --summary``) as the release table of
``docs/benchmarks.md``: one Markdown table, headed by the machine and the load it ran under.

    python -m benchmarks.summary benchmarks/results/summary.json
    python -m benchmarks.summary benchmarks/results/ci/*.json   # the parts of a CI run

Several files (the parts a CI run writes) become one table; their machines must match.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from benchmarks.common import fmt_value
from benchmarks.run import SUMMARY_FORMAT


def load(paths: list[str]) -> list[dict[str, Any]]:
    """Read summaries, refusing files of another format."""
    summaries = []
    for path in paths:
        data = json.loads(pathlib.Path(path).read_text())
        if data.get("format") != SUMMARY_FORMAT:
            raise SystemExit(f"{path}: not a {SUMMARY_FORMAT} file")
        summaries.append(data)
    return summaries


def _load_text(load: dict[str, Any]) -> str:
    start, end = load.get("start"), load.get("end")
    if not start or not end:
        return "load average not known"
    return f"1-minute load average {start[0]:.2f} at the start, {end[0]:.2f} at the end"


def render(summaries: list[dict[str, Any]]) -> str:
    """The Markdown table of ``summaries``."""
    if not summaries:
        raise SystemExit("no summary given")
    machine = summaries[0]["machine"]
    if any(s["machine"] != machine for s in summaries[1:]):
        raise SystemExit("the summaries come from different machines")
    runs = [
        f"{', '.join(s['scenarios'])}: {s['date']}, {_load_text(s['load'])}, "
        f"{s['rounds']} round(s){' (quick)' if s['quick'] else ''}, "
        f"commit {s.get('commit') or 'unknown'}"
        for s in summaries
    ]
    lines = [
        f"Machine: {machine.get('cpus')} CPUs ({machine.get('cpu_model', 'unknown CPU')}), "
        f"{machine.get('implementation')} {machine.get('python')}, {machine.get('platform')}.",
        "",
        *[f"- {run}" for run in runs],
        "",
        "| scenario | figure | agentkit | baseline | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for s in summaries:
        for f in s["figures"]:
            base = "" if f["baseline"] is None else fmt_value(f["baseline"], f["unit"])
            if base and f["baseline_name"]:
                base += f" ({f['baseline_name']})"
            ratio = "" if f["ratio"] is None else f"{f['ratio']:.2f}x"
            met = "" if f["met"] is None else (": met" if f["met"] else ": **missed**")
            target = f"{f['target']}{met}" if f["target"] else ""
            lines.append(
                f"| {f['scenario']} | {f['metric']} | {fmt_value(f['value'], f['unit'])} | "
                f"{base} | {ratio} | {target} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table of the summaries named on the command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summary", description=__doc__)
    parser.add_argument("paths", nargs="+", help="summary JSON files")
    args = parser.parse_args(argv)
    print(render(load(args.paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

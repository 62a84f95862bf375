"""The contract suite at size: many more seeded scenarios than CI runs, on every path.

    python -m benchmarks.contracts                  # 2000 in process, 300 durable, 300 served
    python -m benchmarks.contracts --quick          # 40 / 6 / 6: proves it runs
    python -m benchmarks.contracts --seed 12345 --only durable,served

Each path runs ``agentkit.testing.check_contracts`` / ``check_durable_contracts`` /
``check_served_contracts`` from one seed (a fresh one unless ``--seed``), prints a Markdown
table (scenarios, failures, scenarios per second, and what the scenarios did) and exits 1
when a scenario broke the contract; each failure is printed with the seed that replays it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

FULL = {"in_process": 2000, "durable": 300, "served": 300}
QUICK = {"in_process": 40, "durable": 6, "served": 6}


def _ram_disk() -> str | None:
    """``/dev/shm`` where it is writable: each recorded step is an fsync otherwise."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _suites() -> dict[str, Callable[..., Awaitable[Any]]]:
    from agentkit.testing import check_contracts, check_durable_contracts, check_served_contracts

    fast = _ram_disk()
    return {
        "in_process": lambda n, seed: check_contracts(
            scenarios=n, seed=seed, raise_on_failure=False
        ),
        "durable": lambda n, seed: check_durable_contracts(
            scenarios=n, seed=seed, raise_on_failure=False, directory=fast
        ),
        "served": lambda n, seed: check_served_contracts(
            scenarios=n, seed=seed, raise_on_failure=False, directory=fast
        ),
    }


async def _main(sizes: dict[str, int], seed: int) -> int:
    suites = _suites()
    rows = []
    failed = 0
    for path, n in sizes.items():
        started = time.perf_counter()
        report = await suites[path](n, seed)
        took = time.perf_counter() - started
        failed += len(report.failures)
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()) if v)
        rows.append((path, report.scenarios, len(report.failures), report.scenarios / took, kinds))
    print(f"\ncontract suite, seed {seed}\n")
    print("| path | scenarios | failures | scenarios/s | what they did |")
    print("|---|---|---|---|---|")
    for path, n, bad, rate, kinds in rows:
        print(f"| {path} | {n} | {bad} | {rate:.1f} | {kinds} |")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; the exit status is 1 when a scenario broke the contract."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: fresh)")
    parser.add_argument("--only", default="", help="comma-separated subset of " + ",".join(FULL))
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.only:
        chosen = [p.strip() for p in args.only.split(",") if p.strip()]
        unknown = sorted(set(chosen) - set(FULL))
        if unknown:
            parser.error(f"unknown path(s): {', '.join(unknown)}; choose from {', '.join(FULL)}")
        sizes = {p: sizes[p] for p in chosen}
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    status: int = anyio.run(_main, sizes, seed)
    return status


if __name__ == "__main__":
    sys.exit(main())

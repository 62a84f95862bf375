"""Manage durable runs (``agentkit.durable``, needs ``pip install 'agentkit[dbos]'``).

  agentkit durable recover --executor worker-3 --db postgresql://.../dbos
      Hand the pending runs of a dead worker to the living: every PENDING workflow of that
      executor id goes back to ENQUEUED, and a live worker (same application version)
      runs it, replaying its completed steps. Only for a worker that is gone for good.

  agentkit durable recover --executor worker-3 --db URL --dry-run
      List them without touching anything.

The database URL can also come from the DBOS_SYSTEM_DATABASE_URL environment variable.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``durable`` sub-commands to ``parser``."""
    sub = parser.add_subparsers(dest="durable_command", required=True, metavar="{recover}")
    recover = sub.add_parser("recover", help="take over a dead worker's pending runs")
    recover.add_argument("--executor", required=True, help="the dead worker's executor id")
    recover.add_argument(
        "--db",
        default=os.environ.get("DBOS_SYSTEM_DATABASE_URL"),
        help="DBOS system database URL (default: $DBOS_SYSTEM_DATABASE_URL)",
    )
    recover.add_argument("--queue", default=None, help="queue the taking workers consume")
    recover.add_argument("--dry-run", action="store_true", help="only list the runs")


def run(args: argparse.Namespace) -> int:
    """Run a ``durable`` sub-command; returns the exit status."""
    if not args.db:
        print(
            "agentkit durable recover: give --db URL (or DBOS_SYSTEM_DATABASE_URL)", file=sys.stderr
        )
        return 2
    try:
        from agentkit.durable import recover_executor
    except ImportError as exc:  # pragma: no cover - depends on the extra
        print(f"agentkit durable: {exc} (pip install 'agentkit[dbos]')", file=sys.stderr)
        return 2
    ids = recover_executor(args.db, args.executor, queue_name=args.queue, dry_run=args.dry_run)
    verb = "pending" if args.dry_run else "re-enqueued"
    print(f"{len(ids)} run(s) of executor {args.executor!r} {verb}")
    for workflow_id in ids:
        print(f"  {workflow_id}")
    return 0

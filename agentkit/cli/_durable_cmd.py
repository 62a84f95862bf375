"""Manage durable runs (``agentkit.durable``, needs ``pip install 'agentkit[dbos]'``).

  agentkit durable recover --executor worker-3 --db postgresql://.../dbos
      Hand the pending runs of a dead worker to the living: every PENDING workflow of that
      executor id goes back to ENQUEUED, and a live worker (same application version)
      runs it, replaying its completed steps. Only for a worker that is gone for good.

  agentkit durable recover --executor worker-3 --db URL --dry-run \
          [--application-version 2026.12] [--agent myapp.bots:durable]
      List them without touching anything, each with the DBOS application version and the
      agentkit code version it was recorded under, and the skew against the versions of a
      deploy: DBOS recovers a run only on its own application version, and a worker whose
      agent (``--agent module:attr``, a DBOSAgent) has another configuration refuses to
      finish a run with completed steps. Exit status 1 when any run has skew.

The database URL can also come from the DBOS_SYSTEM_DATABASE_URL environment variable.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

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
    recover.add_argument(
        "--application-version",
        default=None,
        help="with --dry-run: the DBOS application version the taking workers run",
    )
    recover.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="with --dry-run: a DBOSAgent of the new code to check the runs against",
    )


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
    if args.dry_run:
        return _dry_run(args)
    ids = recover_executor(args.db, args.executor, queue_name=args.queue)
    verb = "re-enqueued"
    print(f"{len(ids)} run(s) of executor {args.executor!r} {verb}")
    for workflow_id in ids:
        print(f"  {workflow_id}")
    return 0


def _load_agent(spec: str) -> Any:
    """The object ``module:attr`` names (the user's own code, named on the command line)."""
    import importlib

    module, _, attr = spec.partition(":")
    found: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        found = getattr(found, part)
    return found


def _dry_run(args: argparse.Namespace) -> int:
    from agentkit.durable import DBOSAgent, pending_runs
    from agentkit.durable._versions import describe

    agents = []
    for spec in args.agent:
        agent = _load_agent(spec)
        if not isinstance(agent, DBOSAgent):
            print(f"agentkit durable recover: {spec} is not a DBOSAgent", file=sys.stderr)
            return 2
        agents.append(agent)
    runs = pending_runs(
        args.db,
        args.executor,
        application_version=args.application_version,
        agents=agents,
    )
    skewed = [r for r in runs if r.skew is not None]
    print(f"{len(runs)} run(s) of executor {args.executor!r} pending, {len(skewed)} with skew")
    for r in runs:
        code = describe(r.code) if r.code is not None else "no agentkit version"
        print(f"  {r.workflow_id}  {r.workflow_name}  app {r.application_version!r}  {code}")
        if r.skew is not None:
            print(f"    SKEW: {r.skew}")
    return 1 if skewed else 0

"""Take over a dead worker's durable runs (``agentkit durable recover --executor ID``).

DBOS recovers, at launch, the pending workflows of the launching worker's own
``executor_id`` whose ``application_version`` matches; one of another version stays
``PENDING`` without a word. A worker that never comes back strands its runs;
:func:`recover_executor` hands them to the living: every ``PENDING`` workflow of that
executor is set back to ``ENQUEUED`` (``DBOSClient.resume_workflow``) on a queue, and
whichever worker consumes that queue (and has the workflows registered, on the same
application version) runs them, replaying their completed steps.

:func:`pending_runs` says beforehand what that would do: each pending run with the DBOS
application version and the agentkit code version it was recorded under, and the skew
against the versions a deploy will run (``agentkit durable recover --dry-run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkit.durable._versions import code_version, describe

if TYPE_CHECKING:
    from agentkit.durable._agent import DBOSAgent
    from agentkit.durable._records import CodeVersion

__all__ = ["PendingRun", "pending_runs", "recover_executor"]


@dataclass(frozen=True, slots=True)
class PendingRun:
    """A pending durable run as its record stands.

    Attributes:
        workflow_id: The DBOS workflow id.
        workflow_name: The workflow's name (``"agentkit.<name>"`` for a ``DBOSAgent``).
        application_version: The DBOS application version it was recorded under.
        code: The agentkit code version it recorded (None: not an agentkit run, or its
            input does not decode).
        skew: Why the given versions would not finish it (None: no skew found).
    """

    workflow_id: str
    workflow_name: str
    application_version: str | None
    code: CodeVersion | None
    skew: str | None


def _recorded_code(inputs: object) -> CodeVersion | None:
    args = getattr(inputs, "args", None)
    if args is None and isinstance(inputs, dict):
        args = inputs.get("args")
    request = args[0] if isinstance(args, (list, tuple)) and args else None
    code = request.get("code") if isinstance(request, dict) else None
    if isinstance(code, dict) and isinstance(code.get("agentkit"), str):
        return {"agentkit": str(code["agentkit"]), "agent": str(code.get("agent"))}
    return None


def pending_runs(
    system_database_url: str,
    executor_id: str,
    *,
    application_version: str | None = None,
    agents: Sequence[DBOSAgent[Any]] = (),
) -> list[PendingRun]:
    """The pending runs of ``executor_id``, each with its skew against a deploy's versions.

    Changes nothing.

    Args:
        system_database_url: The DBOS system database.
        executor_id: The worker whose runs to inspect.
        application_version: The DBOS application version the taking workers run (skew:
            a run recorded under another one is not recovered by DBOS).
        agents: The DBOS agents of the new code (skew: a run of one of them recorded
            under another code version, which such a worker refuses once it has steps).
    """
    from dbos import DBOSClient

    by_name = {agent.workflow_name: code_version(agent.template) for agent in agents}
    client = DBOSClient(system_database_url=system_database_url)
    try:
        found = client.list_workflows(
            status="PENDING", executor_id=executor_id, load_input=True, load_output=False
        )
    finally:
        client.destroy()
    runs = []
    for w in found:
        name, version = str(w.name), w.app_version
        # DBOS types it WorkflowInputs, but an input it cannot decode comes back as its text.
        recorded: object = w.input
        code = _recorded_code(recorded)
        skew: list[str] = []
        if application_version is not None and version != application_version:
            skew.append(
                f"recorded under application version {version!r}, the workers run "
                f"{application_version!r}: DBOS will not recover it on them"
            )
        current = by_name.get(name)
        if current is not None and code is not None and code != current:
            skew.append(
                f"recorded under {describe(code)}, the new code is {describe(current)}: "
                "a worker refuses to finish it"
            )
        elif name.startswith("agentkit.") and code is None and isinstance(recorded, str):
            skew.append("its recorded input does not decode: it will fail")
        runs.append(PendingRun(str(w.workflow_id), name, version, code, "; ".join(skew) or None))
    return runs


def recover_executor(
    system_database_url: str,
    executor_id: str,
    *,
    queue_name: str | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Re-enqueue the pending workflows of ``executor_id``; return their ids.

    Only run it for an executor that is dead: a live one would run its workflows too.

    Args:
        system_database_url: The DBOS system database (the workers' ``system_database_url``).
        executor_id: The dead worker's executor id.
        queue_name: The queue the takers consume (default: DBOS's internal queue, which
            every launched worker consumes).
        dry_run: Only list them (:func:`pending_runs` says more).
    """
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=system_database_url)
    try:
        pending = client.list_workflows(
            status="PENDING", executor_id=executor_id, load_input=False, load_output=False
        )
        ids = [str(w.workflow_id) for w in pending]
        if ids and not dry_run:
            client.resume_workflows(ids, queue_name=queue_name)
        return ids
    finally:
        client.destroy()

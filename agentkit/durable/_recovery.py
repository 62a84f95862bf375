"""Take over a dead worker's durable runs (``agentkit durable recover --executor ID``).

DBOS recovers, at launch, the pending workflows of the launching worker's own
``executor_id`` whose ``application_version`` matches. A worker that never comes back
strands its runs; :func:`recover_executor` hands them to the living: every ``PENDING``
workflow of that executor is set back to ``ENQUEUED`` (``DBOSClient.resume_workflow``) on a
queue, and whichever worker consumes that queue (and has the workflows registered, on the
same application version) runs them, replaying their completed steps.
"""

from __future__ import annotations

from typing import Any

__all__ = ["recover_executor"]


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
        dry_run: Only list them.
    """
    from dbos import DBOSClient

    client: Any = DBOSClient(system_database_url=system_database_url)
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

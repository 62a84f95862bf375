"""A remote exchange inside a DBOS step: its task id is recorded before the answer comes.

A durable run (``agentkit.durable``) runs a remote tool call or a remote handoff as a DBOS
step. A step is at least once: a worker that dies while it runs leaves no output, and the
recovered workflow executes it again. For a remote agent that would send the same message
twice (a second remote task, a second side effect), so inside a step ``A2AAgent`` keeps a
journal in the workflow's events (``DBOS.set_event``, written at once, not at the step's
end): before sending, the message id and context id; once the first event names it, the
remote task id. The step executed again finds the record and follows that task
(``GetTask``, then ``SubscribeToTask``) instead of sending; a record without a task id (the
worker died between sending and the first event) is looked up with ``ListTasks`` in the
recorded context, by message id.

DBOS is never imported here: only a process that runs DBOS workflows has steps, so the
journal is used only when ``dbos`` is loaded and a step is running.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from a2a.types.a2a_pb2 import Part

if TYPE_CHECKING:
    from dbos import DBOS

__all__ = ["Journal", "current_journal"]

_PREFIX = "agentkit.a2a"


class Journal:
    """The exchanges of one DBOS step, as events of its workflow."""

    def __init__(self, dbos: type[DBOS], workflow_id: str, step_id: int) -> None:
        self._dbos = dbos
        self.workflow_id = workflow_id
        self.step_id = step_id

    def key(self, task_id: str, parts: Sequence[Part]) -> str:
        """The event key of one message of this step (the same in every execution)."""
        digest = hashlib.sha256(task_id.encode())
        for part in parts:
            digest.update(part.SerializeToString(deterministic=True))
        return f"{_PREFIX}:{self.step_id}:{digest.hexdigest()[:32]}"

    async def get(self, key: str) -> dict[str, str] | None:
        """What an earlier execution of this step recorded under ``key`` (None: nothing)."""
        found = await self._dbos.get_event_async(self.workflow_id, key, 0)
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else None

    async def put(self, key: str, record: dict[str, str]) -> None:
        """Record ``record`` under ``key`` now (it outlives a crash of this step)."""
        await self._dbos.set_event_async(key, record)


def current_journal() -> Journal | None:
    """The journal of the DBOS step running now, or None outside one."""
    module = sys.modules.get("dbos")
    if module is None:
        return None
    dbos = module.DBOS
    workflow_id, step_id = dbos.workflow_id, dbos.step_id
    if workflow_id is None or step_id is None:
        return None
    return Journal(dbos, str(workflow_id), int(step_id))

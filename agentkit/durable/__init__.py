"""Durable agent runs on DBOS (optional: ``pip install 'agentkit[dbos]'``).

::

    from dbos import DBOS, DBOSPortableJSONSerializer
    from agentkit.durable import DBOSAgent

    DBOS(config={"name": "support-bot", "system_database_url": "sqlite:////srv/bot/dbos.sqlite",
                 "executor_id": "worker-1", "application_version": "2026.11",
                 "serializer": DBOSPortableJSONSerializer()})
    durable = DBOSAgent(agent, name="support", sessions=sessions)
    DBOS.launch()
    result = await durable.run("Refund order 42", session_id="user-7")

See ``docs/scaling.md`` for recovery, approvals, interrupts and the at-least-once boundary.
"""

from agentkit.agent._result import RunResult
from agentkit.durable._agent import DBOSAgent
from agentkit.durable._recovery import PendingRun, pending_runs, recover_executor
from agentkit.durable._results import DurableRunResult, approvals_record
from agentkit.durable._steering import APPROVALS_TOPIC, PENDING_EVENT, STEER_TOPIC
from agentkit.durable._steps import DurableModel, DurableToolkit, idempotency_key

__all__ = [
    "APPROVALS_TOPIC",
    "PENDING_EVENT",
    "STEER_TOPIC",
    "DBOSAgent",
    "DurableModel",
    "DurableRunResult",
    "DurableToolkit",
    "PendingRun",
    "RunResult",
    "approvals_record",
    "idempotency_key",
    "pending_runs",
    "recover_executor",
]

"""Durable served turns (``create_app(..., durable=True)``): each turn is a DBOS workflow.

A served turn runs through :meth:`DBOSAgent.run_on` on the run's own agent, so everything
the served path does with a run keeps working: the relay listener streams the agent's
events as the workflow produces them (each model answer arrives whole: it is one recorded
step), Stop and steer reach the agent, the thread's lease is held and renewed by the
worker. What changes is where the turn is committed: as the workflow's last step
(``agentkit.save``), so a turn whose worker died is committed by whichever worker DBOS
recovers the workflow on.

* **live** (the worker that took the HTTP request runs the workflow): the step commits
  through the run's ``Claim`` (the version check, bounded retries, the lease cleared),
  then the runner sends the last events; ``RUN_FINISHED`` still follows the commit.
* **recovered** (the worker died mid-turn; DBOS re-runs the workflow on a restarted or
  surviving worker, completed steps replayed from the log): there is no claim and no
  stream. The step reads the thread and commits the workflow's final state only while the
  stored lease still names the turn's run, with the store's version check; a thread that
  another run took over meanwhile is not overwritten (the turn is logged as lost).

The workflow id is ``agentkit.serve/<thread key>/<run id>/<random>``: a new run of a thread
whose lease has expired but whose turn is still being recovered is refused (``409``), found
by that prefix.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from agentkit._ids import new_id
from agentkit.exceptions import SessionConflictError, SessionError, UsageError
from agentkit.messages import Msg
from agentkit.serve._threads import ThreadStore

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.durable import DBOSAgent
    from agentkit.durable._records import RunOutput, RunRequest
    from agentkit.serve._runner import RunRequest as ServedRun

__all__ = ["DurableTurns"]

logger = logging.getLogger("agentkit.serve")

WORKFLOW_PREFIX = "agentkit.serve/"
RECOVERED_COMMIT_SECONDS = 30.0
"""How long a recovered turn retries a store that is down before its workflow fails."""
_UNFINISHED = ["PENDING", "ENQUEUED"]


class DurableTurns:
    """The served turns of one app as DBOS workflows (see the module docs).

    Build it before ``DBOS.launch()`` (it registers the workflow ``agentkit.serve.<agent
    name>``; recovery finds the workflow by that name).

    Args:
        template: The agent a recovered turn is restored on (its model, tools, prompt).
        store: The app's thread store.
    """

    def __init__(self, template: ReActAgent[Any, Any], store: ThreadStore) -> None:
        try:
            from agentkit.durable import DBOSAgent
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise UsageError(
                "create_app(durable=True) needs DBOS: pip install 'agentkit[dbos]'"
            ) from exc
        self.store = store
        # Commits of the turns this process runs live, by workflow id (the runner's claim).
        self.live: dict[str, Callable[[], Awaitable[None]]] = {}
        # approval_timeout=0: a served turn that pauses for approval ends (the approvals
        # arrive as the next turn, POST /threads/{id}/approvals), it never waits in DBOS.
        self.durable: DBOSAgent[Any] = DBOSAgent(
            template, name=f"serve.{template.name}", approval_timeout=0, save=self._save
        )

    @staticmethod
    def prefix(key: str) -> str:
        """The workflow id prefix of a thread's turns."""
        return f"{WORKFLOW_PREFIX}{key}/"

    async def recovering(self, key: str) -> bool:
        """Whether a turn of the thread is still unfinished in DBOS (being recovered)."""
        from dbos import DBOS

        found = await DBOS.list_workflows_async(
            workflow_id_prefix=self.prefix(key),
            status=_UNFINISHED,
            load_input=False,
            load_output=False,
            limit=1,
        )
        return bool(found)

    async def start(self, req: ServedRun, commit: Callable[[], Awaitable[None]]) -> Msg:
        """Run the served turn as a workflow; ``commit`` is called as its last step."""
        channel = req.channel
        key = ThreadStore.key(channel.owner, channel.thread_id)
        wid = f"{self.prefix(key)}{channel.run_id}/{new_id(nbytes=4)}"
        meta = {"owner": channel.owner, "thread_id": channel.thread_id, "run_id": channel.run_id}
        self.live[wid] = commit
        try:
            result = await self.durable.run_on(
                req.agent,
                None if req.approvals is not None else req.msgs,
                workflow_id=wid,
                approvals=dict(req.approvals) if req.approvals is not None else None,
                deps=req.deps,
                meta=meta,
            )
        finally:
            self.live.pop(wid, None)
        return result.reply

    async def _save(self, workflow_id: str, request: RunRequest, output: RunOutput) -> RunOutput:
        """The workflow's last step: commit the turn, live or recovered."""
        commit = self.live.pop(workflow_id, None)
        if commit is not None:  # this process holds the run's claim
            await commit()
            return {}
        meta = request.get("meta") or {}
        await self._commit_recovered(
            str(meta.get("owner")), str(meta.get("thread_id")), str(meta.get("run_id")), output
        )
        return {}

    async def _commit_recovered(
        self, owner: str, thread_id: str, run_id: str, output: RunOutput
    ) -> None:
        """Commit a recovered turn while the stored lease still names its run.

        Raises:
            SessionError: the store stayed unavailable for ``RECOVERED_COMMIT_SECONDS`` (the
                workflow fails; the log names the turn).
        """
        state = output.get("state")
        deadline = time.monotonic() + RECOVERED_COMMIT_SECONDS
        delay = 0.05
        while True:
            try:
                record = await self.store.load(owner, thread_id)
                lease = None if record is None else record.lease
                if record is None or not isinstance(lease, dict) or lease.get("run") != run_id:
                    if record is not None and lease is None and record.agent_state == state:
                        return  # committed by this step before a crash: not again
                    logger.error(
                        "lost the recovered turn of run %s of thread %s: the thread was "
                        "deleted or another run took it over",
                        run_id,
                        thread_id,
                    )
                    return
                record.agent_state = state
                record.lease = None
                await self.store.save(record)  # based on the version just read
                logger.info("committed the recovered turn %s of thread %s", run_id, thread_id)
                return
            except SessionConflictError:
                if time.monotonic() > deadline:
                    raise
                continue  # written meanwhile: read it again
            except SessionError:
                if time.monotonic() + delay > deadline:
                    logger.error(
                        "lost the recovered turn of run %s of thread %s: the store is unavailable",
                        run_id,
                        thread_id,
                    )
                    raise
                await anyio.sleep(delay)
                delay = min(delay * 2, 1.0)

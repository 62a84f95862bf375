"""The SDK's ``TaskStore`` on an agentkit ``Session``: tasks live beside the conversations.

A task is stored as its protocol JSON under the session id ``a2a-task:<task id>``; the
agent state of a context under ``a2a-context:<context id>`` (see ``_executor``). So every
worker on one store answers ``GetTask`` for any task, and a restart loses nothing.

The SDK saves a task on every event it applies (submitted, working, each answer chunk,
the final state) and reads it back several times as a task starts. Most of that is this
worker talking to itself, so the store keeps the task this worker runs in memory and
writes only what other workers need: the first state (the task exists, with its context,
so ``GetTask``/``CancelTask`` find it anywhere), then the working updates at most once per
``refresh_interval`` seconds, and every settled state (completed, failed, canceled,
rejected, input-required, auth-required) at once, before the SDK sends it on. A task id
this worker just generated is known to be absent (no read). Reads of a task running here
answer from memory; any other task is read from the store.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict

from agentkit._ids import new_uuid
from agentkit.session import Session

__all__ = [
    "CONTEXT_PREFIX",
    "TASK_PREFIX",
    "FreshTaskIds",
    "SessionTaskStore",
    "context_key",
    "task_key",
]

TASK_PREFIX = "a2a-task:"
CONTEXT_PREFIX = "a2a-context:"
_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})
"""The states whose writes can wait: the task goes on here (any other state is settled)."""
_FRESH_MAX = 1024  # ids generated here and not saved yet (a request that failed first)


def task_key(task_id: str) -> str:
    """The session id a task is stored under."""
    return f"{TASK_PREFIX}{task_id}"


def context_key(context_id: str) -> str:
    """The session id a context's agent state is stored under."""
    return f"{CONTEXT_PREFIX}{context_id}"


def _to_state(task: Task) -> dict[str, object]:
    state: dict[str, object] = {"task": MessageToDict(task, preserving_proto_field_name=True)}
    return state


def _from_state(state: dict[str, object]) -> Task:
    task = Task()
    stored = state.get("task")
    ParseDict(stored if isinstance(stored, dict) else {}, task, ignore_unknown_fields=True)
    return task


class SessionTaskStore(TaskStore):
    """``TaskStore`` on a ``Session``: one stored entry per task (see the module docs).

    Saves are last-writer-wins per task (the SDK's consumer is the task's one writer on
    the worker that runs it); a task is visible to every worker on the store from its first
    save, its settled states at once, its working updates at most ``refresh_interval``
    seconds late.

    Args:
        session: The store (the same one the conversations are kept in).
        refresh_interval: Seconds a working update of a task running here may wait
            before it is written (0: write every save).
    """

    def __init__(self, session: Session, *, refresh_interval: float = 1.0) -> None:
        self.session = session
        self.refresh_interval = refresh_interval
        self._running: dict[str, Task] = {}  # the latest copy of each task running here
        self._written: dict[str, float] = {}  # task id -> when it was last written
        self._fresh: OrderedDict[str, None] = OrderedDict()

    def new_task_id(self) -> str:
        """A new task id, known to be absent from the store until its first save."""
        task_id = new_uuid()
        self._fresh[task_id] = None
        while len(self._fresh) > _FRESH_MAX:
            self._fresh.popitem(last=False)
        return task_id

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Store ``task`` (replacing the stored copy), or keep a working update for later."""
        task_id = task.id
        self._fresh.pop(task_id, None)
        running = task.status.state in _RUNNING
        now = time.monotonic()
        last = self._written.get(task_id)
        if running:
            self._running[task_id] = _copy(task)
            if last is not None and now - last < self.refresh_interval:
                return  # written with a later update, or with the settled state
        await self.session.save_state(task_key(task_id), _to_state(task))
        if running:
            self._written[task_id] = now
        else:  # settled: the store has the truth; another worker may act on it next
            self._running.pop(task_id, None)
            self._written.pop(task_id, None)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task (running here: its latest copy), or None."""
        running = self._running.get(task_id)
        if running is not None:
            return _copy(running)
        if task_id in self._fresh or not task_id or len(task_key(task_id)) > 200:
            return None
        try:
            state = await self.session.load_state(task_key(task_id))
        except ValueError:  # an id the store cannot hold (control characters...)
            return None
        return None if state is None else _from_state(state)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the stored tasks, most recently saved first.

        Filters on ``context_id`` and ``status``; ``page_token`` is the store's cursor.
        """
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        size = min(size, MAX_LIST_TASKS_PAGE_SIZE)
        try:
            page = await self.session.list_sessions(
                prefix=TASK_PREFIX, limit=size, cursor=params.page_token or None
            )
        except ValueError as exc:
            raise InvalidParamsError(message=f"bad page token: {exc}") from None
        tasks = []
        for info in page.sessions:
            state = await self.session.load_state(info.session_id)
            if state is None:
                continue
            task = _from_state(state)
            if params.context_id and task.context_id != params.context_id:
                continue
            if params.status and task.status.state != params.status:
                continue
            tasks.append(task)
        return ListTasksResponse(
            tasks=tasks, next_page_token=page.next_cursor or "", page_size=size
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the stored task (a no-op when there is none)."""
        self._running.pop(task_id, None)
        self._written.pop(task_id, None)
        await self.session.delete(task_key(task_id))


class FreshTaskIds(IDGenerator):
    """The SDK's task id generator: ids the store knows are new (no read for them)."""

    def __init__(self, store: SessionTaskStore) -> None:
        self.store = store

    def generate(self, context: IDGeneratorContext) -> str:
        """A new task id (``SessionTaskStore.new_task_id``)."""
        return self.store.new_task_id()


def _copy(task: Task) -> Task:
    copied = Task()
    copied.CopyFrom(task)
    return copied

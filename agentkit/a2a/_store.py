"""The SDK's ``TaskStore`` on an agentkit ``Session``: tasks live beside the conversations.

A task is stored as its protocol JSON under the session id ``a2a-task:<task id>``; the
agent state of a context under ``a2a-context:<context id>`` (see ``_executor``). So every
worker on one store answers ``GetTask`` for any task, and a restart loses nothing.
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict

from agentkit.session import Session

__all__ = ["CONTEXT_PREFIX", "TASK_PREFIX", "SessionTaskStore", "context_key", "task_key"]

TASK_PREFIX = "a2a-task:"
CONTEXT_PREFIX = "a2a-context:"


def task_key(task_id: str) -> str:
    """The session id a task is stored under."""
    return f"{TASK_PREFIX}{task_id}"


def context_key(context_id: str) -> str:
    """The session id a context's agent state is stored under."""
    return f"{CONTEXT_PREFIX}{context_id}"


def _to_state(task: Task) -> dict[str, object]:
    state: dict[str, Any] = {"task": MessageToDict(task, preserving_proto_field_name=True)}
    return state


def _from_state(state: dict[str, object]) -> Task:
    task = Task()
    stored = state.get("task")
    ParseDict(stored if isinstance(stored, dict) else {}, task, ignore_unknown_fields=True)
    return task


class SessionTaskStore(TaskStore):
    """``TaskStore`` on a ``Session``: one stored entry per task.

    Saves are last-writer-wins per task (the SDK's consumer is the task's one writer on
    the worker that runs it); a task is visible to every worker on the store at once.

    Args:
        session: The store (the same one the conversations are kept in).
    """

    def __init__(self, session: Session) -> None:
        self.session = session

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Store ``task`` (replacing the stored copy)."""
        await self.session.save_state(task_key(task.id), _to_state(task))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The stored task, or None."""
        if not task_id or len(task_key(task_id)) > 200:
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
        await self.session.delete(task_key(task_id))

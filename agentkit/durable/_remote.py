"""A remote handoff target (``A2AAgent``) in a durable run: its exchange is a DBOS step.

A remote target runs its own loop on its own side, so ``_make_durable`` cannot make its
model and tools steps; instead each ``take_over`` (the handed-over conversation, or the
decisions for a remote task waiting for input) is one step at the handoff call's reserved
id, whose recorded output is the answer (or the wait). A recovered workflow replays the
answer instead of sending the conversation again. A crash *during* the exchange executes
the step again; the remote agent journals its exchange inside the step (``A2AAgent``: the
remote task id, recorded as soon as it is known), so that execution follows the task the
first one started rather than sending a second message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agentkit.agent._conversation import NESTED_APPROVAL, NestedResume, NestedWait, nested_wait
from agentkit.durable._steps import RunSteps, in_workflow, keyed_call
from agentkit.events import AgentEvent
from agentkit.exceptions import AgentkitError
from agentkit.messages import Msg

if TYPE_CHECKING:
    from dbos import StepOptions

    from agentkit.agent._handoffs import RemoteTarget

__all__ = ["DurableRemote"]


class DurableRemote:
    """``remote`` (a ``RemoteTarget``) whose exchanges are steps inside a workflow.

    Outside a workflow it delegates as is. An error of the remote (its task failed, the
    server cannot be reached) is recorded as the step's output and raised again on replay
    (as an ``AgentkitError`` with the same message), so the source answers itself the same
    way every time.

    Args:
        remote: The remote target.
        steps: The run's bookkeeping (the handoff call's reserved step id).
    """

    def __init__(self, remote: RemoteTarget, steps: RunSteps) -> None:
        self.remote = remote
        self.steps = steps
        self.name = remote.name
        self.description = remote.description

    async def take_over(
        self,
        history: list[Msg],
        *,
        state: Mapping[str, object] | None,
        resume: NestedResume | None,
        call_id: str,
        emit: Callable[[AgentEvent], None] | None,
    ) -> Msg | NestedWait | None:
        """The remote's ``take_over`` as a step (or its recorded outcome)."""
        if not in_workflow():
            return await self.remote.take_over(
                history, state=state, resume=resume, call_id=call_id, emit=emit
            )
        from dbos import DBOS

        async def exchange() -> dict[str, object]:
            with keyed_call(f"{DBOS.workflow_id}/{call_id}"):
                try:
                    outcome = await self.remote.take_over(
                        history, state=state, resume=resume, call_id=call_id, emit=emit
                    )
                except AgentkitError as exc:
                    return {"error": str(exc)}
            if outcome is None:
                return {"denied": True}
            if isinstance(outcome, NestedWait):
                return {"wait": {"error": NESTED_APPROVAL, **outcome.to_dict()}}
            return {"answer": outcome.to_dict()}

        options: StepOptions = {"name": f"handoff:{self.name}"}
        reservation = self.steps.reserved.pop(call_id, None)
        if reservation is not None:
            record = await reservation.run_async(options, exchange)
        else:
            record = await DBOS.run_step_async(options, exchange)
        return _outcome(record)


def _outcome(record: object) -> Msg | NestedWait | None:
    """The exchange's recorded outcome (raises a recorded error again).

    Raises:
        TypeError: for a record that is not a handoff outcome (a corrupt or foreign one).
    """
    if not isinstance(record, dict):
        raise TypeError(f"not a handoff outcome: {str(record)[:200]!r}")
    if "error" in record:
        raise AgentkitError(str(record["error"]))
    if "wait" in record:
        return nested_wait(_fields(record["wait"]))
    if "answer" in record:
        return Msg.from_dict(_fields(record["answer"]))
    return None


def _fields(value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise TypeError(f"not a JSON object: {str(value)[:200]!r}")
    return value

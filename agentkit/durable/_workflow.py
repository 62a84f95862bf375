"""The body of a ``DBOSAgent``'s workflow: one durable run, from its record to its output.

``DurableWorkflow`` is the part of ``DBOSAgent`` that runs inside DBOS: it decodes the
recorded request, restores the agent (a fresh copy of the template, or the agent a
``run_on`` caller prepared), gets the run's deps and output type back, drives the replies
through the approval waits with the run's steers recorded, and saves the session (or calls
the ``save`` hook) as the workflow's last step. See ``agentkit.durable._agent`` for the
whole story.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeAlias

from agentkit.agent._limits import UsageLimits
from agentkit.agent._runs import DepsT
from agentkit.agent._steer import steer_source
from agentkit.durable._records import RunOutput, RunRequest
from agentkit.durable._remote import DurableRemote
from agentkit.durable._results import (
    AgentRun,
    Outcome,
    approvals_from_record,
    resolve_output_type,
    sum_usage,
)
from agentkit.durable._steering import (
    APPROVALS_TOPIC,
    INTERRUPT_KEY,
    PENDING_EVENT,
    DurableHolder,
    WorkflowSteers,
)
from agentkit.durable._steps import DurableModel, DurableToolkit, RunSteps
from agentkit.durable._versions import check_code_version, code_version
from agentkit.exceptions import SessionConflictError, StateError, UsageError
from agentkit.messages import Msg
from agentkit.session._control import hold_session

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent import ReActAgent
    from agentkit.session._base import Session

__all__ = ["DepsFactory", "DurableWorkflow", "SaveStep"]

DepsFactory: TypeAlias = "Callable[[str, str | None], DepsT | Awaitable[DepsT]]"
"""``deps_factory(workflow_id, session_id)``: the deps of a run executed without the ones
its caller gave (sync or async)."""

SaveStep: TypeAlias = "Callable[[str, RunRequest, RunOutput], Coroutine[object, None, RunOutput]]"
"""``save(workflow_id, request, output)``: the workflow's last step instead of the session
save; what it returns (JSON) is merged into the workflow's output."""


@dataclass(frozen=True, slots=True)
class _Typed(Generic[DepsT]):
    """What a workflow execution runs with besides its messages (never recorded as is)."""

    deps: DepsT | None
    output_type: type[BaseModel] | None
    limits: UsageLimits | None


class DurableWorkflow(Generic[DepsT]):
    """The workflow body of a ``DBOSAgent`` (its arguments are ``DBOSAgent``'s).

    Args:
        agent: The template agent (not run itself; never modified).
        sessions: Store of the conversations (runs that pass ``session_id``).
        control: Store whose control channel delivers interrupts (default: ``sessions``).
        approval_timeout: Seconds a run waits for approval decisions.
        deps_factory: Builds the deps of a run executed without its caller's.
        save: The workflow's last step in place of the session save.
    """

    def __init__(
        self,
        agent: ReActAgent[DepsT],
        *,
        sessions: Session | None,
        control: Session | None,
        approval_timeout: float,
        deps_factory: DepsFactory[DepsT] | None,
        save: SaveStep | None,
    ) -> None:
        self.template = agent
        self.sessions = sessions
        self.control = control if control is not None else sessions
        self.approval_timeout = approval_timeout
        self.deps_factory = deps_factory
        self.save = save
        # Deps given to run()/enqueue() in this process, by workflow id, until the workflow
        # takes them: they are never part of its input.
        self._live_deps: dict[str, DepsT] = {}
        # Agents prepared by run_on() callers in this process, by workflow id, likewise.
        self._live_agents: dict[str, ReActAgent[DepsT]] = {}

    def fresh_copy(self, steps: RunSteps) -> ReActAgent[DepsT]:
        """A copy of the template with its own memory and durable model/toolkit."""
        # A conversation of its own.
        return make_durable(self.template.copy(), steps, self.template)

    async def _typed(self, request: RunRequest, workflow_id: str) -> _Typed[DepsT]:
        """The deps, output type and limits of this execution (see the module docs).

        Runs before the first step, so a run that cannot have them fails having done
        nothing.
        """
        name = request.get("output_type")
        output_type = resolve_output_type(name) if name else None
        recorded = request.get("usage_limits")
        limits = UsageLimits(**recorded) if recorded is not None else None
        deps: DepsT | None = self._live_deps.pop(workflow_id, None)
        if deps is None and self.deps_factory is not None:
            made = self.deps_factory(workflow_id, request.get("session_id"))
            deps = await made if isinstance(made, Awaitable) else made
        elif deps is None and request.get("has_deps"):
            raise UsageError(
                f"durable run {workflow_id!r} was started with deps=, which are never "
                "recorded, and this execution of it (a recovery, a queued run taken by "
                "another process, a fork) has none: give DBOSAgent(..., deps_factory=...) "
                "to build them"
            )
        return _Typed(deps, output_type, limits)

    async def _run_workflow(self, request: RunRequest) -> RunOutput:
        from dbos import DBOS

        workflow_id = str(DBOS.workflow_id)
        steps = RunSteps(workflow_id)
        # Everything that reads the record runs before the first step: a record that does
        # not decode, or one from other code, fails this workflow having done nothing.
        if not isinstance(request, dict):
            raise StateError(
                f"the recorded input of durable run {workflow_id!r} does not decode as an "
                f"agentkit run request: it is a {type(request).__name__}, not an object"
            )
        await check_code_version(workflow_id, request.get("code"), code_version(self.template))
        typed = await self._typed(request, workflow_id)
        live = self._live_agents.pop(workflow_id, None)
        try:
            if live is not None:  # run_on() in this process: the caller's agent, state in it
                agent = make_durable(live, steps)
            else:
                agent = self.fresh_copy(steps)
                state = request.get("state")
                if state is not None:
                    agent.load_state_dict(state)
            msgs = [Msg.from_dict(m) for m in request.get("input") or []]
        except (StateError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(
                f"the recorded input of durable run {workflow_id!r} does not decode as an "
                f"agentkit run request (a corrupt or foreign DBOS record): {exc}"
            ) from exc
        key = str(request.get("session_id") or workflow_id)
        if self.control is None:
            outcome = await self._steered(agent, msgs, typed, request.get("approvals"))
        else:
            # Held for the whole run, approval waits included: an interrupt that finds no
            # reply running but calls pending is mailed to the workflow's own recv.
            holder = DurableHolder(agent, workflow_id)
            async with hold_session(self.control, key, holder):
                outcome = await self._steered(agent, msgs, typed, request.get("approvals"))
        steps.raise_corrupt()  # a tool step whose record did not decode: fail, never finish
        return await self._finish(request, agent, outcome)

    async def _steered(
        self,
        agent: ReActAgent[DepsT],
        msgs: list[Msg],
        typed: _Typed[DepsT],
        first: Mapping[str, object] | None,
    ) -> Outcome:
        """``_drive`` with the run's steers recorded (see the module docs)."""
        from dbos import DBOS

        steers = WorkflowSteers(str(DBOS.workflow_id))
        with steer_source(agent.memory, steers):
            try:
                outcome = await self._drive(agent, msgs, typed, first, steers.settle)
                await steers.drain(agent)
            except BaseException:
                steers.abandon()
                raise
        return outcome

    async def _drive(
        self,
        agent: ReActAgent[DepsT],
        msgs: list[Msg],
        typed: _Typed[DepsT],
        first: Mapping[str, object] | None = None,
        on_pause: Callable[[], None] | None = None,
    ) -> Outcome:
        """The first reply, then one more per approval decision, until nothing is pending.

        ``first``: recorded decisions the first reply resolves (instead of new input);
        ``on_pause``: called each time the run starts waiting for decisions.
        """
        from dbos import DBOS

        output_type = typed.output_type
        run: AgentRun
        if first:
            run = await agent.run(
                approvals=approvals_from_record(first),
                deps=typed.deps,
                output_type=output_type,
                usage_limits=typed.limits,
            )
        else:
            run = await agent.run(
                msgs, deps=typed.deps, output_type=output_type, usage_limits=typed.limits
            )
        outcome = Outcome(run, sum_usage({}, run.usage), list(run.new_messages))
        while agent.pending_tool_calls and not outcome.run.interrupted:
            if on_pause is not None:
                on_pause()
            await DBOS.set_event_async(PENDING_EVENT, agent.pending_tool_calls)
            decisions = await DBOS.recv_async(APPROVALS_TOPIC, self.approval_timeout)
            if not isinstance(decisions, dict):
                break  # timed out: the run ends with the calls pending (state keeps them)
            if INTERRUPT_KEY in decisions:  # recorded by recv: replays the same way
                text = decisions[INTERRUPT_KEY]
                run = await agent.interrupt_pending(text if isinstance(text, str) else None)
            else:
                pending_ids = {c["id"] for c in agent.pending_tool_calls}
                approvals = {k: v for k, v in decisions.items() if k in pending_ids}
                run = await agent.run(
                    approvals=approvals_from_record(approvals),
                    deps=typed.deps,
                    output_type=output_type,
                )
            outcome.add(run)
        return outcome

    async def _finish(
        self, request: RunRequest, agent: ReActAgent[DepsT], outcome: Outcome
    ) -> RunOutput:
        """The workflow's output; saves the session as the workflow's last step."""
        from dbos import DBOS

        run = outcome.run
        state = agent.state_dict()
        structured = (run.reply.metadata or {}).get("structured_output")
        output: RunOutput = {
            "reply": run.reply.to_dict(),
            "state": state,
            "interrupted": run.interrupted,
            "pending": agent.pending_tool_calls,
            "session_version": None,
            "usage": outcome.usage,
            "stop_reason": run.stop_reason,
            "usage_limit": run.usage_limit,
            "last_agent": run.last_agent,
            "output_type": request.get("output_type"),
            "output": structured if isinstance(structured, dict) else None,
            "new_messages": [m.to_dict() for m in outcome.new_messages],
        }
        if self.save is not None:
            saved = await DBOS.run_step_async(
                {"name": "agentkit.save"}, self.save, str(DBOS.workflow_id), request, output
            )
            output.update(saved)
        elif request.get("session_id") is not None and self.sessions is not None:
            saved = await DBOS.run_step_async(
                {"name": "agentkit.save_session"}, self._save_session, request, state
            )
            output.update(saved)
        return output

    async def _save_session(self, request: RunRequest, state: dict[str, object]) -> RunOutput:
        assert self.sessions is not None
        sid, expected = request["session_id"], request.get("session_version")
        assert sid is not None  # the workflow saves only a run that has a session
        try:
            version = await self.sessions.save_state(sid, state, expected_version=expected)
        except SessionConflictError as exc:
            # Saved already by this step before a crash (recovery runs it again)?
            found = await self.sessions.load_versioned(sid)
            if expected is not None and found == (state, expected + 1):
                return {"session_version": expected + 1}
            return {
                "session_conflict": {
                    "session_id": sid,
                    "expected": exc.expected,
                    "actual": exc.actual,
                }
            }
        return {"session_version": version}


def make_durable(
    agent: ReActAgent[DepsT],
    steps: RunSteps,
    origin: ReActAgent[DepsT] | None = None,
    made: dict[int, ReActAgent[DepsT]] | None = None,
) -> ReActAgent[DepsT]:
    """``agent`` with its model and toolkit as DBOS steps (in place), handoffs included.

    A handoff target runs its own loop (its model calls and tools), so it gets a durable
    copy too: otherwise a recovery would send the target's requests and run its tools
    again instead of replaying them. A remote target (``A2AAgent``) gets a
    ``DurableRemote``: each exchange with it is a step. ``origin`` is the agent ``agent``
    was copied from (a target handing back to it gets ``agent``); ``made`` maps the
    targets already copied, so handoff cycles (a -> b -> a) end.
    """
    from agentkit.agent import ReActAgent  # the agent package is loaded by now

    made = {} if made is None else made
    made[id(origin if origin is not None else agent)] = agent
    agent.model = DurableModel(agent.model, steps)
    agent.toolkit = DurableToolkit(agent.toolkit, steps)
    agent.print_hint = False
    if agent.handoffs:
        targets = []
        for target in agent.handoffs:
            local = target.agent
            if not isinstance(local, ReActAgent):  # a remote agent: its exchange is a step
                targets.append(dataclasses.replace(target, agent=DurableRemote(local, steps)))
                continue
            durable = made.get(id(local))
            if durable is None:
                durable = make_durable(local.copy(), steps, local, made)
            targets.append(dataclasses.replace(target, agent=durable))
        agent.handoffs = targets
    return agent

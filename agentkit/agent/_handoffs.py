"""Handoffs: an agent passes the conversation to another agent, which answers in its place.

``ReActAgent(..., handoffs=[billing, handoff(tech, input_filter=...)])`` offers the model one
tool per target (``transfer_to_<name>``). When the model calls one, the loop runs the turn's
other calls first, then hands off (:func:`hand_off`):

1. The handoff call is answered ``"Transferred to <name>."``; the history (the source's memory
   with this turn's answered calls, so every tool call has its result) goes through the
   target's ``input_filter`` and becomes the memory of a *copy* of the target
   (``agent.copy()``: concurrent conversations share nothing, the template is untouched).
2. The copy runs (same deps, output type and usage limits; its events stream through the
   source's listeners, minus its own start/finish markers), and its usage is counted in the
   source's run. It may hand off again, up to ``MAX_HANDOFF_DEPTH`` handoffs deep; beyond
   that the call is refused with an error result and the agent answers itself.
3. The source's memory gets the call, its result and the target's answer (an assistant
   message authored by the target), so the source's next turn continues coherently; the
   run's reply is that answer and ``result.last_agent`` is the name of the agent that gave it.

Interrupting the source while the target answers interrupts the target (it repairs its own
memory); what it had said is stored in the source's memory as an interrupted answer. A
target that pauses for approval pauses the source too, like an agent used as a tool: its
calls appear as ``"<handoff call id>/<inner id>"`` and decisions resume the target from its
saved state (denying the handoff call itself cancels them and the source continues).

A remote target (``RemoteTarget``: an ``agentkit.a2a.A2AAgent``) keeps its side of the
conversation itself: it gets the filtered history (from the message after its previous
answer in this conversation, so a remote context never receives a message twice) and the
state it returned last time (its A2A context id), stored in the metadata of its answer in
the source's memory (``metadata["handoff"]``), so it survives save/load and served
threads. A remote task waiting for input pauses the source like a nested approval; a
remote failure answers the handoff call with an error and the source answers itself.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

import anyio

from agentkit.agent._acting import commit_results, denied_response, result_block, settle
from agentkit.agent._conversation import NestedResume, NestedWait, resume_scope
from agentkit.agent._state import PENDING, new_msg, store
from agentkit.events import (
    AgentEvent,
    ApprovalRequested,
    Interrupted,
    ReplyFinished,
    ReplyStarted,
    TextDelta,
    ToolCallStarted,
    ToolResult,
)
from agentkit.exceptions import AgentkitError, UsageError
from agentkit.messages import Msg, ToolResultBlock, ToolUseBlock
from agentkit.models._base import ToolDefinition
from agentkit.tools._context import DepsT
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.agent._conversation import Conversation
    from agentkit.agent._react import ReActAgent
    from agentkit.agent._result import OutputT, RunResult
    from agentkit.agent._setup import RunSetup
    from agentkit.agent._state import Run

__all__ = [
    "MAX_HANDOFF_DEPTH",
    "Handoff",
    "HandoffInput",
    "InputFilter",
    "RemoteTarget",
    "as_handoffs",
    "finish_handoff",
    "hand_off",
    "handoff",
    "handoff_definitions",
    "handoffs_of",
    "split_handoffs",
]

MAX_HANDOFF_DEPTH = 5
"""How many handoffs one run may chain (a -> b -> c ... ); a call beyond it is refused."""
INTERRUPT_GRACE = 10.0
"""Seconds an interrupted target gets to repair its memory before it is cancelled."""

InputFilter: TypeAlias = Callable[[list[Msg]], list[Msg]]
"""Receives the conversation handed off (valid: every call has its result); returns the
messages the target starts from (they must stay valid: no call without its result)."""


@runtime_checkable
class RemoteTarget(Protocol):
    """A handoff target that holds its side of the conversation itself (``A2AAgent``)."""

    name: str
    description: str | None

    async def take_over(
        self,
        history: list[Msg],
        *,
        state: Mapping[str, object] | None,
        resume: NestedResume | None,
        call_id: str,
        emit: Callable[[AgentEvent], None] | None,
    ) -> Msg | NestedWait | None:
        """Answer the conversation ``history`` (or resume the wait of ``resume``).

        Args:
            history: The messages since its previous answer here, through the filter
                (empty when resuming).
            state: What its previous answer in this conversation returned as
                ``metadata["handoff_state"]`` (None: the first handoff to it).
            resume: The decisions for its wait, when the handoff call waited for input.
            call_id: The handoff call's id (its progress events name it).
            emit: Where its events go (None: nobody listens).

        Returns:
            The answer, a ``NestedWait`` (it waits for input), or None (the handoff call
            was denied while it waited).
        """
        ...


HandoffInput: TypeAlias = "ReActAgent[Any, Any] | RemoteTarget | Handoff"

_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("agentkit_handoff_depth", default=0)
_PARAMETERS: dict[str, object] = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True, slots=True)
class Handoff:
    """A target an agent may hand the conversation to (built by ``handoff(agent, ...)``).

    Attributes:
        agent: The target agent (each handoff runs on ``agent.copy()``).
        tool_name: The name of the tool offered to the model (``transfer_to_<name>``).
        description: The tool's description, for the model.
        input_filter: Maps the history to the target's input (None: the whole history).
    """

    agent: ReActAgent[Any, Any] | RemoteTarget
    tool_name: str
    description: str
    input_filter: InputFilter | None = None

    @property
    def definition(self) -> ToolDefinition:
        """The tool offered to the model for this handoff (it takes no arguments)."""
        return ToolDefinition(self.tool_name, self.description, _PARAMETERS)


def handoff(
    agent: ReActAgent[Any, Any] | RemoteTarget,
    *,
    input_filter: InputFilter | None = None,
    description: str | None = None,
    name: str | None = None,
) -> Handoff:
    """A handoff to ``agent``, for ``ReActAgent(..., handoffs=[...])``.

    Args:
        agent: The agent that takes over the conversation: a ``ReActAgent`` (a copy
            answers), or a remote one (``agentkit.a2a.A2AAgent``: it receives the history
            as text, see docs/a2a.md).
        input_filter: ``(messages) -> messages``: what the target sees of the history
            (default: all of it, the handoff call answered).
        description: The tool description for the model (default: a sentence naming the
            agent, with the first line of its system prompt).
        name: The tool name (default: ``transfer_to_<agent name>``, made a valid tool name).

    Raises:
        UsageError: for a target that cannot take over a conversation, or a bad name.
    """
    remote = isinstance(agent, RemoteTarget)
    if not remote and (not callable(getattr(agent, "copy", None)) or not hasattr(agent, "memory")):
        raise UsageError(
            f"cannot hand off to {agent!r}: a handoff target must be a ReActAgent or a "
            "remote agent (A2AAgent)"
        )
    tool_name = name if name is not None else _tool_name(agent.name)
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool_name):
        raise UsageError(f"handoff name {tool_name!r} is not a valid tool name")
    if description is None and isinstance(agent, RemoteTarget):
        description = (
            f"Hand the conversation over to the remote agent {agent.name!r}, which answers."
        )
        if agent.description:
            description += f" What it does: {agent.description[:200]}"
    elif description is None:
        assert not isinstance(agent, RemoteTarget)
        first = agent.sys_prompt.strip().splitlines()[0] if agent.sys_prompt.strip() else ""
        description = f"Hand the conversation over to the agent {agent.name!r}, which answers."
        if first:
            description += f" It is told: {first[:200]}"
    return Handoff(agent, tool_name, description, input_filter)


def _tool_name(agent_name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", agent_name).strip("_") or "agent"
    return f"transfer_to_{safe}"[:64]


def as_handoffs(items: Iterable[HandoffInput]) -> tuple[Handoff, ...]:
    """Normalize ``handoffs=``: agents become default handoffs; tool names must differ.

    Raises:
        UsageError: for two handoffs with the same tool name.
    """
    out = tuple(item if isinstance(item, Handoff) else handoff(item) for item in items)
    seen: set[str] = set()
    for h in out:
        if h.tool_name in seen:
            raise UsageError(f"two handoffs use the tool name {h.tool_name!r}; pass name=")
        seen.add(h.tool_name)
    return out


def handoff_definitions(handoffs: Sequence[Handoff]) -> list[ToolDefinition]:
    """The tools of ``handoffs`` (offered beside the toolkit's)."""
    return [h.definition for h in handoffs]


def handoffs_of(setup: RunSetup) -> tuple[Handoff, ...]:
    """The handoffs of the agent running ``setup`` (``ReActAgent.handoffs``)."""
    found = getattr(setup.owner, "handoffs", ())
    return found if isinstance(found, tuple) else ()


def split_handoffs(
    setup: RunSetup, run: Run, indexes: Sequence[int]
) -> tuple[list[int], tuple[int, Handoff] | None]:
    """Split the calls to run into tool calls and the handoff to take (at most one).

    The first handoff call of the turn is taken; further ones, and one beyond
    ``MAX_HANDOFF_DEPTH``, are answered here with an error result (they never run).
    """
    handoffs = {h.tool_name: h for h in handoffs_of(setup)}
    if not handoffs or run.batch is None:
        return list(indexes), None
    batch = run.batch
    tools: list[int] = []
    taken: tuple[int, Handoff] | None = None
    for i in indexes:
        target = handoffs.get(batch[i]["name"])
        if target is None:
            tools.append(i)
        elif taken is not None:
            settle(
                run,
                i,
                ToolResponse.error(
                    f"Only one handoff per turn: the conversation goes to "
                    f"{taken[1].agent.name!r}; this one was not taken."
                ),
            )
        elif _DEPTH.get() >= MAX_HANDOFF_DEPTH and i not in _resumed(run, batch):
            settle(
                run,
                i,
                ToolResponse.error(
                    f"Handoff refused: the conversation was already handed over "
                    f"{MAX_HANDOFF_DEPTH} times in this run. Answer the user yourself."
                ),
            )
        else:
            taken = (i, target)
    return tools, taken


def _resumed(run: Run, batch: list[ToolUseBlock]) -> set[int]:
    return {i for i, call in enumerate(batch) if call["id"] in run.calls.resumes}


def _transferred(target: Handoff) -> ToolResponse:
    return ToolResponse.text(
        f"Transferred to {target.agent.name}.", metadata={"handoff": target.agent.name}
    )


def _history(msgs: list[Msg], run: Run, index: int, target: Handoff) -> list[Msg]:
    """The source's memory plus this turn's answered calls: a valid conversation.

    The turn's calls still without a final result (waiting for approval) are left out of
    the target's copy of the assistant message, so every call it sees has its result.
    """
    batch = run.batch
    assert batch is not None
    answered: dict[str, ToolResultBlock] = {}
    for i, call in enumerate(batch):
        result = _transferred(target) if i == index else run.calls.results[i]
        if isinstance(result, ToolResponse) and result is not PENDING:
            answered[call["id"]] = result_block(call, result)
    ids = {call["id"] for call in batch}
    history = list(msgs)
    if history and history[-1].role == "assistant":
        last = history[-1]
        blocks = [
            b
            for b in last.get_content_blocks()
            if b["type"] != "tool_use" or b["id"] in answered or b["id"] not in ids
        ]
        history[-1] = Msg(
            last.name, blocks, "assistant", last.metadata, id=last.id, timestamp=last.timestamp
        )
    history.append(
        new_msg(history[-1].name if history else "user", list(answered.values()), "user")
    )
    return history


def _forwarder(run: Run) -> Callable[[AgentEvent], None] | None:
    emit = run.emit
    if emit is None:
        return None
    # The target's own start/finish markers would end the source's reply in a client's
    # eyes; the source emits its own (its ApprovalRequested names the nested ids).
    skipped = (ReplyStarted, ReplyFinished, Interrupted, ApprovalRequested)

    def forward(event: AgentEvent) -> None:
        if not isinstance(event, skipped):
            emit(event)

    return forward


def _count(run: Run, result: RunResult[object]) -> None:
    """Add the target's usage to the source's run."""
    usage, counts = result.usage, run.counts
    counts.requests += usage.requests
    counts.input_tokens += usage.input_tokens
    counts.output_tokens += usage.output_tokens
    counts.tool_calls += usage.tool_calls
    for model, n in usage.models.items():
        counts.models[model] = counts.models.get(model, 0) + n
    counts.cost = None if usage.cost is None or counts.cost is None else counts.cost + usage.cost
    from agentkit.models._base import ChatUsage

    run.outcome.usage = run.outcome.usage + ChatUsage(usage.input_tokens, usage.output_tokens)


async def hand_off(
    setup: RunSetup, conv: Conversation, run: Run, index: int, target: Handoff
) -> RunResult[object] | Msg | None:
    """Run ``target`` on the conversation for the call ``run.batch[index]``.

    Returns the target's result once it answered (the call is answered ``Transferred``):
    a ``RunResult`` of a local target, the answer of a remote one; None when there is
    nothing to finish with: the target paused for approval (the call is left ``PENDING``
    with its ``NestedWait``), the handoff call was denied, or a remote target failed (the
    call is answered with the error and the source goes on).
    """
    batch = run.batch
    assert batch is not None
    call = batch[index]
    run.counts.tool_calls += 1  # a call of an offered tool, as UsageLimits count it
    if run.emit is not None:
        run.emit(ToolCallStarted(call))
    resume = run.calls.resumes.pop(call["id"], None)
    if isinstance(target.agent, RemoteTarget):
        return await _hand_off_remote(conv, run, index, target, target.agent, resume)
    agent = target.agent.copy()
    if resume is not None:
        agent.load_state_dict(resume.wait.state)
        if resume.cancel is not None:  # the handoff itself was denied: its calls never run
            await agent.interrupt_pending()
            settle(run, index, denied_response(resume.cancel.reason or False))
            return None
    else:
        history = _history(await conv.memory.get_memory(), run, index, target)
        if target.input_filter is not None:
            history = list(target.input_filter(history))
        await agent.memory.add(history)
    forward = _forwarder(run)
    if forward is not None and run.emit is not None:
        # The call is answered for the client before the target speaks (its slot is set
        # once the target is done: a target that pauses leaves it pending).
        run.emit(ToolResult(call["id"], result_block(call, _transferred(target))))
        agent.add_event_listener(forward)
    result = await _interruptible(setup, conv, run, index, target, agent, resume)
    _count(run, result)
    if result.stop_reason == "pending_approval" and not result.interrupted:
        calls = (result.reply.metadata or {}).get("pending_tool_calls") or []
        run.calls.waits[call["id"]] = NestedWait(tuple(calls), agent.state_dict())
        run.calls.results[index] = PENDING
        return None
    run.calls.results[index] = _transferred(target)  # its ToolResult event went out already
    return result


async def _hand_off_remote(
    conv: Conversation,
    run: Run,
    index: int,
    target: Handoff,
    remote: RemoteTarget,
    resume: NestedResume | None,
) -> Msg | None:
    """``hand_off`` for a remote target (see the module docs)."""
    batch = run.batch
    assert batch is not None
    call = batch[index]
    history: list[Msg] = []
    state: Mapping[str, object] | None = None
    if resume is None:
        msgs = await conv.memory.get_memory()
        start, state = _remote_state(msgs, target)
        history = _history(msgs[start:], run, index, target)
        if target.input_filter is not None:
            history = list(target.input_filter(history))
    answered = False
    emit = run.emit

    def forward(event: AgentEvent) -> None:
        # The call is answered for the client before the target's text streams (as for
        # a local target); the slot is set once the remote is done.
        nonlocal answered
        if emit is None:
            return
        if isinstance(event, TextDelta) and not answered:
            answered = True
            emit(ToolResult(call["id"], result_block(call, _transferred(target))))
        emit(event)

    try:
        outcome = await remote.take_over(
            history, state=state, resume=resume, call_id=call["id"], emit=forward
        )
    except AgentkitError as exc:  # the source answers itself; its memory stays valid
        settle(
            run,
            index,
            ToolResponse.error(f"The handoff to {remote.name!r} failed: {exc}. Answer yourself."),
        )
        return None
    if outcome is None:  # the handoff call was denied while the remote waited
        reason = resume.cancel.reason if resume is not None and resume.cancel else None
        settle(run, index, denied_response(reason or False))
        return None
    if isinstance(outcome, NestedWait):
        run.calls.waits[call["id"]] = outcome
        run.calls.results[index] = PENDING
        return None
    if answered:
        run.calls.results[index] = _transferred(target)  # its ToolResult event went out already
    else:
        settle(run, index, _transferred(target))
    metadata = dict(outcome.metadata or {})
    saved = metadata.pop("handoff_state", None)
    metadata["handoff"] = {
        "target": target.tool_name,
        "state": saved if isinstance(saved, dict) else {},
    }
    return Msg(outcome.name, outcome.content, "assistant", metadata, id=outcome.id)


def _remote_state(msgs: list[Msg], target: Handoff) -> tuple[int, Mapping[str, object] | None]:
    """Where the history for a remote target starts, and the state of its last answer."""
    for i in range(len(msgs) - 1, -1, -1):
        saved = (msgs[i].metadata or {}).get("handoff")
        if isinstance(saved, dict) and saved.get("target") == target.tool_name:
            state = saved.get("state")
            return i + 1, state if isinstance(state, dict) else None
    return 0, None


async def _interruptible(
    setup: RunSetup,
    conv: Conversation,
    run: Run,
    index: int,
    target: Handoff,
    agent: ReActAgent[DepsT, OutputT],
    resume: NestedResume | None,
) -> RunResult[object]:
    """Run the target so that cancelling the source *interrupts* it.

    The target's run is shielded in a child task; a cancellation of the source (its
    ``interrupt()``, a time limit) becomes ``agent.interrupt()`` on the target, which answers
    its open calls and returns what it said. That is stored in the source's memory, after
    the handoff call's result, before the cancellation goes on to the source's own repair.
    """
    deps = setup.context.deps
    structured: Any = None if run.output.plan is None else run.output.plan.output_type

    def work() -> Awaitable[RunResult[object]]:
        if resume is not None:
            return agent.run(
                approvals=resume.approvals,
                deps=deps,
                output_type=structured,
                usage_limits=setup.limits,
            )
        return agent.run(None, deps=deps, output_type=structured, usage_limits=setup.limits)

    done = anyio.Event()
    shield = anyio.CancelScope(shield=True)
    outcome: list[RunResult[object]] = []
    errors: list[Exception] = []

    async def body() -> None:
        token = _DEPTH.set(_DEPTH.get() + 1)
        try:
            with shield, resume_scope(None):
                try:
                    outcome.append(await work())
                except Exception as exc:  # re-raised below, in the source's task
                    errors.append(exc)
        finally:
            _DEPTH.reset(token)
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(body)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                if await agent.interrupt():
                    with anyio.move_on_after(INTERRUPT_GRACE):
                        await done.wait()
                shield.cancel()
                await done.wait()
                if outcome:
                    _count(run, outcome[0])
                    await _keep_interrupted(setup, conv, run, index, target, outcome[0])
            raise
    if errors:
        raise errors[0]
    return outcome[0]


async def _keep_interrupted(
    setup: RunSetup,
    conv: Conversation,
    run: Run,
    index: int,
    target: Handoff,
    result: RunResult[object],
) -> None:
    """Store what an interrupted target said in the source's memory (shielded caller)."""
    run.calls.results[index] = _transferred(target)  # its ToolResult event went out already
    await commit_results(setup, conv, run)
    text = [b for b in result.reply.get_content_blocks() if b["type"] == "text"]
    if text:
        await store(
            conv.memory, new_msg(result.last_agent, text, "assistant", {"interrupted": True}), run
        )
        run.turn.last_text = text
    run.outcome.last_agent = result.last_agent


async def finish_handoff(conv: Conversation, run: Run, result: RunResult[object] | Msg) -> Msg:
    """Store the target's answer in the source's memory; return the source's reply.

    ``result`` is a local target's ``RunResult``, or a remote target's answer (its
    ``metadata["handoff"]`` is stored with it: the next handoff to it continues from there).
    """
    if isinstance(result, Msg):
        answer, last_agent = result, result.name
        kept = {"handoff": result.metadata["handoff"]} if result.metadata else None
        stored = new_msg(last_agent, answer.content, "assistant", kept)
    else:
        answer, last_agent = result.reply, result.last_agent
        stored = new_msg(last_agent, answer.content, "assistant")
        if result.usage_limit is not None:
            run.usage_limit = result.usage_limit
        if result.stop_reason == "max_iters":
            run.outcome.max_iters_reached = True
    await store(conv.memory, stored, run)
    run.outcome.last_agent = last_agent
    run.turn.last_text = [b for b in stored.get_content_blocks() if b["type"] == "text"]
    metadata = run.metadata()
    for key in ("structured_output", "finish_reason", "max_iters_reached", "usage_limit"):
        if answer.metadata and key in answer.metadata:
            metadata[key] = answer.metadata[key]
    if run.output.plan is not None:
        value = (answer.metadata or {}).get("structured_output")
        if isinstance(value, dict):
            run.output.data = value
            run.output.value = run.output.plan.validate(value)
    return Msg(
        last_agent,
        answer.content,
        "assistant",
        metadata,
        id=stored.id,
        timestamp=stored.timestamp,
    )

"""The reply loop: one function per step (see ``steps``), one driver, and finalization.

Every step function takes the run's frozen ``RunSetup``, the ``Conversation`` and the
``Run`` scratch state, and returns the next step. Each step leaves memory valid at every
await: the assistant message and ``run.batch`` are set together, results are stored
together, and :func:`finalize` (run shielded, outside the cancelled scope) answers whatever
a cut left open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import anyio

import agentkit._seams as _obs
from agentkit.agent._acting import (
    NEW_MESSAGE_TEXT,
    accept_answers,
    commit_results,
    denied_response,
    execute,
    offered_tools,
    refuse,
    settle,
    triage,
)
from agentkit.agent._guardrails import check_output, guarded_reason, guarding, input_guards
from agentkit.agent._handoffs import (
    finish_handoff,
    hand_off,
    handoff_definitions,
    handoffs_of,
    split_handoffs,
)
from agentkit.agent._limits import CUT_TEXT, LIMIT_TEXT
from agentkit.agent._reasoning import reason, unique_call_ids
from agentkit.agent._state import PENDING, answered_by, new_msg, store
from agentkit.agent._steer import close as close_steers
from agentkit.agent._steer import follow_up
from agentkit.agent._steps import Execute, Finish, Reason, Settle, Step, Summarize, Triage
from agentkit.agent._structured import MAX_STRUCTURED_RETRIES
from agentkit.agent._validators import accept_text, validate_text
from agentkit.events import ApprovalRequested, Interrupted, PartialOutput
from agentkit.exceptions import StructuredOutputError
from agentkit.messages import ContentBlock, Msg, TextBlock
from agentkit.tools import INTERRUPTED_TEXT
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.agent._conversation import Conversation
    from agentkit.agent._guardrails import InputGuardrail
    from agentkit.agent._setup import RunSetup
    from agentkit.agent._state import Run
    from agentkit.models._base import ToolDefinition

__all__ = [
    "Settle",
    "drive",
    "finalize",
    "first_step",
    "limit_before",
    "run_step",
    "wrap_up",
    "wrap_up_suspends",
]

SUMMARY_HINT = (
    "You have reached the maximum number of steps for this task. Do not call any tools. "
    "Answer now: summarize what you did, what you found, and what is left to do."
)
CANCELLED_TEXT = "Tool call cancelled before it finished."


def _missing_text(error: BaseException | None) -> str:
    """The result of a call that a cut left unfinished."""
    if error is None:
        return INTERRUPTED_TEXT
    if isinstance(error, anyio.get_cancelled_exc_class()):
        return CANCELLED_TEXT
    return f"{CANCELLED_TEXT[:-1]} because the reply failed ({type(error).__name__})."


# -- replies -----------------------------------------------------------------------------
async def _tools_for(
    setup: RunSetup, run: Run, force_tool: str | None = None
) -> tuple[list[ToolDefinition] | None, str | None]:
    toolkit = setup.toolkit
    tools = toolkit.get_tool_definitions() if toolkit is not None else []
    handoffs = handoffs_of(setup)
    if handoffs:  # offered beside the toolkit's tools (see _handoffs)
        tools = [*tools, *handoff_definitions(handoffs)]
    if setup.capabilities.tools:  # asked again for each request: they may change
        run.calls.offered = None
        offered = await offered_tools(setup, run)
        tools = [*tools, *(tool.tool_definition for tool in offered.values())]
    plan = run.output.plan
    if plan is None or plan.mode_for(setup.model) != "tool":
        return (tools or None), None  # a text mode: the answer is the reply's text
    choice = force_tool or "required"
    return [*tools, *run.output.response_tools()], choice


def _finish(setup: RunSetup, run: Run, last: Msg, **extra: object) -> Finish:
    metadata = run.metadata()
    metadata.update(extra)
    if run.turn.finish_reason is not None:  # "length"/"max_tokens": the answer was cut short
        metadata["finish_reason"] = run.turn.finish_reason
    if run.output.data is not None:
        metadata["structured_output"] = run.output.data
        if run.emit is not None and run.output.streamed != run.output.data:
            # The last partial is the accepted answer (defaults filled, validators applied).
            run.output.streamed = run.output.data
            run.emit(PartialOutput(dict(run.output.data)))
        content: list[ContentBlock] = list(run.turn.last_text) or [
            TextBlock(type="text", text=json.dumps(run.output.data, ensure_ascii=False))
        ]
        return Finish(
            last.replace(name=setup.name, content=content, role="assistant", metadata=metadata)
        )
    # The stored answer's id, timestamp and content, kept as they are: its blocks were
    # checked when it was made, and its packed id and timestamp need no round trip as text.
    return Finish(last.replace(name=setup.name, role="assistant", metadata=metadata))


def _pending_reply(setup: RunSetup, conv: Conversation, run: Run) -> Finish:
    calls = conv.pending_calls()
    _obs.approval_required(calls)  # observability seam: span events
    if run.emit is not None:
        run.emit(ApprovalRequested(tuple(calls)))
    metadata = run.metadata()
    metadata["pending_tool_calls"] = calls
    if run.output.data is not None:
        metadata["structured_output"] = run.output.data
    return Finish(Msg(setup.name, list(run.turn.last_text), "assistant", metadata))


def _limit_reply(setup: RunSetup, conv: Conversation, run: Run, limit: str) -> Finish:
    """The reply of a run stopped by a usage limit (every call already answered)."""
    run.usage_limit = limit
    metadata = run.metadata()
    metadata["usage_limit"] = limit
    if run.output.data is not None:
        metadata["structured_output"] = run.output.data
    if conv.has_pending:
        metadata["pending_tool_calls"] = conv.pending_calls()
    return Finish(Msg(setup.name, list(run.turn.last_text), "assistant", metadata))


def _guardrail_reply(setup: RunSetup, conv: Conversation, run: Run) -> Finish:
    """The reply of a run a guardrail stopped (every call already answered), like a limit's.

    The reply carries no answer: a refused answer is not the run's to return.
    """
    assert run.outcome.guardrail is not None
    metadata = run.metadata()
    metadata["guardrail"] = run.outcome.guardrail.to_dict()
    if conv.has_pending:
        metadata["pending_tool_calls"] = conv.pending_calls()
    return Finish(Msg(setup.name, [], "assistant", metadata))


def _check_structured(run: Run) -> None:
    if run.output.plan is not None and run.output.failures > MAX_STRUCTURED_RETRIES:
        raise StructuredOutputError(
            f"the model failed to produce a valid {run.output.plan.name} "
            f"after {MAX_STRUCTURED_RETRIES} retries"
        )


# -- steps -------------------------------------------------------------------------------
async def _reason(setup: RunSetup, conv: Conversation, run: Run, step: Reason) -> Step:
    if run.iteration >= setup.max_iters:
        return Summarize()
    # A run's first request waits for its input guardrails (a resume's first is not one).
    guards = input_guards(setup) if run.iteration == 0 and setup.capabilities.all else ()
    run.iteration += 1
    tools, choice = await _tools_for(setup, run, step.force_tool)
    if guards:
        answer = await _guarded(setup, conv, run, guards, tools, choice)
        if answer is None:
            return _guardrail_reply(setup, conv, run)
        assistant = answer
    else:
        assistant = await reason(setup, conv, run, tools, choice)
    if run.batch is not None:
        return Triage(assistant)
    plan = run.output.plan
    if plan is None:
        if setup.output_validators:
            checked = await validate_text(setup, conv, run, assistant)
            if checked is None:  # rejected: the model was told why, it answers again
                return Reason()
            assistant = checked
        return _finish(setup, run, assistant)
    if plan.mode_for(setup.model) != "tool":  # the text is the answer
        if await accept_text(setup, conv, run, assistant):
            return _finish(setup, run, assistant)
        return Reason()  # told what was wrong, the model answers again
    # Structured output was requested but the model answered in prose: insist.
    run.output.failures += 1
    _check_structured(run)
    return Reason(force_tool=plan.forced_choice())


def _guarded(
    setup: RunSetup,
    conv: Conversation,
    run: Run,
    guards: tuple[InputGuardrail[Any], ...],
    tools: list[ToolDefinition] | None,
    choice: str | None,
) -> Awaitable[Msg | None]:
    """The request of :func:`_reason` behind the run's input guardrails.

    A function of its own, not a lambda in ``_reason``: a lambda there would make closure
    cells of four of its variables on every call, guardrails or not, all of them held while
    the model answers.
    """
    return guarded_reason(setup, run, guards, lambda s: reason(s, conv, run, tools, choice))


async def _summarize(setup: RunSetup, conv: Conversation, run: Run) -> Step:
    """At max_iters: one last model call that may not use tools (except the response tool)."""
    hint = Msg("user", SUMMARY_HINT, "user")
    run.outcome.max_iters_reached = True
    plan = run.output.plan
    if plan is None:
        tools, _ = await _tools_for(setup, run)
        assistant = await reason(
            setup, conv, run, tools, "none" if tools else None, extra=hint, allow_calls=False
        )
        return _finish(setup, run, assistant, max_iters_reached=True)
    if plan.mode_for(setup.model) != "tool":
        tools, _ = await _tools_for(setup, run)
        assistant = await reason(
            setup, conv, run, tools, "none" if tools else None, extra=hint, allow_calls=False
        )
        if not await accept_text(setup, conv, run, assistant, last=True):
            raise StructuredOutputError(
                f"max_iters ({setup.max_iters}) reached without a valid {plan.name}"
            )
        return _finish(setup, run, assistant, max_iters_reached=True)
    only = run.output.response_tools()
    assistant = await reason(setup, conv, run, only, plan.forced_choice(), extra=hint)
    if run.batch is not None:
        await execute(setup, run, await triage(setup, run))
        await commit_results(setup, conv, run)
    if run.output.data is None:
        raise StructuredOutputError(
            f"max_iters ({setup.max_iters}) reached without a valid {plan.name}"
        )
    return _finish(setup, run, assistant, max_iters_reached=True)


async def _execute(setup: RunSetup, conv: Conversation, run: Run, step: Execute) -> Step:
    indexes, taken = split_handoffs(setup, run, step.indexes)
    await execute(setup, run, indexes)
    handed = None
    if taken is not None:  # after the turn's other calls: the target sees their results
        handed = await hand_off(setup, conv, run, *taken)
    await commit_results(setup, conv, run)
    if conv.has_pending:
        return _pending_reply(setup, conv, run)
    if step.assistant is None:  # resumed approvals: the pause is over
        with anyio.CancelScope(shield=True):
            await conv.flush_deferred(run)  # messages observed while the calls were pending
    if handed is not None:
        return Finish(await finish_handoff(conv, run, handed))
    if run.output.data is not None:
        last = step.assistant or Msg(setup.name, list(run.turn.last_text), "assistant")
        return _finish(setup, run, last)
    _check_structured(run)
    return Reason()


async def _settle(setup: RunSetup, conv: Conversation, run: Run, step: Settle) -> Step:
    # Decisions on calls waiting inside a call (nested approvals) re-invoke that call with
    # a ``NestedResume``: its tool routes them to the agent holding the calls.
    decisions, run.calls.resumes = conv.route(dict(step.approvals))
    decided = [c for c in conv.pending if c["id"] in decisions or c["id"] in run.calls.resumes]
    if not decided:
        return _pending_reply(setup, conv, run)
    conv.pending = [c for c in conv.pending if c not in decided]
    batch, runnable, denied = [], [], []
    for i, call in enumerate(decided):
        decision = decisions.get(call["id"])
        if decision is None or decision.approved:
            runnable.append(i)
            if decision is not None:
                run.approve(call["id"])
                if decision.input is not None:  # the human's arguments replace the model's
                    call = call.copy()
                    call["input"] = dict(decision.input)
        else:
            denied.append((i, decision.reason or False))
        batch.append(call)
    run.begin_batch(batch)
    for i, why in denied:
        _obs.tool_denied(batch[i], why)  # observability seam: span event
        settle(run, i, denied_response(why))
    return Execute(tuple(runnable))


def run_step(setup: RunSetup, conv: Conversation, run: Run, step: Step) -> Awaitable[Step]:
    """Run one step; return the next.

    A plain function handing on the step's own coroutine: the driver awaits that directly,
    so no dispatching coroutine is held while the step waits (the model's answer, mostly).
    """
    match step:
        case Reason():
            return _reason(setup, conv, run, step)
        case Triage():
            return _triage(setup, run, step)
        case Execute():
            return _execute(setup, conv, run, step)
        case Settle():
            return _settle(setup, conv, run, step)
        case Summarize():
            return _summarize(setup, conv, run)
        case Finish():
            return _finished(step)


async def _triage(setup: RunSetup, run: Run, step: Triage) -> Step:
    return Execute(tuple(await triage(setup, run)), step.assistant)


async def _finished(step: Finish) -> Step:
    return step


def limit_before(setup: RunSetup, run: Run, step: Step) -> str | None:
    """The usage limit that forbids ``step``, if any."""
    limits = setup.limits
    if limits is None:
        return None
    match step:
        case Reason() | Summarize():
            return limits.before_request(run.counts)
        case Triage():
            return limits.after_response(run.counts)
        case Execute():
            return limits.before_tools(run.counts, len(step.indexes))
        case _:
            return None


async def _stop_at_limit(
    setup: RunSetup, conv: Conversation, run: Run, step: Step, limit: str
) -> Finish:
    """Answer every open call without running it, then finish at ``limit``.

    A valid structured answer in the turn that reached the limit is kept and ends the run
    as final (like a text answer that reaches one); only its other calls are refused.
    """
    if run.batch is not None:
        if isinstance(step, Triage):
            await accept_answers(setup, run)
        refuse(run, limit)
        await commit_results(setup, conv, run)
        if run.output.data is not None and isinstance(step, Triage | Execute):
            last = step.assistant or Msg(setup.name, list(run.turn.last_text), "assistant")
            return _finish(setup, run, last)
    return _limit_reply(setup, conv, run, limit)


def drive(setup: RunSetup, conv: Conversation, run: Run, step: Step) -> Awaitable[Msg]:
    """Run steps from ``step`` until one finishes the run; return its reply.

    With a time bound (``max_wall_time``, ``model_call_timeout``) the steps run under cancel
    scopes with deadlines: a deadline that passes cancels the step where it is, as
    ``interrupt()`` would, and :func:`_cut_at_limit` repairs memory and ends the run at
    that limit.

    A plain function handing on the coroutine that runs the steps: without capabilities
    and time bounds (the common case) that is the step loop itself, so a waiting turn holds
    no forwarding coroutine (each one is objects the collector walks while the model
    answers).
    """
    limits = setup.limits
    if not setup.capabilities.all and (limits is None or not limits.timed):
        return _steps(setup, conv, run, step, None)
    return _bounded(setup, conv, run, step)


async def _bounded(setup: RunSetup, conv: Conversation, run: Run, step: Step) -> Msg:
    """The steps where a tool guardrail records its trip, under the run's time bounds."""
    # Where a tool guardrail records a trip that stops the run (none can trip without one).
    with guarding(run) if setup.capabilities.all else nullcontext():
        limits = setup.limits
        if limits is None or not limits.timed:
            return await _steps(setup, conv, run, step, None)
        wall = limits.max_wall_time
        deadline = float("inf")
        if wall is not None:  # counted from the run's start: pre_reply hooks took their share
            started = run.control.started
            deadline = anyio.current_time() + wall - (time.perf_counter() - started)
        with anyio.CancelScope(deadline=deadline) as budget:
            return await _steps(setup, conv, run, step, limits.model_call_timeout)
        # Only reached when the budget's own deadline cut the steps (an interrupt propagates).
        assert budget.cancelled_caught
        return await _cut_at_limit(setup, conv, run, "max_wall_time")


async def _steps(
    setup: RunSetup, conv: Conversation, run: Run, step: Step, call_timeout: float | None
) -> Msg:
    limited = setup.limits is not None  # without limits: no check to call at each step
    while not isinstance(step, Finish) or await _follow_up(setup, conv, run):
        if isinstance(step, Finish):  # steering: a follow-up turn answers a late steer
            step = Reason()
        limit = limit_before(setup, run, step) if limited else None
        if limit is not None:  # answer every open call, then stop
            step = await _stop_at_limit(setup, conv, run, step, limit)
            break
        if call_timeout is None or not isinstance(step, Reason | Summarize):
            step = await run_step(setup, conv, run, step)
        else:
            with anyio.move_on_after(call_timeout) as call:
                step = await run_step(setup, conv, run, step)
            if call.cancelled_caught:
                return await _cut_at_limit(setup, conv, run, "model_call_timeout")
        if run.outcome.guardrail is not None:  # a guardrail tripped: the run ends, like at a limit
            return _guardrail_reply(setup, conv, run).reply
    return await _checked_output(setup, conv, run, step.reply)


async def _checked_output(setup: RunSetup, conv: Conversation, run: Run, reply: Msg) -> Msg:
    """``reply``, or the guardrail's reply when an output guardrail refuses the answer."""
    if not setup.capabilities.all or conv.has_pending or run.usage_limit is not None:
        return reply  # no answer to check (paused, or stopped at a limit)
    if run.output.plan is None:
        output: object = reply.get_text()
    elif run.output.value is not None:
        output = run.output.value
    else:
        return reply
    if await check_output(setup, run, output):
        return _guardrail_reply(setup, conv, run).reply
    return reply


async def _follow_up(setup: RunSetup, conv: Conversation, run: Run) -> bool:
    """Steers queued after the last request: stored for a follow-up turn (if one may run)."""
    return await follow_up(conv, run, limit_before(setup, run, Reason()) is None)


async def _cut_at_limit(setup: RunSetup, conv: Conversation, run: Run, limit: str) -> Msg:
    """End a run whose time bound ``limit`` cut a step: the interrupt's repair, then the limit.

    What the model streamed is kept, calls that were cut get a cancelled result and calls
    waiting for approval are refused (the run ends here, as at any limit). A structured
    answer accepted before the cut ends the run as final, as in :func:`_stop_at_limit`.
    """
    with anyio.CancelScope(shield=True):
        text = _text_blocks(await _store_partial(setup, conv, run, {"usage_limit": limit}))
        if text:
            run.turn.last_text = text
        for i, result in enumerate(run.calls.results):
            if result is PENDING:
                settle(run, i, ToolResponse.error(LIMIT_TEXT.format(limit=limit)))
        await commit_results(setup, conv, run, CUT_TEXT.format(limit=limit))
    if run.output.data is not None:
        return _finish(setup, run, Msg(setup.name, list(run.turn.last_text), "assistant")).reply
    return _limit_reply(setup, conv, run, limit).reply


async def _deny_pending(setup: RunSetup, conv: Conversation, run: Run, text: str) -> None:
    # A call waiting on calls inside it is re-invoked to cancel them (nested approvals).
    run.calls.resumes = conv.cancel_nested(text)
    calls, conv.pending = conv.pending, []
    run.begin_batch(calls)
    nested = []
    for i in range(len(calls)):
        _obs.tool_denied(calls[i], text)  # observability seam: span event
        if calls[i]["id"] in run.calls.resumes:
            nested.append(i)
        else:
            settle(run, i, ToolResponse.error(text))
    if nested:
        await execute(setup, run, nested)
    await commit_results(setup, conv, run)
    with anyio.CancelScope(shield=True):
        await conv.flush_deferred(run)


async def first_step(setup: RunSetup, conv: Conversation, run: Run, msgs: list[Msg]) -> Step:
    """Store the input of ``await agent(msg)``; a new message denies pending calls."""
    if conv.has_pending:
        if not msgs:  # nothing decided: report the pending calls again
            run.iteration = conv.iteration
            return Settle(())
        await _deny_pending(setup, conv, run, NEW_MESSAGE_TEXT)
    if msgs:
        await store(conv.memory, msgs, run)
    run.inbox = ()
    return Reason()


# -- after a cut -------------------------------------------------------------------------
async def _store_partial(
    setup: RunSetup, conv: Conversation, run: Run, marker: dict[str, object]
) -> Msg | None:
    """Store what the model streamed before a cut; return the stored message (None: none).

    Text is kept and unfinished tool calls are dropped; the complete calls, which never
    ran, become the open batch so that they get a result. ``marker`` is the stored
    message's metadata (why it was cut), a dict of the caller's own.
    """
    partial, run.turn.partial = run.turn.partial, None
    if partial is None or run.batch is not None:
        return None
    content = [b for b in partial.content if not (b["type"] == "tool_use" and "raw_input" in b)]
    content = unique_call_ids(content)
    run.count_response(partial.usage, answered_by(setup.model, partial))
    if not content:
        return None
    msg = new_msg(setup.name, content, "assistant", marker)
    await store(conv.memory, msg, run)
    calls = [b for b in content if b["type"] == "tool_use"]
    if calls:
        run.begin_batch(calls)  # complete calls that never ran: answer them
    return msg


def _text_blocks(msg: Msg | None) -> list[TextBlock]:
    """The text blocks of a stored partial (none: no partial was stored)."""
    if msg is None:
        return []
    return [b for b in msg.get_content_blocks() if b["type"] == "text"]


async def finalize(
    setup: RunSetup, conv: Conversation, run: Run, error: BaseException | None
) -> Msg:
    """Repair memory after a cut (interrupt when ``error`` is None); build the reply.

    Stores the partial assistant message (text kept, unfinished tool calls dropped), answers
    every open call, then adds the messages given to ``interrupt``. Must not be cut: run it
    shielded, unless :func:`wrap_up_suspends` says that nothing in it can suspend.
    """
    stored = await _store_partial(setup, conv, run, {"interrupted": True})
    text = _text_blocks(stored)
    whole = stored is not None and len(text) == len(stored.content)  # all text
    if not text:  # cut after the turn was stored (e.g. in post_reply): its text is the answer
        text = list(run.turn.last_text)
    await commit_results(setup, conv, run, _missing_text(error))
    if run.inbox:  # cut before the input was stored (e.g. in a pre_reply hook): keep it
        if conv.has_pending:
            await _deny_pending(setup, conv, run, NEW_MESSAGE_TEXT)
        inbox, run.inbox = run.inbox, ()
        await store(conv.memory, list(inbox), run)
    msgs, run.control.interrupt_msgs = run.control.interrupt_msgs, ()
    if msgs:
        await store(conv.memory, list(msgs), run)
    metadata = run.metadata()
    metadata["interrupted"] = True
    if conv.has_pending:
        metadata["pending_tool_calls"] = conv.pending_calls()
    if whole:
        assert stored is not None
        # The stored partial is all text (a cut answer, the common case): the reply is that
        # message, as a finished reply is its stored answer (same id, the blocks checked
        # once, when they were stored).
        result = stored.replace(metadata=metadata)
    else:
        result = new_msg(setup.name, text, "assistant", metadata)
    if error is None and run.emit is not None:
        run.emit(Interrupted(result))
    return result


def wrap_up_suspends(conv: Conversation, run: Run) -> bool:
    """Whether the writes after a reply's body may suspend (so a cancellation could cut them).

    They cannot when memory's ``add`` never suspends (``atomic_add``) and no pending call
    is to be denied by a cut input (a call waiting on calls inside it is re-invoked then):
    the caller then needs no shield around :func:`wrap_up`, a scope entered for nothing.
    """
    return not conv.memory.atomic_add or (bool(run.inbox) and conv.has_pending)


async def wrap_up(setup: RunSetup, conv: Conversation, run: Run, reply: Msg | None) -> Msg:
    """The writes after a reply's body; return the reply.

    After a cut (``reply`` None) :func:`finalize` repairs memory and builds the reply;
    otherwise messages given to a late ``interrupt`` (too late to cut anything) are stored.
    Then the undelivered steers are kept and the deferred messages stored. Must not be cut
    (see :func:`wrap_up_suspends`).
    """
    if reply is None:
        reply = await finalize(setup, conv, run, None)
    elif run.control.interrupt_msgs:
        await store(conv.memory, list(run.control.interrupt_msgs), run)
    close_steers(conv, run)  # undelivered steers: kept for the next request
    await conv.flush_deferred(run)
    return reply

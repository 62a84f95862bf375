"""The reply loop: reason -> act -> decide, plus resume after approval and finalization.

Each step leaves memory valid at every await: the assistant message and ``run.batch`` are
set together, results are stored together, and :func:`finalize` (run shielded, outside the
cancelled scope) answers whatever a cut left open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from agentkit.agent.acting import (
    NEW_MESSAGE_TEXT,
    act,
    commit_results,
    denied_response,
    describe_call,
    execute,
    settle,
)
from agentkit.agent.events import ApprovalRequired, Interrupted
from agentkit.agent.reasoning import reason, unique_call_ids
from agentkit.agent.state import new_msg, store
from agentkit.agent.structured import MAX_STRUCTURED_RETRIES, RESPONSE_TOOL, response_schema
from agentkit.exceptions import StructuredOutputError
from agentkit.messages import Msg
from agentkit.observability import seams as _obs
from agentkit.tools import INTERRUPTED_TEXT
from agentkit.tools.response import ToolResponse

if TYPE_CHECKING:
    from agentkit.agent.react import ReActAgent
    from agentkit.agent.state import Run

__all__ = ["finalize", "reply", "resume"]

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


def _tools_for(agent: ReActAgent, run: Run) -> tuple[list[dict[str, Any]] | None, str | None]:
    toolkit = agent._toolkit
    schemas = toolkit.get_json_schemas() if toolkit is not None else []
    if run.structured is None:
        return (schemas or None), None
    choice = run.force_tool or "required"
    return [*schemas, response_schema(run.structured)], choice


def _finish(agent: ReActAgent, run: Run, last: Msg, **extra: Any) -> Msg:
    metadata = run.metadata()
    metadata.update(extra)
    if run.finish_reason is not None:  # "length"/"max_tokens": the answer was cut short
        metadata["finish_reason"] = run.finish_reason
    if run.structured_output is not None:
        metadata["structured_output"] = run.structured_output
        content: Any = run.last_text or [
            {"type": "text", "text": _json_text(run.structured_output)}
        ]
    else:
        content = last.content
    return Msg(agent.name, content, "assistant", metadata, id=last.id, timestamp=last.timestamp)


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _pending_reply(agent: ReActAgent, run: Run) -> Msg:
    calls = [describe_call(c) for c in agent._pending]
    _obs.approval_required(calls)  # observability seam: span events
    if run.emit is not None:
        run.emit(ApprovalRequired(tuple(calls)))
    metadata = run.metadata()
    metadata["pending_tool_calls"] = calls
    if run.structured_output is not None:
        metadata["structured_output"] = run.structured_output
    return Msg(agent.name, list(run.last_text), "assistant", metadata)


def _check_structured(run: Run) -> None:
    if run.structured_failures > MAX_STRUCTURED_RETRIES:
        raise StructuredOutputError(
            f"the model failed to produce a valid {run.structured.__name__} "  # type: ignore[union-attr]
            f"after {MAX_STRUCTURED_RETRIES} retries"
        )


async def run_loop(agent: ReActAgent, run: Run) -> Msg:
    """Reason and act until the model answers without tool calls (or max_iters)."""
    while True:
        if run.iteration >= agent.max_iters:
            return await _summarize(agent, run)
        run.iteration += 1
        tools, choice = _tools_for(agent, run)
        assistant = await reason(agent, run, tools, choice)
        run.force_tool = None
        if run.batch is not None:
            await act(agent, run)
            if agent._pending:
                return _pending_reply(agent, run)
            if run.structured_output is not None:
                return _finish(agent, run, assistant)
            _check_structured(run)
            continue
        if run.structured is None:
            return _finish(agent, run, assistant)
        # Structured output was requested but the model answered in prose: insist.
        run.structured_failures += 1
        _check_structured(run)
        run.force_tool = RESPONSE_TOOL


async def _summarize(agent: ReActAgent, run: Run) -> Msg:
    """At max_iters: one last model call that may not use tools (except the response tool)."""
    hint = Msg("user", SUMMARY_HINT, "user")
    if run.structured is None:
        tools, _ = _tools_for(agent, run)
        assistant = await reason(
            agent, run, tools, "none" if tools else None, extra=hint, allow_calls=False
        )
        return _finish(agent, run, assistant, max_iters_reached=True)
    only = [response_schema(run.structured)]
    assistant = await reason(agent, run, only, RESPONSE_TOOL, extra=hint)
    if run.batch is not None:
        await act(agent, run)
    if run.structured_output is None:
        raise StructuredOutputError(
            f"max_iters ({agent.max_iters}) reached without a valid {run.structured.__name__}"
        )
    return _finish(agent, run, assistant, max_iters_reached=True)


async def _deny_pending(agent: ReActAgent, run: Run, text: str) -> None:
    calls, agent._pending = agent._pending, []
    run.begin_batch(calls)
    for i in range(len(calls)):
        _obs.tool_denied(calls[i], text)  # observability seam: span event
        settle(run, i, ToolResponse.error(text))
    await commit_results(agent, run)
    with anyio.CancelScope(shield=True):
        await agent._flush_deferred()


async def reply(agent: ReActAgent, run: Run, msgs: list[Msg]) -> Msg:
    """The body of ``await agent(msg)``."""
    if agent._pending:
        if not msgs:  # nothing decided: report the pending calls again
            run.iteration = agent._iteration
            return await resume(agent, run, {})
        await _deny_pending(agent, run, NEW_MESSAGE_TEXT)
    if msgs:
        await store(agent.memory, msgs)
    run.inbox = []
    return await run_loop(agent, run)


async def resume(agent: ReActAgent, run: Run, approvals: dict[str, bool | str]) -> Msg:
    """The body of ``await agent.resume(approvals)``: settle decided calls, then continue."""
    decided = [c for c in agent._pending if c["id"] in approvals]
    if not decided:
        return _pending_reply(agent, run)
    agent._pending = [c for c in agent._pending if c["id"] not in approvals]
    run.begin_batch(decided)
    runnable = []
    for i, call in enumerate(decided):
        verdict = approvals[call["id"]]
        if verdict is True:
            runnable.append(i)
        else:
            _obs.tool_denied(call, verdict)  # observability seam: span event
            settle(run, i, denied_response(verdict))
    await execute(agent, run, runnable)
    await commit_results(agent, run)
    if agent._pending:
        return _pending_reply(agent, run)
    with anyio.CancelScope(shield=True):
        await agent._flush_deferred()  # messages observed while the calls were pending
    if run.structured_output is not None:
        return _finish(agent, run, Msg(agent.name, list(run.last_text), "assistant"))
    return await run_loop(agent, run)


async def finalize(agent: ReActAgent, run: Run, error: BaseException | None) -> Msg:
    """Repair memory after a cut (interrupt when ``error`` is None); build the reply.

    Stores the partial assistant message (text kept, unfinished tool calls dropped), answers
    every open call, then adds the messages given to ``interrupt``. Must run shielded.
    """
    partial, run.partial = run.partial, None
    text: list[Any] = []
    if partial is not None and run.batch is None:
        content = [b for b in partial.content if not (b["type"] == "tool_use" and "raw_input" in b)]
        content = unique_call_ids(content)
        if partial.usage is not None:
            run.usage = run.usage + partial.usage
        if content:
            interrupted = new_msg(agent.name, content, "assistant", {"interrupted": True})
            await agent.memory.add(interrupted)
            text = [b for b in content if b["type"] == "text"]
            calls = [b for b in content if b["type"] == "tool_use"]
            if calls:
                run.begin_batch(calls)  # complete calls that never ran: answer them
    if not text:  # cut after the turn was stored (e.g. in post_reply): its text is the answer
        text = list(run.last_text)
    await commit_results(agent, run, _missing_text(error))
    if run.inbox:  # cut before the input was stored (e.g. in a pre_reply hook): keep it
        if agent._pending:
            await _deny_pending(agent, run, NEW_MESSAGE_TEXT)
        inbox, run.inbox = run.inbox, []
        await agent.memory.add(inbox)
    msgs, run.interrupt_msgs = run.interrupt_msgs, []
    if msgs:
        await agent.memory.add(msgs)
    metadata = run.metadata()
    metadata["interrupted"] = True
    if agent._pending:
        metadata["pending_tool_calls"] = [describe_call(c) for c in agent._pending]
    result = Msg(agent.name, text, "assistant", metadata)
    if error is None and run.emit is not None:
        run.emit(Interrupted(result))
    return result

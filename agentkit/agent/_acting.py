"""The acting step: run the tool calls of one turn and store their results.

Calls run concurrently in an anyio task group (sequentially with
``parallel_tool_calls=False``). A tool registered with ``sequential=True`` is a barrier: the
calls before it finish first, then it runs alone, then the calls after it. Each call writes
its final ``ToolResponse`` into its own slot of ``run.calls.results``; the results are stored as
one message in call order, whatever the finish order. A call task never raises (anything
unexpected becomes an error result), so one failure never cancels its siblings; only
cancellation propagates.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

import agentkit._seams as _obs
from agentkit.agent._conversation import nested_wait, resume_scope
from agentkit.agent._limits import LIMIT_TEXT
from agentkit.agent._state import PENDING, new_msg, store
from agentkit.agent._validators import validate_output
from agentkit.events import ToolCallStarted, ToolProgress, ToolResult
from agentkit.messages import TextBlock, ToolResultBlock, ToolUseBlock
from agentkit.tools import INTERRUPTED_TEXT, interrupted_response
from agentkit.tools._call import call_offered_tool
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from agentkit.agent._conversation import Conversation
    from agentkit.agent._setup import RunSetup
    from agentkit.agent._state import Run
    from agentkit.tools._base import Tool
    from agentkit.tools._context import ToolContext

__all__ = [
    "INTERRUPTED_TEXT",
    "accept_answers",
    "commit_results",
    "denied_response",
    "execute",
    "offered_tools",
    "refuse",
    "result_block",
    "settle",
    "triage",
]

NEW_MESSAGE_TEXT = "The user denied this tool call: the user sent a new message instead."


def denied_response(reason: bool | str) -> ToolResponse:
    """The result of a call the user denied (``reason`` is False or the user's words)."""
    if isinstance(reason, str) and reason:
        return ToolResponse.error(f"The user denied this tool call: {reason}")
    return ToolResponse.error("The user denied this tool call.")


_CUT_SHORT = ("length", "max_tokens")


def _invalid_json(call: ToolUseBlock, finish_reason: str | None) -> ToolResponse:
    raw = call.get("raw_input", "")
    hint = "Call the tool again with valid JSON arguments."
    if finish_reason in _CUT_SHORT:  # truncated, not malformed: retrying as is fails again
        hint = (
            "Your answer reached the output token limit while writing them: call the tool "
            "again with shorter arguments (split the work into smaller calls)."
        )
    return ToolResponse.error(
        f"The arguments of this call were not a valid JSON object, so the tool was not run. "
        f"Received: {raw[:500]!r}. {hint}"
    )


def result_block(call: ToolUseBlock, response: ToolResponse) -> ToolResultBlock:
    """Turn a final ``ToolResponse`` into the ``tool_result`` block stored in memory."""
    content = response.content
    output: str | list[ToolResultContent]
    if len(content) == 1 and content[0]["type"] == "text":  # most results: one text
        output = content[0]["text"]
    elif all(b["type"] == "text" for b in content):
        output = "".join(cast(TextBlock, b)["text"] for b in content)
    else:
        output = list(content)
    block = ToolResultBlock(type="tool_result", id=call["id"], name=call["name"], output=output)
    if response.is_error or response.is_interrupted:
        block["is_error"] = True
    return block


async def _invoke(setup: RunSetup, run: Run, call: ToolUseBlock) -> ToolResponse:
    block = call
    caps = setup.capabilities
    ctx: ToolContext[Any] | None = None
    veto: ToolResponse | None = None
    if caps.before_tool or caps.after_tool:  # string hooks first (``agent._hooks``)
        ctx = setup.context.for_call(
            call["id"],
            call["name"],
            setup.toolkit,
            setup.owner,
            tool_call_approved=call["id"] in run.approved,
        )
        if caps.before_tool:
            outcome = await caps.run_before_tool(ctx, block)
            if isinstance(outcome, ToolResponse):
                veto = outcome  # the call is answered without running
            else:
                block = outcome
    emit = run.emit
    if emit is not None:
        emit(ToolCallStarted(block))
    final = veto if veto is not None else await _call(setup, run, call, block)
    if ctx is not None and caps.after_tool:
        final = await caps.run_after_tool(ctx, final)
    return final


async def offered_tools(setup: RunSetup, run: Run) -> dict[str, Tool]:
    """The capabilities' tools (``Capability.tools``) of the latest request, by name.

    Asked for here when no request was made yet in this run (calls resumed after an
    approval); each request asks again (:func:`agentkit.agent._loop`).
    """
    book = run.calls
    if book.offered is None:
        caps = setup.capabilities
        book.offered = await caps.offered_tools(setup.context, setup.toolkit) if caps.tools else {}
    return book.offered


def _tool_named(setup: RunSetup, run: Run, name: str) -> Tool | None:
    offered = run.calls.offered
    if offered and name in offered:
        return offered[name]
    toolkit = setup.toolkit
    return toolkit.get_tool(name) if toolkit is not None else None


async def _call(setup: RunSetup, run: Run, call: ToolUseBlock, block: ToolUseBlock) -> ToolResponse:
    """Run ``block`` (the call as the capabilities left it).

    A capability's tool of the latest request is resolved first, then the toolkit's.
    """
    toolkit = setup.toolkit
    approved = call["id"] in run.approved
    offered = (await offered_tools(setup, run)).get(block["name"])
    calling: AsyncGenerator[ToolResponse, None]
    if offered is not None:
        calling = call_offered_tool(
            offered, block, setup.owner, toolkit=toolkit, run=setup.context, approved=approved
        )
    elif toolkit is None:
        return ToolResponse.error(f"Tool {call['name']!r} does not exist (no tools).")
    else:
        calling = toolkit.call_tool_function(
            block, context=setup.owner, run=setup.context, approved=approved
        )
    final: ToolResponse | None = None
    emit = run.emit
    # Nested approvals: a call resumed for decisions inside it reads them from here.
    with resume_scope(run.calls.resumes.pop(call["id"], None)):
        try:  # ``aclosing``'s work without its three calls per tool call
            async for chunk in calling:
                if chunk.is_last:
                    final = chunk
                elif emit is not None:
                    emit(ToolProgress(call["id"], chunk))
        finally:
            await calling.aclose()
    if final is None:
        final = ToolResponse.error("The tool ended without a final result.")
    return final


async def _run_call(setup: RunSetup, run: Run, index: int) -> None:
    """Run one call into its slot. Never raises, except cancellation."""
    # observability seam: tool span
    with _obs.tool_span(setup.owner, run, index, setup.toolkit):
        await _run_call_into_slot(setup, run, index)


async def _run_call_into_slot(setup: RunSetup, run: Run, index: int) -> None:
    batch = run.batch
    assert batch is not None
    call = batch[index]
    run.counts.tool_calls += 1
    try:
        limiter = setup.limiter
        if limiter is None:
            final = await _invoke(setup, run, call)
        else:
            async with limiter:
                final = await _invoke(setup, run, call)
    except Exception as exc:  # a hook or toolkit bug must not cancel the sibling calls
        final = ToolResponse.error(f"The tool call failed: {type(exc).__name__}: {exc}")
    metadata = final.metadata
    if metadata:  # an ordinary result has none: nothing to wait for or retry
        wait = nested_wait(metadata)
        if wait is not None:  # calls inside this one wait for a human: so does this one
            run.calls.waits[call["id"]] = wait
            run.calls.results[index] = PENDING
            return
        kind = metadata.get("error")
        if kind == "approval_required" and call["id"] not in run.approved:
            # The tool asked for a human: invoked again once approved.
            run.calls.results[index] = PENDING
            return
        if kind == "retry":
            final = _bounded_retry(setup.max_tool_retries, run, call, final)
    settle(run, index, final)


def _bounded_retry(allowed: int, run: Run, call: ToolUseBlock, final: ToolResponse) -> ToolResponse:
    """A ``ToolRetry`` answer, or a plain failure once the tool used up its retries."""
    name = call["name"]
    count = run.calls.retries[name] = run.calls.retries.get(name, 0) + 1
    if count <= allowed:
        return final
    text = "".join(b.get("text", "") for b in final.content if b["type"] == "text")
    return ToolResponse.error(
        f"The tool {name!r} failed: {text} (it asked for a retry {count} times, more than "
        f"the {allowed} allowed; do not call it again for this task)."
    )


def settle(run: Run, index: int, final: ToolResponse) -> None:
    """Put a call's final response in its slot and emit its ``ToolResult`` event."""
    run.calls.results[index] = final
    if run.emit is not None and run.batch is not None:
        call = run.batch[index]
        run.emit(ToolResult(call["id"], result_block(call, final)))


async def _run_parallel(setup: RunSetup, run: Run, indexes: list[int]) -> None:
    if len(indexes) == 1:
        await _run_call(setup, run, indexes[0])
        return
    fatal: list[BaseException] = []

    async def guarded(index: int) -> None:
        # Only a non-Exception (KeyboardInterrupt...) gets past _run_call. Left in a child
        # task, asyncio would re-raise it out of the event loop itself; catch it here, stop
        # the siblings, and raise it bare in the reply's own task (after the group).
        try:
            await _run_call(setup, run, index)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            fatal.append(exc)
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        for i in indexes:
            tg.start_soon(guarded, i)
    if fatal:
        raise fatal[0]


def _is_sequential(setup: RunSetup, run: Run, call: ToolUseBlock) -> bool:
    tool = _tool_named(setup, run, call["name"])
    return bool(tool is not None and tool.sequential)


async def execute(setup: RunSetup, run: Run, indexes: Sequence[int]) -> None:
    """Run the calls ``run.batch[i]`` for ``i`` in ``indexes``, honouring barriers."""
    if not setup.parallel_tool_calls:
        for i in indexes:
            await _run_call(setup, run, i)
        return
    if len(indexes) == 1:  # one call runs alone, a barrier or not
        await _run_call(setup, run, indexes[0])
        return
    batch = run.batch
    assert batch is not None
    segment: list[int] = []
    for i in indexes:
        if _is_sequential(setup, run, batch[i]):
            if segment:
                await _run_parallel(setup, run, segment)
                segment = []
            await _run_call(setup, run, i)
        else:
            segment.append(i)
    if segment:
        await _run_parallel(setup, run, segment)


async def _needs_approval(setup: RunSetup, run: Run, call: ToolUseBlock) -> bool:
    toolkit = setup.toolkit
    await offered_tools(setup, run)
    tool = _tool_named(setup, run, call["name"])
    if tool is None or not tool.requires_approval_in(toolkit):
        return False
    policy = setup.approval_policy
    if policy is None:
        return True
    approved = policy(call)
    if not isinstance(approved, bool):
        approved = await approved
    if approved:
        run.approve(call["id"])
    return not approved


async def _accept(setup: RunSetup, run: Run, index: int, call: ToolUseBlock) -> None:
    """Validate a structured answer (a call of a response tool) and answer the call.

    The agent's output validators see a schema-valid answer; one that raises ``ToolRetry``
    makes the call's result the retry message, counted like a schema failure.
    """
    assert run.output.plan is not None
    response, value = run.output.plan.validate_response(call)
    if value is not None and setup.output_validators:
        value, retry = await validate_output(setup, value)
        if retry is not None:  # rejected: not the answer, however schema-valid
            value = None
            response = ToolResponse.error(f"{retry}\nCall {call['name']} again, corrected.")
    if value is None:
        run.output.failures += 1
    else:
        run.output.value = value
        run.output.data = value.model_dump(mode="json")
    settle(run, index, response)


async def accept_answers(setup: RunSetup, run: Run) -> None:
    """Validate the turn's structured answers, and only those (the run stops at a limit).

    A valid structured answer is the run's final answer, already paid for: a usage limit
    reached by the turn that gave it must not throw it away, as it never throws away a
    text answer.
    """
    calls, plan = run.batch, run.output.plan
    if plan is None or calls is None:
        return
    for i, call in enumerate(calls):
        answer = plan.is_response(call["name"]) and "raw_input" not in call
        if answer and run.calls.results[i] is None:
            await _accept(setup, run, i, call)


def refuse(run: Run, limit: str) -> None:
    """Answer every open call of the batch without running it: the run reached ``limit``.

    Calls set aside for approval are answered too: the run ends here.
    """
    for i, result in enumerate(run.calls.results):
        if result is None or result is PENDING:
            settle(run, i, ToolResponse.error(LIMIT_TEXT.format(limit=limit)))


async def triage(setup: RunSetup, run: Run) -> list[int]:
    """Answer what needs no tool run; return the indexes of the calls to run.

    Calls with invalid JSON and structured answers are answered at once; calls that need
    approval get a ``PENDING`` slot.
    """
    calls, plan = run.batch, run.output.plan
    assert calls is not None
    runnable: list[int] = []
    for i, call in enumerate(calls):
        if "raw_input" in call:
            settle(run, i, _invalid_json(call, run.turn.finish_reason))
        elif plan is not None and plan.is_response(call["name"]):
            await _accept(setup, run, i, call)
        elif await _needs_approval(setup, run, call):
            run.calls.results[i] = PENDING
        else:
            runnable.append(i)
    return runnable


async def commit_results(
    setup: RunSetup, conv: Conversation, run: Run, missing: str = INTERRUPTED_TEXT
) -> None:
    """Store the batch's results as one message in call order; end the batch.

    Calls without a result get an interrupted error result (``missing``); calls set aside
    for approval join the conversation's pending calls. Safe to run shielded during
    finalization.
    """
    calls, results = run.batch, run.calls.results
    if calls is None:
        return
    blocks: list[ToolResultBlock] = []
    pending: list[ToolUseBlock] = []
    for i, call in enumerate(calls):
        result = results[i]
        if result is PENDING:
            pending.append(call)
            continue
        if result is None:
            result = interrupted_response(call["name"], text=missing)
            settle(run, i, result)
        blocks.append(result_block(call, result))
    if blocks:
        await store(conv.memory, new_msg(setup.name, blocks, "user"), run)
    conv.hold(pending, run.calls.waits)
    run.batch = None
    run.calls.results = []

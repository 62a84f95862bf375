"""The acting step: run the tool calls of one turn and store their results.

Calls run concurrently in an anyio task group (sequentially with
``parallel_tool_calls=False``). A tool registered with ``sequential=True`` is a barrier: the
calls before it finish first, then it runs alone, then the calls after it. Each call writes
its final ``ToolResponse`` into its own slot of ``run.results``; the results are stored as
one message in call order, whatever the finish order. A call task never raises (anything
unexpected becomes an error result), so one failure never cancels its siblings; only
cancellation propagates.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio

from agentkit.agent.events import ToolCallStarted, ToolProgress, ToolResult
from agentkit.agent.state import PENDING, new_msg, store
from agentkit.agent.structured import RESPONSE_TOOL, validate_response
from agentkit.messages import ToolResultBlock, ToolUseBlock
from agentkit.observability import seams as _obs
from agentkit.tools import INTERRUPTED_TEXT, interrupted_response
from agentkit.tools.response import ToolResponse

if TYPE_CHECKING:
    from agentkit.agent.react import ReActAgent
    from agentkit.agent.state import Run

__all__ = [
    "INTERRUPTED_TEXT",
    "act",
    "commit_results",
    "denied_response",
    "execute",
    "result_block",
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
    output: Any
    if all(b["type"] == "text" for b in content):
        output = "".join(b["text"] for b in content)  # type: ignore[typeddict-item]
    else:
        output = list(content)
    block = ToolResultBlock(type="tool_result", id=call["id"], name=call["name"], output=output)
    if response.is_error or response.is_interrupted:
        block["is_error"] = True
    return block


async def _invoke(agent: ReActAgent, run: Run, call: ToolUseBlock) -> ToolResponse:
    hooks = agent._hooks
    kwargs: dict[str, Any] = {"tool_call": call}
    if hooks is not None and hooks.has("pre_acting"):
        kwargs = await hooks.run_pre("pre_acting", agent, kwargs)
    emit = run.emit
    if emit is not None:
        emit(ToolCallStarted(kwargs["tool_call"]))
    final: ToolResponse | None = None
    toolkit = agent._toolkit
    if toolkit is None:
        final = ToolResponse.error(f"Tool {call['name']!r} does not exist (no tools).")
    else:
        calling = toolkit.call_tool_function(kwargs["tool_call"], context=agent)
        async with aclosing(calling) as chunks:
            async for chunk in chunks:
                if chunk.is_last:
                    final = chunk
                elif emit is not None:
                    emit(ToolProgress(call["id"], chunk))
    if final is None:
        final = ToolResponse.error("The tool ended without a final result.")
    if hooks is not None and hooks.has("post_acting"):
        final = await hooks.run_post("post_acting", agent, kwargs, final)
    return final


async def _run_call(agent: ReActAgent, run: Run, index: int) -> None:
    """Run one call into its slot. Never raises, except cancellation."""
    with _obs.tool_span(agent, run, index, agent._toolkit):  # observability seam: tool span
        await _run_call_into_slot(agent, run, index)


async def _run_call_into_slot(agent: ReActAgent, run: Run, index: int) -> None:
    call = run.batch[index]  # type: ignore[index]
    try:
        limiter = agent._limiter
        if limiter is None:
            final = await _invoke(agent, run, call)
        else:
            async with limiter:
                final = await _invoke(agent, run, call)
    except Exception as exc:  # a hook or toolkit bug must not cancel the sibling calls
        final = ToolResponse.error(f"The tool call failed: {type(exc).__name__}: {exc}")
    settle(run, index, final)


def settle(run: Run, index: int, final: ToolResponse) -> None:
    """Put a call's final response in its slot and emit its ``ToolResult`` event."""
    run.results[index] = final
    if run.emit is not None:
        call = run.batch[index]  # type: ignore[index]
        run.emit(ToolResult(call["id"], result_block(call, final)))


async def _run_parallel(agent: ReActAgent, run: Run, indexes: list[int]) -> None:
    if len(indexes) == 1:
        await _run_call(agent, run, indexes[0])
        return
    fatal: list[BaseException] = []

    async def guarded(index: int) -> None:
        # Only a non-Exception (KeyboardInterrupt...) gets past _run_call. Left in a child
        # task, asyncio would re-raise it out of the event loop itself; catch it here, stop
        # the siblings, and raise it bare in the reply's own task (after the group).
        try:
            await _run_call(agent, run, index)
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


def _is_sequential(agent: ReActAgent, call: ToolUseBlock) -> bool:
    toolkit = agent._toolkit
    tool = toolkit.get_tool(call["name"]) if toolkit is not None else None
    return bool(tool is not None and tool.sequential)


async def execute(agent: ReActAgent, run: Run, indexes: list[int]) -> None:
    """Run the calls ``run.batch[i]`` for ``i`` in ``indexes``, honouring barriers."""
    if not agent.parallel_tool_calls:
        for i in indexes:
            await _run_call(agent, run, i)
        return
    segment: list[int] = []
    for i in indexes:
        if _is_sequential(agent, run.batch[i]):  # type: ignore[index]
            if segment:
                await _run_parallel(agent, run, segment)
                segment = []
            await _run_call(agent, run, i)
        else:
            segment.append(i)
    if segment:
        await _run_parallel(agent, run, segment)


async def _needs_approval(agent: ReActAgent, call: ToolUseBlock) -> bool:
    toolkit = agent._toolkit
    tool = toolkit.get_tool(call["name"]) if toolkit is not None else None
    if tool is None or not tool.requires_approval:
        return False
    policy = agent.approval_policy
    if policy is None:
        return True
    approved = policy(call)
    if not isinstance(approved, bool):
        approved = await approved
    return not approved


async def act(agent: ReActAgent, run: Run) -> None:
    """Answer every call of ``run.batch``: run, validate, or set aside for approval."""
    calls = run.batch
    assert calls is not None
    runnable: list[int] = []
    for i, call in enumerate(calls):
        if "raw_input" in call:
            settle(run, i, _invalid_json(call, run.finish_reason))
        elif run.structured is not None and call["name"] == RESPONSE_TOOL:
            response, output = validate_response(run.structured, call)
            if output is None:
                run.structured_failures += 1
            else:
                run.structured_output = output
            settle(run, i, response)
        elif await _needs_approval(agent, call):
            run.results[i] = PENDING
        else:
            runnable.append(i)
    await execute(agent, run, runnable)
    await commit_results(agent, run)


async def commit_results(agent: ReActAgent, run: Run, missing: str = INTERRUPTED_TEXT) -> None:
    """Store the batch's results as one message in call order; end the batch.

    Calls without a result get an interrupted error result (``missing``); calls set aside
    for approval join ``agent``'s pending calls. Safe to run shielded during finalization.
    """
    calls, results = run.batch, run.results
    if calls is None:
        return
    blocks: list[Any] = []
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
        await store(agent.memory, new_msg(agent.name, blocks, "user"))
    agent._pending.extend(pending)
    run.batch = None
    run.results = []


def describe_call(call: ToolUseBlock) -> dict[str, Any]:
    """The ``{"id", "name", "input"}`` form of a call shown to users (JSON-safe)."""
    return {"id": call["id"], "name": call["name"], "input": json.loads(json.dumps(call["input"]))}

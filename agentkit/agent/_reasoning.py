"""The reasoning step: one model call, streamed into events, stored as one assistant Msg.

While the model streams, ``run.turn.partial`` always holds the latest cumulative chunk, so an
interrupt at any await can store what was received so far. Deltas for the event stream are
computed by diffing consecutive cumulative chunks per block, and only when someone listens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

import agentkit._seams as _obs
from agentkit.agent._capabilities import MESSAGE_METADATA
from agentkit.agent._partial import PartialTracker
from agentkit.agent._prompt_caching import check_prefix
from agentkit.agent._state import answered_by, new_msg, store
from agentkit.agent._steer import deliver as deliver_steers
from agentkit.events import TextDelta, ThinkingDelta
from agentkit.messages import ContentBlock, Msg, TextBlock, ToolUseBlock
from agentkit.models._base import (
    ChatResponse,
    ModelRequest,
    ModelSettings,
    ToolDefinition,
)

if TYPE_CHECKING:
    from agentkit.agent._conversation import Conversation
    from agentkit.agent._setup import RunSetup
    from agentkit.agent._state import Emit, Run

__all__ = ["reason", "unique_call_ids"]

# Closing a model stream must finish (it releases the HTTP connection) even when the reply
# is being cancelled, but must not hang an interrupt on a misbehaving adapter.
_CLOSE_TIMEOUT = 2.0


def _diff(lengths: list[int], content: list[ContentBlock], emit: Emit) -> bool:
    """Emit the text/thinking that ``content`` adds over the lengths seen so far.

    Returns:
        Whether anything was emitted.
    """
    if len(content) == 1 and len(lengths) < 2:
        # Once per streamed token of a plain answer (one text block, as before): its new
        # tail, without walking the blocks.
        block = content[0]
        if block["type"] == "text":
            text = block["text"]
            old, size = lengths[0] if lengths else 0, len(text)
            if lengths:
                lengths[0] = size
            else:
                lengths.append(size)
            if size > old:
                emit(TextDelta(text[old:]))
                return True
            return False
    emitted = False
    for i, block in enumerate(content):
        if block["type"] == "text":
            kind, value = "text", block["text"]
        elif block["type"] == "thinking":
            kind, value = "thinking", block["thinking"]
        else:
            continue
        if i >= len(lengths):
            lengths.extend([0] * (i + 1 - len(lengths)))
        old, size = lengths[i], len(value)
        if size > old:
            emit(TextDelta(value[old:]) if kind == "text" else ThinkingDelta(value[old:]))
            emitted = True
        lengths[i] = size
    return emitted


def _tracker(setup: RunSetup, run: Run) -> PartialTracker | None:
    """The ``PartialOutput`` tracker of a streamed structured answer (None: nobody listens)."""
    plan = run.output.plan
    if run.emit is None or plan is None:
        return None
    source = plan.partial_source(plan.mode_for(setup.model))
    return PartialTracker(run.emit, source)


async def _consume(
    run: Run, stream: AsyncIterator[ChatResponse], partials: PartialTracker | None
) -> None:
    """Read cumulative chunks into ``run.turn.partial``; always close the stream."""
    emit, turn = run.emit, run.turn
    lengths: list[int] = []
    first = True  # until the first delta is out
    try:
        async for chunk in stream:
            turn.partial = chunk
            emitted = emit is not None and _diff(lengths, chunk.content, emit)
            if partials is not None:
                partials.update(chunk)
                run.output.streamed = partials.last
            if emitted and first:
                # A network chunk often holds many deltas, all parsed before the next read
                # waits: let the listeners take the first one now (once per call), the run's
                # state already up to date should an interrupt land here.
                first = False
                await anyio.lowlevel.checkpoint()
    finally:
        aclose = getattr(stream, "aclose", None)
        # An async generator that raised or returned is closed already (``ag_frame`` is
        # None): skip the bounded close, whose timer costs a tenth of an interrupt.
        if aclose is not None and getattr(stream, "ag_frame", True) is not None:
            with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                await aclose()


def unique_call_ids(content: list[ContentBlock]) -> list[ContentBlock]:
    """Give every tool call of one turn its own id.

    Some servers repeat an id within one turn (or send several empty ids the adapter could
    not fill); two calls sharing an id could not each get their own result, which breaks
    the memory invariant and the next request. A repeat gets the id plus a suffix.
    """
    seen: set[str] = set()
    out: list[ContentBlock] | None = None
    for i, block in enumerate(content):
        if block["type"] != "tool_use":
            continue
        call_id: str = block["id"]
        if call_id in seen:
            n = 2
            while f"{call_id}_{n}" in seen:
                n += 1
            call_id = f"{call_id}_{n}"
            if out is None:
                out = list(content)
            out[i] = {**block, "id": call_id}
        seen.add(call_id)
    return content if out is None else out


def _request(
    setup: RunSetup,
    run: Run,
    prompt: list[Msg],
    tools: list[ToolDefinition] | None,
    tool_choice: str | None,
) -> ModelRequest:
    """The request for ``prompt`` offering ``tools`` (built-in ones among them)."""
    settings: ModelSettings = {}
    if tool_choice is not None:
        settings["tool_choice"] = tool_choice
    if tools and not setup.parallel_tool_calls:
        # Ask the provider for one call per turn too: running them one by one is then free.
        settings["parallel_tool_calls"] = False
    output, plan = None, run.output.plan
    if plan is not None:
        output = plan.request_spec(plan.mode_for(setup.model))
    functions, builtin = ToolDefinition.split(tools)
    return ModelRequest(prompt, functions, builtin, settings, output)


async def _prompt(setup: RunSetup, conv: Conversation, run: Run, extra: Msg | None) -> list[Msg]:
    """The prompt of the next request: system message (with instructions), memory, ``extra``."""
    system = setup.system()
    caps = setup.capabilities
    if caps.instructions:  # this request's only: never stored
        system = await caps.system(setup.context, system)
    plan = run.output.plan
    if plan is not None and plan.mode_for(setup.model) == "prompted":
        base = system.content if isinstance(system.content, str) else system.get_text()
        schema = plan.prompt_instructions()
        system = Msg(system.name, f"{base}\n\n{schema}" if base else schema, "system")
    prompt = [system, *(await conv.memory.get_memory())]
    if extra is not None:
        prompt.append(extra)
    return prompt


def _storable(content: list[ContentBlock], allow_calls: bool) -> list[ContentBlock]:
    """``content`` as it may be stored: calls dropped where none are allowed, ids unique."""
    if not allow_calls:
        content = [b for b in content if b["type"] != "tool_use"]
    return unique_call_ids(content)


def _answer(setup: RunSetup, run: Run, allow_calls: bool) -> tuple[ChatResponse, Msg]:
    """The model's complete answer and the assistant message made of it (not stored yet)."""
    response = run.turn.partial or ChatResponse(content=[])
    finish = (response.metadata or {}).get("finish_reason")
    run.turn.finish_reason = finish if isinstance(finish, str) else None
    content = _storable(response.content, allow_calls)  # again: after_model may add calls
    recorded = (response.metadata or {}).get(MESSAGE_METADATA)
    metadata = dict(recorded) if isinstance(recorded, dict) else None
    return response, new_msg(setup.name, content, "assistant", metadata)  # new_msg copies


async def reason(
    setup: RunSetup,
    conv: Conversation,
    run: Run,
    tools: list[ToolDefinition] | None,
    tool_choice: str | None,
    *,
    extra: Msg | None = None,
    allow_calls: bool = True,
) -> Msg:
    """Call the model once and store its answer in memory.

    Args:
        setup: The run's frozen dependencies (model, capabilities...).
        conv: The conversation (memory).
        run: The reply's run state (``turn.partial`` and ``batch`` are updated).
        tools: The tools offered to the model (None: no tools).
        tool_choice: ``"auto"``/``"none"``/``"required"``/a tool name, or None.
        extra: A transient message appended to the prompt only (never stored).
        allow_calls: When False, tool_use blocks in the answer are dropped.

    Returns:
        The stored assistant message. Its tool calls (if any) are in ``run.batch``.
    """
    await deliver_steers(conv.memory, run)  # steering: queued user messages, before the request
    prompt = await _prompt(setup, conv, run, extra)
    caps = setup.capabilities
    request = _request(setup, run, prompt, tools, tool_choice)
    if caps.before_model:  # string hooks, the Compactor (the request view)...
        request = await caps.run_before_model(setup.context, request)
        prompt = request.messages
    if "cache" in request.settings:  # prompt caching asked: warn when the prefix changed
        check_prefix(conv, request, run.emit)
    run.turn.calling_model = True  # state_dict() refuses until the answer is stored
    run.counts.requests += 1
    try:
        # The observability seam: the chat span. The call, its answer left in ``run.turn.partial``,
        # is inline rather than a coroutine of its own: one layer less held while it waits.
        with _obs.model_span(setup.owner, run, prompt, request.tools):
            model = setup.model
            if model.stream:
                await _consume(run, model.request_stream(request), _tracker(setup, run))
            else:
                run.turn.partial = output = await model.request(request)
                if run.emit is not None:
                    _diff([], output.content, run.emit)
    finally:
        run.turn.calling_model = False
    if caps.after_model:
        # The capabilities (the string hooks first) see the answer as it would be stored.
        answer = run.turn.partial or ChatResponse(content=[])
        content = _storable(answer.content, allow_calls)
        if content is not answer.content:
            answer = dataclasses.replace(answer, content=content)
        run.turn.partial = await caps.run_after_model(setup.context, answer)
    response, msg = _answer(setup, run, allow_calls)
    await store(conv.memory, msg, run)
    # Synchronous from here: memory holds the calls, and run.batch answers for them.
    run.turn.partial = None
    run.count_response(response.usage, answered_by(setup.model, response))  # or in finalize
    # One pass over the blocks (``new_msg`` stores a list), not a listing per kind.
    texts: list[TextBlock] = []
    calls: list[ToolUseBlock] = []
    for block in msg.get_content_blocks():
        if block["type"] == "text":
            texts.append(block)
        elif block["type"] == "tool_use":
            calls.append(block)
    run.turn.last_text = texts
    if calls:
        run.begin_batch(calls)
    return msg

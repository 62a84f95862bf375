"""One tool call, from a ``tool_use`` block to its final ``ToolResponse``.

The shape is the same for every tool: look it up, check its group, validate the arguments
with jsonschema (through a compiled fast path first for simple schemas), run
``Tool.invoke_with_context`` under the call's timeout, convert every tool-side failure into
an error response, cut overlong output.

Why the steps look the way they do: each ``await`` on the tool runs inside its own cancel
scope carrying the call's deadline, and no cancel scope or task group is ever left open
across a ``yield``. A consumer may therefore stop iterating at any point (or be cancelled)
without corrupting its own cancel scopes. Only tools that report progress out of band
(``Tool.reports_progress``) run in a task of their own so that the progress streams live.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from agentkit._text import MAX_JSON_DEPTH, clean_json, too_deep
from agentkit.exceptions import ApprovalRequired, MessageValidationError, ToolRetry
from agentkit.messages import ToolUseBlock, validate_block
from agentkit.tools._base import CLOSE_TIMEOUT, Tool
from agentkit.tools._context import ProgressOutbox, RunContext, ToolContext
from agentkit.tools._convert import ChunkCollector, truncate
from agentkit.tools._errors import (
    ArgumentsError,
    approval_required,
    bad_tool_schema,
    inactive_group,
    invalid_arguments,
    invalid_json,
    retry,
    timed_out,
    tool_failed,
    unconvertible_arguments,
    unknown_tool,
)
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.tools._toolkit import Toolkit

__all__ = ["call_offered_tool", "call_tool"]

logger = logging.getLogger("agentkit.tools")
_RESULT_TYPES = frozenset(("text", "image", "audio", "document"))
# The context of a call made outside any run (``toolkit.execute(block)``): no deps.
_OUTSIDE_RUN: RunContext[Any] = RunContext(deps=None)
# The output limit of an offered tool in a run without a toolkit: ``Toolkit()``'s default.
_NO_TOOLKIT_OUTPUT_CHARS = 100_000


def call_tool(
    toolkit: Toolkit,
    block: ToolUseBlock,
    data: object = None,
    *,
    run: RunContext[Any] | None = None,
    approved: bool = False,
) -> AsyncGenerator[ToolResponse, None]:
    """Run the call ``block`` asks for; yield progress chunks, then one final chunk.

    The checks run now (they are synchronous); the returned generator runs the tool.
    The tool's ``ToolContext`` is ``run`` (the run's context; an empty one outside a run)
    plus the call: ``data`` and ``approved`` included.
    """
    name = block.get("name", "")
    tool, error = _lookup(toolkit, name)
    if error is not None:
        return _single(error)
    assert tool is not None
    return _call_checked(tool, name, block, data, toolkit, run, approved)


def call_offered_tool(
    tool: Tool,
    block: ToolUseBlock,
    data: object = None,
    *,
    toolkit: Toolkit | None = None,
    run: RunContext[Any] | None = None,
    approved: bool = False,
) -> AsyncGenerator[ToolResponse, None]:
    """Run ``block`` with ``tool``, a tool offered outside any toolkit (a capability's).

    The same checks, timeout, errors and output limit as :func:`call_tool` (``toolkit``,
    the run's toolkit if any, gives the default timeout and output limit and is the
    context's ``toolkit``); no lookup and no group: the caller resolved the tool.
    """
    return _call_checked(tool, tool.name, block, data, toolkit, run, approved)


def _call_checked(
    tool: Tool,
    name: str,
    block: ToolUseBlock,
    data: object,
    toolkit: Toolkit | None,
    run: RunContext[Any] | None,
    approved: bool,
) -> AsyncGenerator[ToolResponse, None]:
    error = _check_arguments(tool, block, name)
    if error is not None:
        return _single(error)
    outbox = ProgressOutbox()
    ctx: ToolContext[Any] = (run or _OUTSIDE_RUN).for_call(
        block.get("id", ""), name, toolkit, data, tool_call_approved=approved, outbox=outbox
    )
    default_timeout = toolkit.default_timeout if toolkit is not None else None
    limit = toolkit.max_output_chars if toolkit is not None else _NO_TOOLKIT_OUTPUT_CHARS
    timeout = tool.timeout if tool.timeout is not None else default_timeout
    drive = _run_live if tool.reports_progress else _run
    return drive(tool, block["input"], ctx, outbox, timeout, limit)


async def _single(response: ToolResponse) -> AsyncGenerator[ToolResponse, None]:
    yield response


def _lookup(toolkit: Toolkit, name: str) -> tuple[Tool | None, ToolResponse | None]:
    """The tool ``name`` in ``toolkit``, or the error answering a call of it."""
    tool = toolkit.get_tool(name)
    if tool is None:
        return None, unknown_tool(name, (t.name for t in toolkit.active_tools()))
    if not toolkit.is_active(tool):
        return None, inactive_group(name, tool.group, toolkit.meta_tool_name)
    return tool, None


def _check_arguments(tool: Tool, block: ToolUseBlock, name: str) -> ToolResponse | None:
    """Everything about the arguments that can be refused before the tool runs."""
    arguments = block.get("input")
    if "raw_input" in block or not isinstance(arguments, dict):
        raw = block.get("raw_input")
        return invalid_json(name, raw, _json_problem(raw, arguments))
    checks = tool.checks
    if checks.certainly_valid(arguments):
        return None  # certainly valid: jsonschema would find no error (nor a schema error)
    try:
        validator = checks.get_validator()
    except Exception as exc:  # jsonschema SchemaError: the tool's own schema is broken
        logger.error("tool %r has an invalid parameters schema", name, exc_info=exc)
        return bad_tool_schema(name, _first_line(exc))
    errors = list(validator.iter_errors(arguments))
    if errors:
        from jsonschema.exceptions import relevance

        errors.sort(key=relevance, reverse=True)
        return invalid_arguments(name, errors, tool.parameters)
    return None


def _json_problem(raw: str | None, arguments: object) -> str | None:
    if raw is None:
        return f"got {type(arguments).__name__} instead of an object"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return str(exc)
    except RecursionError:
        return "the JSON is nested too deeply"
    if not isinstance(value, dict):
        return f"got a JSON {type(value).__name__} instead of an object"
    if too_deep(value):
        return f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels"
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


async def _run(
    tool: Tool,
    arguments: dict[str, object],
    ctx: ToolContext,
    outbox: ProgressOutbox,
    timeout_s: float | None,
    limit: int | None,
) -> AsyncGenerator[ToolResponse, None]:
    """Drive ``tool`` to its end, each step under the call's deadline.

    Nothing the tool yields is lost: the chunks add up by ``ChunkCollector``'s rule.
    """
    it = tool.invoke_with_context(arguments, ctx)
    collected = ChunkCollector()
    deadline = anyio.current_time() + timeout_s if timeout_s is not None else math.inf
    finished = False
    try:
        while True:
            chunk, failed = await _step(tool, it, collected, deadline, timeout_s)
            finished = chunk is None  # ended, raised or timed out
            if outbox.pending:  # read first: most tools report no progress out of band
                for pending in outbox.take_pending():
                    yield pending
            if chunk is None:
                final = failed if failed is not None else collected.result()
                yield _finish(final, limit, tool.name)
                return
            for progress in collected.add(chunk):
                yield progress
    finally:
        if not finished:  # cut short (closed or cancelled): let the tool clean up, bounded
            await _close(tool, it)


async def _step(
    tool: Tool,
    it: AsyncIterator[ToolResponse],
    collected: ChunkCollector,
    deadline: float,
    timeout_s: float | None,
) -> tuple[ToolResponse | None, ToolResponse | None]:
    """Await the tool's next chunk. Returns ``(chunk, None)`` or ``(None, error_final)``.

    ``(None, None)`` means the tool ended.
    """
    if timeout_s is None:  # no cancel scope needed: keep the common path lean
        return await _next(tool, it, collected)
    with anyio.CancelScope(deadline=deadline) as scope:
        return await _next(tool, it, collected)
    # Only our own deadline lands here: an outer cancellation propagates through the scope.
    assert scope.cancelled_caught
    logger.info("tool %r timed out after %s s", tool.name, timeout_s)
    return None, timed_out(tool.name, timeout_s, collected.partial())


async def _next(
    tool: Tool, it: AsyncIterator[ToolResponse], collected: ChunkCollector
) -> tuple[ToolResponse | None, ToolResponse | None]:
    try:
        return await it.__anext__(), None
    except StopAsyncIteration:
        return None, None
    except ArgumentsError as exc:
        return None, unconvertible_arguments(tool.name, str(exc), tool.parameters)
    except ToolRetry as exc:  # the tool steers the model: not a failure worth a traceback
        return None, retry(tool.name, exc.message)
    except ApprovalRequired as exc:
        return None, approval_required(tool.name, exc.reason)
    except Exception as exc:
        _log_failure(tool.name, exc)
        return None, tool_failed(tool.name, exc, collected.partial())
    except BaseException as exc:
        if not isinstance(exc, SystemExit) and not _stray_cancel(exc):
            raise  # a real cancellation, KeyboardInterrupt...
        # sys.exit() inside a tool (argparse on bad input, a wrapped script) is the tool's
        # failure, not a request to stop the agent's process; so is a CancelledError the
        # tool raised itself (awaiting a future someone else cancelled) while nobody
        # cancelled this task: it must not read as an interrupt and kill the sibling calls.
        _log_failure(tool.name, exc)
        return None, tool_failed(tool.name, exc, collected.partial())


def _log_failure(name: str, exc: BaseException) -> None:
    """Record a tool's failure for the developer; the model gets it as an error result.

    A failing tool is an expected event of an agent's work, not a fault of the program: it
    is an INFO record, with the traceback attached only when DEBUG is on, so an
    application's default logging setup (WARNING) prints nothing.
    """
    if logger.isEnabledFor(logging.INFO):
        debug = logger.isEnabledFor(logging.DEBUG)
        logger.info(
            "tool %r raised %s: %s", name, type(exc).__name__, exc, exc_info=exc if debug else None
        )


def _stray_cancel(exc: BaseException) -> bool:
    """Whether ``exc`` is an asyncio CancelledError with no cancellation of this task."""
    import asyncio

    if not isinstance(exc, asyncio.CancelledError):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio (trio): cannot tell, so treat it as real
        return False
    return task is not None and task.cancelling() == 0


async def _close(tool: Tool, it: AsyncIterator[ToolResponse]) -> None:
    """Close the tool's iterator (a failing cleanup is only logged), shielded and bounded."""
    aclose = getattr(it, "aclose", None)
    # An async generator that raised (an interrupt cancelled it mid-await) or returned is
    # closed already (``ag_frame`` is None): skip the bounded close, whose timer and shield
    # cost a fifth of an interrupt.
    if aclose is None or getattr(it, "ag_frame", True) is None:
        return
    with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
        await _aclose(tool, aclose)


async def _aclose(tool: Tool, aclose: Callable[[], Awaitable[object]]) -> None:
    try:
        await aclose()
    except Exception as exc:
        logger.warning("tool %r failed while cleaning up", tool.name, exc_info=exc)


def _finish(final: ToolResponse, limit: int | None, name: str) -> ToolResponse:
    final.is_last = True
    # The content and metadata may have been replaced since the response was built (its
    # constructor cleaned them): checked again here, once. ``validate_block`` cleans every
    # block's text as it checks its shape, so ``ToolResponse.clean`` would only repeat it.
    if final.metadata:
        final.metadata = clean_json(final.metadata)
    try:  # a malformed block would fail deep inside the agent, when stored in memory
        for i, block in enumerate(final.content):
            validate_block(block, f"content[{i}]")
            if block["type"] not in _RESULT_TYPES:
                raise MessageValidationError(f"content[{i}].type", "not a tool result block")
    except MessageValidationError as exc:
        logger.warning("tool %r returned malformed content: %s", name, exc)
        return tool_failed(name, exc)
    if limit is not None:
        final.content = truncate(final.content, limit)
    return final


async def _run_live(
    tool: Tool,
    arguments: dict[str, object],
    ctx: ToolContext,
    outbox: ProgressOutbox,
    timeout_s: float | None,
    limit: int | None,
) -> AsyncGenerator[ToolResponse, None]:
    """Like ``_run``, with the tool in a task of its own so out-of-band progress streams live.

    This is the one place a task group stays open across ``yield``: consume the call to its
    end or close it (``contextlib.aclosing``), which the agent does.
    """
    send, receive = anyio.create_memory_object_stream[ToolResponse](math.inf)

    def emit(chunk: ToolResponse) -> None:
        # Progress that arrives after the call ended is dropped.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait(chunk)

    async def pump() -> None:
        async with send:
            async for chunk in _run(tool, arguments, ctx, outbox, timeout_s, limit):
                send.send_nowait(chunk)

    outbox.sink = emit
    async with receive, anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            async for chunk in receive:
                yield chunk
        except GeneratorExit:
            # Closed early: stop the tool and end quietly (a GeneratorExit leaving the task
            # group would come out wrapped in an ExceptionGroup, which ``aclose`` rejects).
            tg.cancel_scope.cancel()

r"""``ToolContext``: what a running tool may know about its call, hidden from the model.

A function tool receives it by declaring a parameter annotated ``ToolContext`` (any name);
the parameter never appears in the tool's JSON schema::

    @toolkit.tool
    async def index(path: str, ctx: ToolContext) -> str:
        for i, file in enumerate(files(path)):
            await ctx.report_progress(f"indexed {file}\n", progress=i, total=n)
        return "done"

Progress chunks are for display (``is_last=False``); they are not part of the final result.

``ToolContext[D]`` is generic in the run's dependencies: ``agent.run(..., deps=D(...))``
hands ``deps`` to every tool of that run as ``ctx.deps`` (typed ``D``)::

    @toolkit.tool
    async def lookup(ctx: ToolContext[Deps], q: str) -> str:
        return f"{ctx.deps.user_id}:{q}"
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from agentkit.messages import TextBlock
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from agentkit.tools._toolkit import Toolkit

__all__ = ["DepsT", "ProgressOutbox", "ToolContext"]

DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's dependencies (``agent.run(..., deps=...)``)."""


class ProgressOutbox:
    """Where a call's progress chunks go: a live sink, or a buffer drained between steps.

    Internal API between ``ToolContext`` and the Toolkit's call driver: the driver makes
    one per call, hands it to the context, and sets ``sink`` while the tool runs in a task
    of its own (live streaming); otherwise it drains ``take_pending()`` at each step.
    """

    __slots__ = ("pending", "sink")

    def __init__(self) -> None:
        self.sink: Callable[[ToolResponse], None] | None = None
        self.pending: list[ToolResponse] = []

    def deliver(self, chunk: ToolResponse) -> None:
        """Send ``chunk`` to the sink, or buffer it until the next ``take_pending()``."""
        if self.sink is not None:
            self.sink(chunk)
        else:
            self.pending.append(chunk)

    def take_pending(self) -> list[ToolResponse]:
        """The buffered chunks, in order; the buffer starts empty again."""
        pending, self.pending = self.pending, []
        return pending


class ToolContext(Generic[DepsT]):
    """The context of one tool call.

    Attributes:
        call_id: The id of the ``tool_use`` block being answered.
        tool_name: The tool's name.
        toolkit: The Toolkit running the call.
        data: Whatever the caller passed as ``call_tool_function(..., context=)`` (the agent
            passes itself), or None.
        deps: The run's dependencies (``agent.run(..., deps=...)``; None when the run has
            none). Never serialized into the agent's state.
        tool_call_approved: True when a human approved this call (after the tool raised
            ``ApprovalRequired``, or for a tool registered with ``requires_approval``).
    """

    __slots__ = (
        "_loop_thread",
        "_outbox",
        "call_id",
        "data",
        "deps",
        "tool_call_approved",
        "tool_name",
        "toolkit",
    )

    def __init__(
        self,
        call_id: str,
        tool_name: str,
        toolkit: Toolkit | None = None,
        data: Any = None,
        *,
        deps: Any = None,
        tool_call_approved: bool = False,
        outbox: ProgressOutbox | None = None,
    ) -> None:
        self.call_id = call_id
        self.tool_name = tool_name
        self.toolkit = toolkit
        self.data = data
        self.deps: DepsT = deps
        self.tool_call_approved = tool_call_approved
        # The Toolkit's call driver streams it live or yields it at the tool's next step.
        self._outbox = outbox if outbox is not None else ProgressOutbox()
        self._loop_thread = threading.get_ident()

    async def report_progress(
        self,
        message: str | list[ToolResultContent] | None = None,
        *,
        progress: float | None = None,
        total: float | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        """Send a progress chunk (``is_last=False``) to whoever consumes the call.

        Args:
            message: Text (or content blocks) to show; may be None for a bare counter.
            progress: Work done so far, in any unit (MCP progress semantics).
            total: Total work, if known.
            metadata: Extra JSON-safe labels for the chunk (merged with progress/total).
        """
        self.emit_progress(message, progress=progress, total=total, metadata=metadata)

    def emit_progress(
        self,
        message: str | list[ToolResultContent] | None = None,
        *,
        progress: float | None = None,
        total: float | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        """Report progress from sync code: a sync tool (in its worker thread) or a callback.

        Same arguments as :meth:`report_progress`. Never raises: progress arriving after
        the call ended is dropped.
        """
        if isinstance(message, str):
            content: list[ToolResultContent] = [TextBlock(type="text", text=message)]
        else:
            content = list(message or ())
        if progress is not None or total is not None:
            metadata = {**(metadata or {}), "progress": progress, "total": total}
        chunk = ToolResponse(content=content, metadata=metadata, is_last=False)
        if threading.get_ident() != self._loop_thread:
            import anyio.from_thread

            # The event loop's structures are not thread-safe: deliver on the loop.
            with contextlib.suppress(RuntimeError):  # the loop is gone, or not a worker thread
                anyio.from_thread.run_sync(self._outbox.deliver, chunk)
            return
        self._outbox.deliver(chunk)

    @property
    def agent(self) -> Any:
        """The agent running the call (None when the call runs outside an agent)."""
        return self.data

    def __repr__(self) -> str:
        return f"ToolContext(call_id={self.call_id!r}, tool_name={self.tool_name!r})"

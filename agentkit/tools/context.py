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
from agentkit.tools.response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from agentkit.tools.toolkit import Toolkit

__all__ = ["DepsT", "ToolContext"]

DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's dependencies (``agent.run(..., deps=...)``)."""


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
        "_emit",
        "_loop_thread",
        "_pending",
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
    ) -> None:
        self.call_id = call_id
        self.tool_name = tool_name
        self.toolkit = toolkit
        self.data = data
        self.deps: DepsT = deps
        self.tool_call_approved = tool_call_approved
        # Set by the Toolkit while the call runs in a task of its own (live streaming);
        # otherwise progress is buffered and yielded at the tool's next step.
        self._emit: Callable[[ToolResponse], None] | None = None
        self._pending: list[ToolResponse] = []
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
                anyio.from_thread.run_sync(self._deliver, chunk)
            return
        self._deliver(chunk)

    @property
    def agent(self) -> Any:
        """The agent running the call (None when the call runs outside an agent)."""
        return self.data

    def _deliver(self, chunk: ToolResponse) -> None:
        if self._emit is not None:
            self._emit(chunk)
        else:
            self._pending.append(chunk)

    def _take_pending(self) -> list[ToolResponse]:
        pending, self._pending = self._pending, []
        return pending

    def __repr__(self) -> str:
        return f"ToolContext(call_id={self.call_id!r}, tool_name={self.tool_name!r})"

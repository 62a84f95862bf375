r"""``RunContext`` and ``ToolContext``: what a run's participants may know, hidden from the model.

``RunContext[D]`` is what capabilities see at every point of a run (``Capability`` in
``agentkit.agent``): the run's dependencies, its id, the agent's name, the usage so far, the
conversation's memory (for reading) and the model. ``ToolContext[D]`` is a ``RunContext``
plus the call; a function tool receives it by declaring a parameter annotated
``ToolContext`` (any name), which never appears in the tool's JSON schema::

    @toolkit.tool
    async def index(path: str, ctx: ToolContext) -> str:
        for i, file in enumerate(files(path)):
            await ctx.report_progress(f"indexed {file}\n", progress=i, total=n)
        return "done"

Progress chunks are for display (``is_last=False``); they are not part of the final result.

Both are generic in the run's dependencies: ``agent.run(..., deps=D(...))`` hands ``deps`` to
every tool of that run as ``ctx.deps`` (typed ``D``)::

    @toolkit.tool
    async def lookup(ctx: ToolContext[Deps], q: str) -> str:
        return f"{ctx.deps.user_id}:{q}"

This module is below the agent in the layering (tools <- agent), so the agent's types are
seen through the small protocols ``UsageView``, ``MemoryView`` and ``ModelView``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from agentkit.messages import Msg, TextBlock
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from agentkit.tools._toolkit import Toolkit

__all__ = [
    "DepsT",
    "MemoryView",
    "ModelView",
    "ProgressOutbox",
    "RunContext",
    "ToolContext",
    "UsageView",
]

DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's dependencies (``agent.run(..., deps=...)``)."""


class UsageView(Protocol):
    """A read view of what a run consumed so far (the agent's ``RunUsage`` is one)."""

    @property
    def requests(self) -> int:
        """Model requests made."""
        ...

    @property
    def input_tokens(self) -> int:
        """Prompt tokens billed."""
        ...

    @property
    def output_tokens(self) -> int:
        """Completion tokens billed."""
        ...

    @property
    def tool_calls(self) -> int:
        """Tool calls run."""
        ...

    @property
    def cost(self) -> float | None:
        """Cost in USD (None when a response did not report one)."""
        ...

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        ...


class MemoryView(Protocol):
    """The conversation, for reading (an agent's ``Memory`` is one)."""

    async def get_memory(self) -> list[Msg]:
        """The messages of the conversation, oldest first."""
        ...


class ModelView(Protocol):
    """The model of a run, as a participant may see it (a ``ChatModel`` is one)."""

    @property
    def model_name(self) -> str:
        """The provider's model name."""
        ...


@dataclass(frozen=True, slots=True, repr=False)
class _NoUsage:
    """The usage of a call made outside any run: nothing."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    cost: float | None = 0.0
    total_tokens: int = 0

    def __repr__(self) -> str:
        return "NO_USAGE"


class _NoMemory:
    """The conversation of a call made outside any run: empty."""

    __slots__ = ()

    async def get_memory(self) -> list[Msg]:
        return []

    def __repr__(self) -> str:
        return "NO_MEMORY"


_NO_USAGE = _NoUsage()
_NO_MEMORY = _NoMemory()


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


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunContext(Generic[DepsT]):
    """What every participant of one run may know about it (frozen; one per run).

    Attributes:
        deps: The run's dependencies (``agent.run(..., deps=...)``; None when it has none).
            Never serialized into the agent's state.
        run_id: A random id of this run ("" outside a run).
        agent_name: The name of the agent running it ("" outside a run).
        usage: What the run consumed so far (requests, tokens, tool calls, cost); a live
            read view that the run keeps counting into.
        memory: The conversation, for reading (``await ctx.memory.get_memory()``).
        model: The run's model (None outside a run).
    """

    deps: DepsT
    run_id: str = ""
    agent_name: str = ""
    usage: UsageView = _NO_USAGE
    memory: MemoryView = _NO_MEMORY
    model: ModelView | None = None

    def for_call(
        self,
        call_id: str,
        tool_name: str,
        toolkit: Toolkit | None = None,
        data: object = None,
        *,
        tool_call_approved: bool = False,
        outbox: ProgressOutbox | None = None,
    ) -> ToolContext[DepsT]:
        """The context of one call of this run (the same run fields, plus the call)."""
        return ToolContext(
            deps=self.deps,
            run_id=self.run_id,
            agent_name=self.agent_name,
            usage=self.usage,
            memory=self.memory,
            model=self.model,
            call_id=call_id,
            tool_name=tool_name,
            toolkit=toolkit,
            data=data,
            tool_call_approved=tool_call_approved,
            outbox=outbox,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(run_id={self.run_id!r}, agent_name={self.agent_name!r})"


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ToolContext(RunContext[DepsT]):
    """The context of one tool call: the run's ``RunContext`` plus the call.

    Attributes:
        call_id: The id of the ``tool_use`` block being answered.
        tool_name: The tool's name.
        toolkit: The Toolkit running the call.
        data: Whatever the caller passed as ``call_tool_function(..., context=)`` (the agent
            passes itself), or None.
        tool_call_approved: True when a human approved this call (after the tool raised
            ``ApprovalRequired``, or for a tool registered with ``requires_approval``).
        outbox: Where progress goes (the Toolkit's call driver makes one per call).
    """

    call_id: str
    tool_name: str
    toolkit: Toolkit | None = None
    data: object = None
    tool_call_approved: bool = False
    outbox: InitVar[ProgressOutbox | None] = None
    _outbox: ProgressOutbox = field(init=False)
    _loop_thread: int = field(init=False)

    def __post_init__(self, outbox: ProgressOutbox | None) -> None:
        # Frozen: the two private slots are set once, here. The Toolkit's call driver
        # streams the outbox live or yields it at the tool's next step.
        object.__setattr__(self, "_outbox", outbox if outbox is not None else ProgressOutbox())
        object.__setattr__(self, "_loop_thread", threading.get_ident())

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
    def agent(self) -> object:
        """The agent running the call (None when the call runs outside an agent).

        Typed ``object``: narrow it (``isinstance(ctx.agent, ReActAgent)``) before use; what
        a tool needs from its run is typed on the context itself (``deps``, ``usage``...).
        """
        return self.data

    def __repr__(self) -> str:
        return f"ToolContext(call_id={self.call_id!r}, tool_name={self.tool_name!r})"

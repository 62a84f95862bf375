"""Shared helpers for the agent tests: counting tools, a signalling model, memory checks."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import anyio

from agentkit.agent import ReActAgent
from agentkit.agent._capabilities import Capabilities
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest
from agentkit.tools import Toolkit


class Recorder:
    """Counts tool calls and records start/end times per call label."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.order: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def start(self, label: str) -> None:
        self.calls[label] += 1
        self.started[label] = time.perf_counter()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self, label: str) -> None:
        self.ended[label] = time.perf_counter()
        self.order.append(label)
        self.in_flight -= 1


def make_toolkit(rec: Recorder) -> Toolkit:
    """A toolkit with ``sleep``, ``fail``, ``barrier``, ``add`` and ``guarded`` tools."""
    tk = Toolkit()

    async def sleep(label: str, seconds: float = 0.0) -> str:
        """Sleep, then answer.

        Args:
            label: A name for this call.
            seconds: How long to sleep.
        """
        rec.start(label)
        try:
            await anyio.sleep(seconds)
        finally:
            rec.end(label)
        return f"slept {label}"

    async def fail(label: str) -> str:
        """Always fails.

        Args:
            label: A name for this call.
        """
        rec.start(label)
        rec.end(label)
        raise ValueError(f"boom {label}")

    async def barrier(label: str, seconds: float = 0.0) -> str:
        """A sequential tool.

        Args:
            label: A name for this call.
            seconds: How long to sleep.
        """
        rec.start(label)
        await anyio.sleep(seconds)
        rec.end(label)
        return f"barrier {label}"

    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: First.
            b: Second.
        """
        rec.start(f"add{a}+{b}")
        rec.end(f"add{a}+{b}")
        return a + b

    async def guarded(label: str) -> str:
        """Needs approval.

        Args:
            label: A name for this call.
        """
        rec.start(label)
        rec.end(label)
        return f"guarded {label}"

    tk.register_tool_function(sleep)
    tk.register_tool_function(fail)
    tk.register_tool_function(barrier, sequential=True)
    tk.register_tool_function(add)
    tk.register_tool_function(guarded, requires_approval=True)
    return tk


def agent_for(model: ChatModel, rec: Recorder | None = None, **kwargs: Any) -> ReActAgent:
    toolkit = make_toolkit(rec or Recorder())
    kwargs.setdefault("print_hint", False)
    return ReActAgent("bot", "You are a test bot.", model, toolkit, **kwargs)


async def checked_memory(agent: ReActAgent) -> list[Msg]:
    """The agent's memory, after checking the invariant with its pending calls."""
    messages = await agent.memory.get_memory()
    check_memory_invariant(messages, [c["id"] for c in agent.pending_tool_calls])
    return messages


def results_of(messages: Sequence[Msg]) -> dict[str, tuple[Any, bool]]:
    """``{call_id: (output, is_error)}`` over all tool_result blocks."""
    out = {}
    for msg in messages:
        for block in msg.get_blocks("tool_result"):
            out[block["id"]] = (block["output"], bool(block.get("is_error")))
    return out


def shape(messages: Sequence[Msg]) -> list[tuple[str, list[str]]]:
    """A compact view of a conversation: ``(role, [block summaries])`` per message."""
    view = []
    for msg in messages:
        parts = []
        for b in msg.get_content_blocks():
            if b["type"] == "text":
                parts.append(f"text:{b['text']}")
            elif b["type"] == "tool_use":
                parts.append(f"use:{b['id']}")
            elif b["type"] == "tool_result":
                parts.append(f"result:{b['id']}{'!' if b.get('is_error') else ''}")
            else:
                parts.append(b["type"])
        view.append((msg.role, parts))
    return view


class SignalModel(ChatModel):
    """Wraps a model; sets ``event`` when a (streamed) chunk matches ``when``."""

    def __init__(self, inner: ChatModel, when: Callable[[ChatResponse], bool]) -> None:
        super().__init__(inner.model_name, inner.stream)
        self.inner = inner
        self.when = when
        self.event = anyio.Event()

    async def _request(self, request: ModelRequest) -> ChatResponse:
        out = await self.inner.request(request)
        if self.when(out):
            self.event.set()
        return out

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        async with contextlib.aclosing(self.inner.request_stream(request)) as stream:
            async for chunk in stream:
                if self.when(chunk):
                    self.event.set()
                yield chunk


def refuse_capability_points(monkeypatch: Any) -> None:
    """Make every entry point of ``Capabilities`` fail the test when the loop calls it."""

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError("a capability was added or called")

    points = [n for n in vars(Capabilities) if n.startswith("run_")]
    for name in [*points, "first", "bind", "system", "offered_tools"]:
        monkeypatch.setattr(Capabilities, name, refuse)  # raising: each must exist

"""``inline=True``: a sync tool called on the event loop, without the worker-thread handoff."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import aclosing

import anyio
import pytest

from agentkit.exceptions import ToolRegistrationError
from agentkit.testing import tool_use
from agentkit.tools import Toolkit, ToolResponse


async def test_an_inline_sync_tool_runs_on_the_event_loop_thread() -> None:
    tk = Toolkit()
    threads: list[int] = []

    @tk.tool(inline=True)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        threads.append(threading.get_ident())
        return a + b

    @tk.tool
    def threaded(a: int) -> int:
        """Echo a number from a worker thread."""
        threads.append(threading.get_ident())
        return a

    chunks = [c async for c in tk.call_tool_function(tool_use("add", a=2, b=3))]
    assert [c.get_text() for c in chunks] == ["5"]
    final = await tk.execute(tool_use("threaded", a=1))
    assert final.get_text() == "1"
    assert threads[0] == threading.get_ident()  # inline: the loop's own thread
    assert threads[1] != threading.get_ident()  # default: a worker thread


async def test_an_inline_sync_generator_streams_its_items_in_order() -> None:
    tk = Toolkit()

    @tk.tool(inline=True)
    def count(n: int) -> Iterator[str]:
        """Count up to n."""
        for i in range(n):
            yield f"{i}\n"

    chunks = [c async for c in tk.call_tool_function(tool_use("count", n=3))]
    assert [c.get_text() for c in chunks] == ["0\n", "1\n", "2\n", "0\n1\n2\n"]
    assert [c.is_last for c in chunks] == [False, False, False, True]


async def test_an_interrupt_during_an_inline_call_lands_when_the_call_returns() -> None:
    # An inline call cannot be stopped mid-call: it finishes, then the cancellation lands
    # and no result is delivered.
    tk = Toolkit()
    events: list[str] = []
    received: list[ToolResponse] = []

    with anyio.CancelScope() as scope:

        @tk.tool(inline=True)
        def work() -> str:
            """Do some work."""
            scope.cancel()  # the interrupt arrives while the call is running
            events.append("finished")
            return "done"

        async for chunk in tk.call_tool_function(tool_use("work")):
            received.append(chunk)
        events.append("not reached")
    assert scope.cancelled_caught
    assert events == ["finished"]
    assert received == []


async def test_an_interrupted_inline_generator_is_closed_between_items() -> None:
    tk = Toolkit()
    events: list[str] = []

    with anyio.CancelScope() as scope:

        @tk.tool(inline=True)
        def items() -> Iterator[str]:
            """Yield items."""
            try:
                yield "first"
                scope.cancel()
                yield "second"
                events.append("third")
                yield "third"
            finally:
                events.append("closed")

        stream = tk.call_tool_function(tool_use("items"))
        async with aclosing(stream):
            async for chunk in stream:
                events.append(chunk.get_text())
    assert scope.cancelled_caught
    assert events == ["first", "second", "closed"]


def test_inline_is_refused_for_async_functions_and_with_a_timeout() -> None:
    tk = Toolkit()

    async def fetch() -> str:
        """Fetch."""
        return ""

    def quick() -> str:
        """Quick."""
        return ""

    with pytest.raises(ToolRegistrationError, match="sync functions"):
        tk.register_tool_function(fetch, inline=True)
    with pytest.raises(ToolRegistrationError, match="timeout"):
        tk.register_tool_function(quick, inline=True, timeout=1.0)

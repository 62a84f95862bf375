"""Cancelling a reply's scope cheaply (``ReActAgent.interrupt``)."""

from __future__ import annotations

import asyncio

import anyio

__all__ = ["cancel_run", "current_task"]


def cancel_run(scope: anyio.CancelScope, host: object) -> None:
    """Cancel ``scope``; from another asyncio task, from a loop callback.

    anyio formats the calling task's repr (its coroutine, frame and awaited future) into the
    cancel message: about 0.1 ms, half of an interrupt's latency while a tool runs. A
    callback has no current task, so nothing is formatted; the run is cut at the same point,
    because anyio delivers a cancellation to a waiting task on the loop's next iteration
    anyway. From the run's own task (a listener or hook that interrupts) the scope is
    cancelled at once, so that its next checkpoint raises, yielding or not.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio), or no loop: cancel here
        scope.cancel()
        return
    current = asyncio.current_task(loop)
    if current is None or current is host:
        scope.cancel()
    else:
        loop.call_soon(scope.cancel)


def current_task() -> object:
    """The running asyncio task (None under another event loop)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None

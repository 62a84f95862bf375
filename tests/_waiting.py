"""Waiting in tests on a condition rather than for a fixed time.

A fixed sleep ("long enough for the call to reach the server") is either too short on a
busy machine, so the test flakes, or too long everywhere, so the suite is slow. Where a
test can get an event from the code under test it waits on that event; where the thing it
waits for lives outside the process (a server's counters, a child process, a log record
written by another task) it polls with :func:`eventually`, which is bounded and says what
it was waiting for when it gives up.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

import anyio

T = TypeVar("T")

#: Generous: a condition that holds at all holds long before this on any machine, and a
#: test that waits this long has failed anyway.
TIMEOUT = 10.0


@overload
async def eventually(
    check: Callable[[], Awaitable[T]], what: str, *, timeout: float = ..., interval: float = ...
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T], what: str, *, timeout: float = ..., interval: float = ...
) -> T: ...


async def eventually(
    check: Callable[[], object],
    what: str,
    *,
    timeout: float = TIMEOUT,
    interval: float = 0.01,
) -> object:
    """Wait until ``check()`` returns something truthy, and return it.

    Args:
        check: A sync or async callable, called until its result is truthy.
        what: What the test is waiting for, for the failure message.
        timeout: Seconds before the wait fails.
        interval: Seconds between two checks.

    Returns:
        The first truthy result of ``check()``.

    Raises:
        AssertionError: The condition did not hold within ``timeout`` seconds.
    """
    last: object = None
    try:
        with anyio.fail_after(timeout):
            while True:
                result = check()
                if inspect.isawaitable(result):
                    result = await result
                last = result
                if result:
                    return result
                await anyio.sleep(interval)
    except TimeoutError:
        raise AssertionError(
            f"timed out after {timeout} s waiting for {what} (last check: {last!r})"
        ) from None


async def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port`` (for eventually)."""
    try:
        stream = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    return True

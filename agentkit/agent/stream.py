"""``agent.stream(msg)``: the reply's events as an async iterator.

The reply runs in a task group owned by the :class:`EventStream`; events travel through an
anyio memory object stream. Use it as a context manager, so the task group is entered and
left in your task (structured concurrency)::

    async with agent.stream("hi") as events:
        async for event in events:
            ...

Leaving the block early (``break``, an exception) interrupts the reply and waits until its
memory is repaired. Plain ``async for event in agent.stream("hi")`` also works when you
iterate to the end (or call ``await events.aclose()`` when stopping early).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING

import anyio

from agentkit.agent.events import AgentEvent

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from agentkit.agent.react import ReActAgent
    from agentkit.messages import Msg

__all__ = ["EventStream"]


class EventStream:
    """Async iterator (and async context manager) over one reply's events.

    Attributes:
        reply: The reply message once the reply finished (None before, or on error).
    """

    def __init__(self, agent: ReActAgent, start: Callable[[], Awaitable[Msg]]) -> None:
        self._agent = agent
        self._start = start
        self._tg: TaskGroup | None = None
        self._send: MemoryObjectSendStream[AgentEvent] | None = None
        self._recv: MemoryObjectReceiveStream[AgentEvent] | None = None
        self._closing = False
        self._running = False
        self._done = False
        self._exited = False
        self._auto = False
        self._error: BaseException | None = None
        self.reply: Msg | None = None

    def _sink(self, event: AgentEvent) -> None:
        if self._send is not None:
            # The consumer may be gone: the reply is then being interrupted.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._send.send_nowait(event)

    async def _runner(self) -> None:
        assert self._send is not None
        with self._send:
            if self._closing:
                return
            listeners = self._agent._listeners
            listeners.append(self._sink)
            self._running = True
            try:
                self.reply = await self._start()
            except Exception as exc:  # re-raised in the consumer's task, unwrapped
                self._error = exc
            finally:
                self._running = False
                self._done = True
                listeners.remove(self._sink)

    async def __aenter__(self) -> EventStream:
        if self._tg is not None:
            raise RuntimeError("an EventStream can be entered only once")
        self._send, self._recv = anyio.create_memory_object_stream[AgentEvent](math.inf)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._runner)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._exited or self._tg is None:
            return None
        self._exited = True
        self._closing = True
        if self._running and not self._done:
            self._agent._interrupt(None)
        assert self._recv is not None
        self._recv.close()
        # The body's own exception (if any) propagates as is, not wrapped in a group: the
        # runner never raises (it keeps the reply's error for the consumer).
        await self._tg.__aexit__(None, None, None)
        if exc is None and self._error is not None:
            error, self._error = self._error, None
            raise error
        return None

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._tg is None:
            self._auto = True
            await self.__aenter__()
        assert self._recv is not None
        try:
            return await self._recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            if self._auto:
                await self.__aexit__(None, None, None)
            elif self._error is not None:
                error, self._error = self._error, None
                raise error from None
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Stop early: interrupt the reply (if running) and wait until it is finalized."""
        if self._tg is not None:
            await self.__aexit__(None, None, None)

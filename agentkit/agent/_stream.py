"""``agent.stream(msg)``: the reply's events as an async iterator.

Preferred form, fully structured (the reply runs in a task group entered and left in your
task)::

    async with agent.stream("hi") as events:
        async for event in events:
            ...

Leaving the block early (``break``, an exception) interrupts the reply and waits until its
memory is repaired. Events travel through an unbounded queue (a deque and one waiter), so the
reply never waits for a slow consumer.

Once the reply has ended, ``events.result`` is its typed ``RunResult`` (built by the same code
as ``agent.run()``): ``output`` is the ``output_type`` instance when one was given::

    async with agent.stream("Weather in Rome?", output_type=Forecast) as events:
        async for event in events:
            ...
    forecast: Forecast = events.result.output

Plain ``async for event in agent.stream("hi")`` works too (asyncio only): the reply then runs
in a task owned by the iterator. Reading to the end or ``await events.aclose()`` waits for
it; an iterator abandoned after a ``break`` interrupts the reply when it is garbage
collected (immediately, in CPython, once nothing refers to it).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Protocol

import anyio
import anyio.lowlevel

from agentkit.agent._result import OutputT, RunResult
from agentkit.events import AgentEvent
from agentkit.exceptions import UsageError
from agentkit.messages import Msg

if TYPE_CHECKING:
    import asyncio

    from anyio.abc import TaskGroup


__all__ = ["EventSource", "EventStream", "StartRun", "fan_out"]

logger = logging.getLogger("agentkit.agent")


def fan_out(sinks: list[Callable[[AgentEvent], None]]) -> Callable[[AgentEvent], None]:
    """One event sink that feeds ``sinks`` in order.

    Events are for display: a failing sink (a console printer on a closed or broken
    stdout...) must not abort the reply's work. It is logged and dropped.
    """
    if len(sinks) == 1:  # the common case (``agent.stream`` alone): no loop per event
        return _guarded(sinks[0])
    # Once per event: iterate a tuple (no copy per event), replaced when a sink fails.
    live = tuple(sinks)

    def emit(event: AgentEvent) -> None:
        nonlocal live
        for sink in live:
            try:
                sink(event)
            except Exception:
                logger.warning(
                    "event sink %r failed; it gets no more events of this reply",
                    sink,
                    exc_info=True,
                )
                live = tuple(s for s in live if s is not sink)

    return emit


def _guarded(sink: Callable[[AgentEvent], None]) -> Callable[[AgentEvent], None]:
    """``fan_out([sink])``: ``sink`` until it fails once, then nothing."""
    live: Callable[[AgentEvent], None] | None = sink

    def emit(event: AgentEvent) -> None:
        nonlocal live
        if live is None:
            return
        try:
            live(event)
        except Exception:
            logger.warning(
                "event sink %r failed; it gets no more events of this reply",
                sink,
                exc_info=True,
            )
            live = None

    return emit


class EventSource(Protocol):
    """What an ``EventStream`` needs of the agent (``ReActAgent`` implements it)."""

    def add_event_listener(self, sink: Callable[[AgentEvent], None]) -> None:
        """Send the next replies' events to ``sink`` too."""

    def remove_event_listener(self, sink: Callable[[AgentEvent], None]) -> None:
        """Stop sending events to ``sink``."""

    def interrupt_threadsafe(self, msg: None = None) -> bool:
        """Interrupt the running reply."""


StartRun = Callable[[], Awaitable["RunResult[OutputT] | Msg"]]
"""Starts the reply: ``agent.run(...)`` (a ``RunResult``), or a ``Msg`` for older callers."""

# Detached replies of plain iteration, referenced until done (asyncio keeps only weak refs).
_DETACHED: set[asyncio.Task[object]] = set()


class _Feed(Generic[OutputT]):
    """What a running reply shares with its EventStream: the queue of its events.

    The queue is a deque and one waiter, woken by the next event or by the end: the
    consumer waits only when nothing is queued, and takes a queued event without a trip
    through the event loop. It never refers to the EventStream itself, so dropping an
    abandoned iterator can interrupt the reply from ``EventStream.__del__``.
    """

    __slots__ = (
        "agent",
        "closing",
        "done",
        "ended",
        "error",
        "events",
        "reply",
        "result",
        "running",
        "waiter",
    )

    def __init__(self, agent: EventSource) -> None:
        self.agent = agent
        self.events: deque[AgentEvent] = deque()
        self.waiter: anyio.Event | None = None  # set while the consumer waits
        self.ended = False  # no event comes any more (the reply ended, or the consumer left)
        self.reply: Msg | None = None
        self.result: RunResult[OutputT] | None = None
        self.error: Exception | None = None
        self.running = False
        self.done = False
        self.closing = False

    def sink(self, event: AgentEvent) -> None:
        if self.ended:
            return  # the consumer is gone: the reply is then being interrupted
        self.events.append(event)
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            waiter.set()

    def end(self) -> None:
        """No more events: wake the consumer so that it sees the end."""
        self.ended = True
        waiter, self.waiter = self.waiter, None
        if waiter is not None:
            waiter.set()

    async def run(self, start: StartRun[OutputT]) -> None:
        try:
            if self.closing:
                return
            self.agent.add_event_listener(self.sink)
            self.running = True
            try:
                outcome = await start()
                if isinstance(outcome, Msg):
                    self.reply = outcome
                else:
                    self.result, self.reply = outcome, outcome.reply
            except Exception as exc:  # re-raised in the consumer's task, unwrapped
                self.error = exc
            finally:
                self.running = False
                self.done = True
                self.agent.remove_event_listener(self.sink)
        finally:
            self.end()

    def stop(self) -> None:
        """Interrupt the reply if it still runs, and stop delivering events."""
        self.closing = True
        if self.running and not self.done:
            self.agent.interrupt_threadsafe(None)  # on the loop's thread: a direct call
        self.events.clear()
        self.end()

    async def wait(self) -> None:
        """Wait until an event is queued or the feed has ended."""
        while not self.events and not self.ended:
            waiter = self.waiter
            if waiter is None:
                waiter = self.waiter = anyio.Event()
            await waiter.wait()

    def take_error(self) -> Exception | None:
        error, self.error = self.error, None
        return error


class EventStream(Generic[OutputT]):
    """Async iterator (and async context manager) over one reply's events.

    ``OutputT`` is the type of ``result.output``: the ``output_type`` model given to
    ``agent.stream``, or ``str``.
    """

    def __init__(self, agent: EventSource, start: StartRun[OutputT]) -> None:
        self._agent = agent
        self._start = start
        self._feed: _Feed[OutputT] | None = None
        self._tg: TaskGroup | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = 0
        self._exited = False
        # The async library's own cancellation check, looked up when the stream opens:
        # anyio's module-level one detects the library on every call (through sniffio).
        self._if_cancelled: Callable[[], Awaitable[None]] = anyio.lowlevel.checkpoint_if_cancelled

    @property
    def reply(self) -> Msg | None:
        """The reply once it finished (None before, or when it failed)."""
        return self._feed.reply if self._feed is not None else None

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's typed result, once the reply has ended (as ``agent.run()`` returns it).

        Available after the events are read to the end or the ``async with`` block is left
        (an early exit interrupts the run: ``stop_reason == "interrupted"``).

        Raises:
            UsageError: before the run ended, when it failed (its error was raised to the
                consumer), or for a stream not started by ``agent.stream``.
        """
        feed = self._feed
        if feed is not None and feed.result is not None:
            return feed.result
        if feed is None or not feed.done:
            raise UsageError(
                "the stream's result is not ready: read the events to the end (or leave the "
                "'async with' block) first"
            )
        if feed.reply is not None:
            raise UsageError("this stream was started without a RunResult (use agent.stream)")
        raise UsageError("the run failed, so it has no result (its error was raised)")

    def _open(self) -> _Feed[OutputT]:
        if self._feed is not None:
            raise RuntimeError("an EventStream can be consumed only once")
        # Not ``_Feed[OutputT](...)``: calling the subscripted alias costs a typing layer
        # (and a failed ``__orig_class__`` write on the slotted class) per stream.
        feed: _Feed[OutputT] = _Feed(self._agent)
        self._feed = feed
        self._if_cancelled = anyio.lowlevel.current_token().backend_class.checkpoint_if_cancelled
        return feed

    async def __aenter__(self) -> EventStream[OutputT]:
        feed = self._open()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(feed.run, self._start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._exited or self._tg is None or self._feed is None:
            return
        self._exited = True
        self._feed.stop()
        # The body's own exception (if any) propagates as is, not wrapped in a group: the
        # runner never raises (it keeps the reply's error for the consumer).
        await self._tg.__aexit__(None, None, None)
        error = self._feed.take_error()
        if exc is None and error is not None:
            raise error

    def __aiter__(self) -> EventStream[OutputT]:
        return self

    def _detach(self) -> _Feed[OutputT]:
        import asyncio

        feed = self._open()
        self._thread = threading.get_ident()
        self._task = asyncio.get_running_loop().create_task(feed.run(self._start))
        _DETACHED.add(self._task)
        self._task.add_done_callback(_DETACHED.discard)
        return feed

    async def __anext__(self) -> AgentEvent:
        feed = self._feed
        if feed is None:
            feed = self._detach()
        # A reply emits its events in bursts (one network chunk's deltas at once): a queued
        # event is handed over without a trip through the event loop (nor a coroutine of its
        # own). A cancellation lands here first, whether events are queued or not: a wait
        # that a new event (or the end of the interrupted reply) wakes in the same loop pass
        # would not deliver it.
        await self._if_cancelled()
        events = feed.events
        if not events and not feed.ended:
            await feed.wait()
        if events:
            return events.popleft()
        if self._task is not None:
            await self._task
        error = feed.take_error()
        if error is not None:
            raise error from None
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop early: interrupt the reply (if running) and wait until it is finalized."""
        if self._tg is not None:
            await self.__aexit__(None, None, None)
        elif self._task is not None and self._feed is not None:
            self._feed.stop()
            await self._task

    def __del__(self) -> None:
        task, feed = self._task, self._feed
        alive = task is not None and feed is not None and not task.done()
        if alive and feed is not None and threading.get_ident() == self._thread:
            feed.stop()

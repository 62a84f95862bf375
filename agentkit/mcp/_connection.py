"""One live connection to an MCP server, owned by one dedicated runner task.

Why a dedicated task: the SDK's transports and ``ClientSession`` are built from anyio task
groups and cancel scopes, which must be entered and exited by the same task. If ``connect()``
entered them in the caller's task, ``close()`` from another task (an agent shutting down, a
signal handler, a web request) would fail with "exit cancel scope in a different task". So the
runner task enters the transport + ``mcp.Client``, publishes the session, waits for a stop
event and unwinds everything itself. Requests are sent from any task through the session
(the SDK correlates them by id). Work that must outlive its caller's stack frame (streamed
tool calls, change listeners) is spawned into the runner's task group, so it is cancelled
when the connection goes away.

The runner is an asyncio task (anyio offers no detached tasks); agentkit is asyncio-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.abc

from agentkit.exceptions import MCPConnectionError
from agentkit.mcp._config import ServerConfig, StdioServer, open_transport, resolve_command

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client._transport import TransportStreams

__all__ = ["Connection"]


@asynccontextmanager
async def _transport(
    server: ServerConfig, errlog: TextIO | None, conn: Connection
) -> AsyncIterator[TransportStreams]:
    async with AsyncExitStack() as stack:
        yield await open_transport(
            stack,
            server,
            errlog,
            max_message_bytes=conn.max_message_bytes,
            on_broken=conn.mark_broken,
            on_session_lost=conn.mark_session_lost,
        )


async def _pump_stderr(fd: int, logger: logging.Logger, tail: deque[str]) -> None:
    """Forward a child's stderr lines to ``logger`` (DEBUG) until EOF or cancellation.

    The last lines are also kept in ``tail``: when a server dies at startup, they usually
    say why (a missing key, a bad argument), and the connection error quotes them.
    """
    buffer = b""

    def emit(raw: bytes) -> None:
        line = raw.decode(errors="replace").rstrip("\r")
        logger.debug("stderr: %s", line)
        if line.strip():
            tail.append(line)

    try:
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                break
            lines = (buffer + data).split(b"\n")
            buffer = lines.pop()
            for line in lines:
                emit(line)
    finally:
        # Cancelled because the connection ended: what the child wrote just before it exited
        # may still sit in the pipe. Take it without blocking.
        with contextlib.suppress(OSError):  # BlockingIOError: nothing left
            for _ in range(16):  # bounded: a child still writing must not keep us here
                if not (data := os.read(fd, 65536)):
                    break
                buffer += data
        for line in buffer.split(b"\n"):
            if line:
                emit(line)


def _leaf(exc: BaseException | None) -> BaseException | None:
    """The first real error inside nested task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Connection:
    """A connection's lifecycle: start, health, spawn work into it, stop.

    Args:
        name: Client name (for logs and errors).
        server: How to reach the server.
        make_client: Builds the ``mcp.Client`` around a transport, for this connection.
        on_ready: Called in the runner once the session is up (starts listeners).
        logger: The client's logger.
    """

    def __init__(
        self,
        name: str,
        server: ServerConfig,
        make_client: Callable[[Any, Connection], Client],
        on_ready: Callable[[Connection], Awaitable[None]],
        logger: logging.Logger,
    ) -> None:
        self.name = name
        self.server = server
        self._make_client = make_client
        self._on_ready = on_ready
        self._logger = logger
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.stderr_tail: deque[str] = deque(maxlen=8)  # last stderr lines of a stdio child
        self.stdout_garbage: list[str] = []  # first non-JSON-RPC stdout lines, for errors
        self.broken = False
        self.broken_reason: str | None = None  # what broke the stream, for error messages
        self.session_lost = False  # the server answered 404 for our session id
        self.max_message_bytes: int | None = None  # stdio message cap (None: the default)
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._tg: anyio.abc.TaskGroup | None = None
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self, deadline: float | None) -> None:
        """Start the runner task and wait until the session is up.

        Raises:
            MCPConnectionError: the server could not be started/reached in time, or a
                stdio command cannot be found (one line: command, PATH searched, fix).
        """
        if isinstance(self.server, StdioServer):
            try:
                resolve_command(self.server)
            except FileNotFoundError as exc:
                raise MCPConnectionError(str(exc)) from None
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"agentkit-mcp-{self.name}"
        )
        try:
            with anyio.fail_after(deadline):
                async with anyio.create_task_group() as tg:

                    async def first(event: anyio.Event) -> None:
                        await event.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(first, self._ready)
                    tg.start_soon(first, self._done)
        except TimeoutError:
            await self.stop(grace=0)
            raise MCPConnectionError(
                f"MCP server {self.name!r} did not start within {deadline}s{self._details()}"
            ) from None
        except BaseException:
            await self.stop(grace=0)  # the caller was cancelled: do not leave the child behind
            raise
        if not self._ready.is_set() or self.client is None:
            raise MCPConnectionError(
                f"cannot connect to MCP server {self.name!r}: {self._cause()}{self._details()}"
            ) from self.error

    def _cause(self) -> str:
        from mcp import MCPError as SDKError
        from mcp_types import CONNECTION_CLOSED

        cause = _leaf(self.error)
        if isinstance(cause, SDKError) and cause.code == CONNECTION_CLOSED:
            if isinstance(self.server, StdioServer):
                return "the server process exited (or closed its stdout) during the handshake"
            return "the server closed the connection during the handshake"
        return repr(cause)

    def _details(self) -> str:
        """What the server printed that explains a failed start (stdout garbage, stderr)."""
        text = ""
        if self.stdout_garbage:
            shown = "; ".join(repr(line) for line in self.stdout_garbage)
            text += (
                f"\nIt wrote output that is not JSON-RPC to stdout: {shown} "
                "(an MCP stdio server must write only protocol messages to stdout)"
            )
        if self.stderr_tail:
            lines = "\n  ".join(self.stderr_tail)
            text += f"\nLast lines of its stderr:\n  {lines}"
        return text

    def note_transport_error(self, exc: Exception) -> None:
        """Record a transport fault (an unparseable stdout line) for the error message."""
        from pydantic import ValidationError

        if len(self.stdout_garbage) >= 3:
            return
        text = str(exc)
        if isinstance(exc, ValidationError) and exc.errors():
            value = exc.errors()[0].get("input")  # the offending line (or its parsed JSON)
            text = value if isinstance(value, str) else json.dumps(value, default=str)
        self.stdout_garbage.append(text if len(text) <= 200 else text[:200] + "...")

    def mark_broken(self, reason: str) -> None:
        """The transport can no longer be trusted: fail fast, reconnect on the next call."""
        self.broken = True
        self.broken_reason = reason

    def mark_session_lost(self, reason: str) -> None:
        """The HTTP server forgot our session (404): the request was never run."""
        self.session_lost = True
        self.mark_broken(reason)

    async def stop(self, grace: float = 5.0) -> None:
        """Ask the runner to unwind, wait (bounded), then cancel it. Never raises, never hangs."""
        self._stop.set()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(grace):
                await self._done.wait()
            if not self._done.is_set():
                # Handshake still in progress, or a transport slow to close: cancel it. The
                # SDK's stdio shutdown (stdin close, SIGTERM, SIGKILL) is shielded and bounded.
                self._scope.cancel()
                with anyio.move_on_after(10):
                    await self._done.wait()
            if not self._done.is_set() and self._task is not None:
                self._task.cancel()

    @property
    def healthy(self) -> bool:
        """Whether requests can be sent on this connection."""
        if self.broken or self._done.is_set() or not self._ready.is_set() or self.client is None:
            return False
        try:
            session = self.client.session
        except RuntimeError:  # the SDK client already left its context
            return False
        dispatcher = getattr(session, "_dispatcher", None)
        # The SDK marks its dispatcher closed when the transport reached EOF (child exited).
        return not getattr(dispatcher, "_closed", False)

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, Any]]) -> bool:
        """Run ``fn`` in the runner's task group; False when the connection is going away."""
        tg = self._tg
        if tg is None or self._stop.is_set() or self._done.is_set():
            return False
        try:
            tg.start_soon(fn)
        except RuntimeError:  # the task group is closing
            return False
        return True

    # -- runner ------------------------------------------------------------------------
    def _stderr_sink(self, stack: contextlib.ExitStack) -> tuple[TextIO | None, int | None]:
        """The file a stdio child writes its stderr to, and the fd to pump (if logging)."""
        if not isinstance(self.server, StdioServer):
            return None, None
        target = self.server.stderr
        if target == "devnull":
            return stack.enter_context(open(os.devnull, "w")), None
        if target == "log":
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            stack.callback(os.close, read_fd)
            return stack.enter_context(os.fdopen(write_fd, "w")), read_fd
        return target, None

    async def _run(self) -> None:
        try:
            with self._scope, contextlib.ExitStack() as files:
                errlog, pump_fd = self._stderr_sink(files)
                async with anyio.create_task_group() as outer:
                    if pump_fd is not None:
                        outer.start_soon(_pump_stderr, pump_fd, self._logger, self.stderr_tail)
                    try:
                        await self._serve(errlog)
                    finally:
                        outer.cancel_scope.cancel()
        except Exception as exc:
            self.error = exc
            self._logger.debug("MCP connection %r ended with %r", self.name, exc)
        finally:
            self.broken = True
            self._tg = None
            self._done.set()

    async def _serve(self, errlog: TextIO | None) -> None:
        async with self._make_client(_transport(self.server, errlog, self), self) as client:
            if isinstance(self.server, StdioServer) and self.server.stderr == "log" and errlog:
                errlog.close()  # the child holds its own copy; EOF then means it exited
            async with anyio.create_task_group() as tg:
                self.client = client
                self._tg = tg
                await self._on_ready(self)
                self._ready.set()
                await self._stop.wait()
                self._tg = None
                tg.cancel_scope.cancel()

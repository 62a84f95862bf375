"""agentkit's stdio *server* transport: cancellable, and it answers what it cannot parse.

Why not the SDK's ``stdio_server``: it reads stdin in a worker thread, and a thread blocked in
``readline()`` cannot be cancelled, so Ctrl-C or SIGTERM did nothing until the client closed
stdin; and a line that is not JSON-RPC was dropped silently, leaving the client waiting.
Here stdin is read without threads (the event loop waits for it to become readable), so
cancellation is immediate; a line that is not JSON gets ``-32700 Parse error`` and a JSON
value that is not a JSON-RPC message gets ``-32600 Invalid Request``, as JSON-RPC 2.0 says.
Whatever one line holds, it is answered and the next one is read:

- nesting deeper than ``agentkit._text.MAX_JSON_DEPTH`` (100 levels) is refused: a 100 KB
  line of brackets exhausted the parser's recursion and ended the server (and the SDK's
  own parser stops at about 250 levels, so what got past the first parse still ended it);
- an ``id`` that is not a string or an integer (an object, ``null``, ``true``, ``1.5``) is an
  invalid request answered with ``id: null``; the SDK's model would have taken the message
  for a notification and answered nothing.

Like the SDK, fd 0 and fd 1 are diverted while serving (to ``/dev/null`` and stderr) so that
tool code and child processes can neither read the protocol stream nor write into it.
POSIX only; Windows keeps the SDK transport.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from agentkit._text import MAX_JSON_DEPTH, too_deep
from agentkit.mcp._stdio import Overflow, split_lines

__all__ = ["parse_message", "stdio_server"]

_MAX_REQUEST_BYTES = 64 * 1024 * 1024


def _bad_id(message: object) -> bool:
    """Whether ``message`` has an ``id`` that is not a string or an integer.

    MCP ids are never null, a bool or a fraction; JSON-RPC allows null only on an error
    response whose request could not be read (such as the ones sent here): accepting those
    keeps two peers from answering each other's errors forever.
    """
    if not isinstance(message, dict) or "id" not in message:
        return False
    rid = message["id"]
    if rid is None:
        return "method" in message or "error" not in message
    return not (isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)))


def parse_message(line: bytes | Overflow) -> tuple[Any, dict[str, object] | None]:
    """``(message, None)`` for a valid JSON-RPC line, else ``(None, the error to answer)``."""
    from mcp_types import jsonrpc_message_adapter

    if isinstance(line, Overflow):
        return None, _error(None, -32600, f"Invalid Request: message over {len(line.head)} bytes")
    deep = _error(None, -32600, f"Invalid Request: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        # The parser's own recursion is bounded (RecursionError, the interpreter's limit);
        # MAX_JSON_DEPTH, far below it, is checked on what it built.
        value = json.loads(line)
    except RecursionError:
        return None, deep
    except ValueError as exc:
        return None, _error(None, -32700, f"Parse error: {exc}")
    if line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH and too_deep(value):
        return None, deep
    if _bad_id(value):
        return None, _error(None, -32600, "Invalid Request: id must be a string or an integer")
    try:
        message = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except (ValueError, RecursionError):
        rid = value.get("id") if isinstance(value, dict) else None
        return None, _error(rid, -32600, "Invalid Request: not a JSON-RPC 2.0 message")
    return message, None


def _error(rid: object, code: int, message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


@contextlib.contextmanager
def _claimed_std_fds() -> Iterator[tuple[int, int]]:
    """Private copies of fd 0/1 for the protocol; 0 -> /dev/null, 1 -> stderr meanwhile."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        # O_NONBLOCK lives on the shared open file (a terminal, the parent's pipe): put it
        # back, or the shell that started us would get EAGAIN on its own reads.
        for fd in (wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        os.close(null)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.close(fd)


async def _read_chunks(fd: int) -> AsyncIterator[bytes]:
    """Chunks from ``fd`` until EOF, without a thread (cancellable at any point)."""
    if stat.S_ISREG(os.fstat(fd).st_mode):  # a file redirect: never blocks, epoll refuses it
        while data := await anyio.to_thread.run_sync(os.read, fd, 65536):
            yield data
        return
    os.set_blocking(fd, False)
    while True:
        await anyio.wait_readable(fd)
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not data:
            return
        yield data


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            await anyio.wait_writable(fd)
            continue
        view = view[sent:]


@asynccontextmanager
async def stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """Serve over this process's stdin/stdout; yields the SDK's ``(read, write)`` streams."""
    from mcp.shared.message import SessionMessage

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    out_lock = anyio.Lock()

    with _claimed_std_fds() as (wire_in, wire_out):
        if not stat.S_ISREG(os.fstat(wire_out).st_mode):
            os.set_blocking(wire_out, False)

        async def send_line(payload: bytes) -> None:
            async with out_lock:  # one message per line, never interleaved
                await _write_all(wire_out, payload + b"\n")

        async def reader() -> None:
            feed = split_lines(_MAX_REQUEST_BYTES)
            async with read_writer:
                async for chunk in _read_chunks(wire_in):
                    for line in feed(chunk):
                        message, reply = parse_message(line)
                        if reply is not None:
                            await send_line(json.dumps(reply).encode())
                            continue
                        await read_writer.send(SessionMessage(message))

        async def writer() -> None:
            async with write_reader:
                async for item in write_reader:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await send_line(data.encode())

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_stream, write_stream
            finally:
                tg.cancel_scope.cancel()

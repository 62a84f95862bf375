"""agentkit's own stdio client transport: bounded, linear, and loud about a broken stream.

Why not the SDK's ``stdio_client``: it decodes stdout as a text stream, so one invalid UTF-8
byte kills its reader task while the session still looks connected (every later call then
waits out its full timeout), and it joins chunks with ``buffer + chunk`` until a newline,
which is quadratic in the line length (a 50 MB answer took ~13 s) and unbounded in memory.

Here stdout is read as bytes into one ``bytearray`` (linear), a message longer than
``max_message_bytes`` is cut *while it is read* (only its head is kept; a tool result becomes a
truncated result with a note), and a line that is not valid UTF-8 ends the connection at once
with a reason (pending requests fail now; the client reconnects on the next call).

The process lifecycle follows the spec (close stdin, wait, SIGTERM the process group, SIGKILL),
with the SDK's POSIX process-tree helper. POSIX only: Windows keeps the SDK transport.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

import anyio
import anyio.abc
import anyio.to_thread

from agentkit.mcp._reap import marker_env, reap, server_tree

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "Overflow", "split_lines", "stdio_transport"]

logger = logging.getLogger("agentkit.mcp.stdio")

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_EXIT_GRACE = 2.0  # seconds a server gets to exit after its stdin closes (spec: "wait")
_KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of the process group
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')


@dataclass(frozen=True, slots=True)
class Overflow:
    """A message longer than the limit: its first bytes and its full size."""

    head: bytes
    size: int


def split_lines(max_bytes: int) -> Callable[[bytes], list[bytes | Overflow]]:
    """A stateful splitter: feed it chunks, get complete lines (or overflows) back.

    Linear in the input: each byte is searched once and stored at most once; a line over
    ``max_bytes`` keeps only its first ``max_bytes`` bytes while the rest is counted.
    """
    buf = bytearray()
    state = {"skipped": -1}  # -1: collecting; >= 0: bytes dropped from an overlong line

    def feed(chunk: bytes) -> list[bytes | Overflow]:
        out: list[bytes | Overflow] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if state["skipped"] >= 0:
                state["skipped"] += len(piece)
            else:
                room = max_bytes - len(buf)
                buf.extend(piece[:room])
                if len(piece) > room:
                    state["skipped"] = len(piece) - room
            if end < 0:
                return out
            if state["skipped"] >= 0:
                out.append(Overflow(bytes(buf), len(buf) + state["skipped"]))
                state["skipped"] = -1
            elif buf.strip():
                out.append(bytes(buf))
            buf.clear()
            start = end + 1

    return feed


def _text_prefix(head: bytes) -> str:
    """The readable start of the first ``"text"`` string in a cut JSON message."""
    at = head.find(b'"text"')
    colon = head.find(b'"', head.find(b":", at) + 1) if at >= 0 else -1
    if colon < 0:
        return head[:2000].decode(errors="replace")
    raw = head[colon + 1 :].decode(errors="ignore")
    for cut in range(min(8, len(raw)) + 1):  # drop a half escape sequence at the cut
        candidate = raw[: len(raw) - cut] if cut else raw
        end = candidate.find('"')
        candidate = candidate[:end] if end >= 0 else candidate
        with suppress(ValueError):
            return str(json.loads(f'"{candidate}"'))
    return raw


def truncated_response(item: Overflow, limit: int) -> dict[str, object] | None:
    """A JSON-RPC result standing in for an overlong one, or None without a findable id."""
    match = _ID.search(item.head[:4096])
    result_at = item.head.find(b'"result"')
    if match is None or (0 <= result_at < match.start()):
        return None
    note = (
        f"\n[truncated by agentkit: the server's answer was {item.size:,} bytes, over the "
        f"{limit:,}-byte limit (MCPClient(max_result_bytes=...)); only its start is shown]"
    )
    text = _text_prefix(item.head)
    meta = {"agentkit/truncated": {"size": item.size, "limit": limit}}
    result = {"content": [{"type": "text", "text": text + note}], "_meta": meta}
    return {"jsonrpc": "2.0", "id": json.loads(match.group(1)), "result": result}


def _decode_error(line: bytes, exc: UnicodeDecodeError) -> str:
    byte = line[exc.start : exc.start + 1].hex()
    return (
        f"the server wrote invalid UTF-8 to stdout (byte 0x{byte} at offset {exc.start} of "
        f"a {len(line)}-byte message); the stream cannot be trusted, so the connection was "
        "closed"
    )


async def _exited(process: anyio.abc.Process, within: float) -> bool:
    """Whether the process exits within ``within`` seconds.

    Polls ``returncode``: ``wait()`` also waits for pipe EOF, which a grandchild holding
    the pipe would delay.
    """
    with anyio.move_on_after(within):
        while process.returncode is None:  # noqa: ASYNC110 - no exit event to wait on
            await anyio.sleep(0.01)
    return process.returncode is not None


async def _stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, give the server a grace period, then end its whole process group."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    if not await _exited(process, _EXIT_GRACE):
        await terminate_posix_process_tree(process, _KILL_GRACE)
        await _exited(process, _KILL_GRACE)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdout is not None:
            await process.stdout.aclose()
    await process.aclose()


class _Pump:
    """Moves messages between the child's pipes and the session's stream pair.

    ``reader`` parses the child's stdout into messages for the session; ``writer`` sends
    the session's messages to the child's stdin. Each ends the session's read stream when
    its pipe breaks, so the session sees the end instead of hanging.
    """

    def __init__(
        self,
        process: anyio.abc.Process,
        name: str,
        max_message_bytes: int,
        on_broken: Callable[[str], None],
    ) -> None:
        from mcp.shared.message import SessionMessage

        self.process = process
        self.name = name
        self.max_message_bytes = max_message_bytes
        self.on_broken = on_broken
        self.read_writer, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.write_stream, self.write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def deliver(self, line: bytes | Overflow) -> bool:
        """Send one message to the session; False when the stream must end."""
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        if isinstance(line, Overflow):
            stand_in = truncated_response(line, self.max_message_bytes)
            if stand_in is None:
                await self.read_writer.send(ValueError(f"dropped a {line.size:,}-byte message"))
                return True
            line = json.dumps(stand_in).encode()
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = _decode_error(line, exc)
            logger.warning("MCP stdio server %s: %s", self.name, reason)
            self.on_broken(reason)
            return False
        try:
            message: SessionMessage | Exception = SessionMessage(
                jsonrpc_message_adapter.validate_json(text, by_name=False)
            )
        except ValueError as exc:  # not JSON-RPC: the session logs it and goes on
            message = exc
        await self.read_writer.send(message)
        return True

    async def reader(self) -> None:
        """Child's stdout -> session, line by line (bounded by ``max_message_bytes``)."""
        assert self.process.stdout is not None
        feed = split_lines(self.max_message_bytes)
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with self.read_writer:
                async for chunk in self.process.stdout:
                    for line in feed(chunk):
                        if not await self.deliver(line):
                            return

    async def writer(self) -> None:
        """Session -> child's stdin, one JSON line per message."""
        assert self.process.stdin is not None
        try:
            async with self.write_reader:
                async for item in self.write_reader:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self.process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await self.read_writer.aclose()  # the session must see the end, not hang


@asynccontextmanager
async def stdio_transport(
    argv: list[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    errlog: TextIO,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    on_broken: Callable[[str], None] = lambda reason: None,
) -> AsyncIterator[TransportStreams]:
    """Spawn ``argv`` and yield the ``(read, write)`` stream pair the SDK session expects.

    Args:
        argv: The resolved command and its arguments.
        env: Extra environment variables (over the SDK's minimal safe set).
        cwd: Working directory of the child.
        errlog: Where the child's stderr goes.
        max_message_bytes: Longest message kept; longer tool results are truncated.
        on_broken: Called with a reason when the stream breaks (invalid UTF-8).
    """
    from mcp.client.stdio import get_default_environment

    child_env = get_default_environment() | dict(env or {}) | marker_env()
    process = await anyio.open_process(
        argv,
        env=child_env,
        stderr=errlog,
        cwd=cwd,
        start_new_session=True,  # one process group: the whole tree is stopped together
    )
    pump = _Pump(process, argv[0], max_message_bytes, on_broken)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pump.reader)
        tg.start_soon(pump.writer)
        try:
            yield pump.read_stream, pump.write_stream
        finally:
            with anyio.CancelScope(shield=True):
                pump.read_stream.close()
                pump.write_stream.close()
                # Taken before the server stops (its children are orphans afterwards).
                leftovers = await anyio.to_thread.run_sync(server_tree, process.pid, child_env)
                await _stop_process(process)
                await reap(leftovers, _KILL_GRACE)  # detached descendants too (Linux)
            tg.cancel_scope.cancel()

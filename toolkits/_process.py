"""Run a child process with a timeout and an output cap, and leave nothing running behind.

The command runs under a small supervisor process (:mod:`toolkits._supervisor`) started in a
new session (its own process group). On Linux the supervisor is a child subreaper: the
descendants that leave the group (``set -m`` jobs, ``setsid``, daemons) are adopted by it, not
by init, and it kills them all when the command exits, when it is told to stop (timeout,
cancellation by an agent interrupt) or when this process dies (``PR_SET_PDEATHSIG``). The
process group is killed as well, as a last resort. The start itself is shielded from
cancellation: an interrupt that arrives while the process is being created lands only once
this function holds it, so its cleanup always runs.

The child's stdin is ``/dev/null``: when a toolkit is served over MCP stdio, our stdin is the
protocol stream and must never reach a child.
"""

from __future__ import annotations

import codecs
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from toolkits._common import decode_text

__all__ = ["ProcessResult", "run_capped"]

# After the command itself exits, how long to wait for output still buffered in the pipe
# (or held open by a background job) before the group is killed.
_DRAIN_GRACE_S = 0.5
# How long the supervisor gets to kill the command's descendants before its group is killed.
_STOP_GRACE_S = 3.0
_SUPERVISOR = str(Path(__file__).with_name("_supervisor.py"))


@dataclass(slots=True)
class ProcessResult:
    """What a finished (or killed) command produced.

    Attributes:
        output: Combined stdout and stderr, decoded with replacement characters.
        returncode: Exit status; negative for "killed by signal N"; None if unknown.
        timed_out: The timeout expired and the process group was killed.
        dropped_bytes: Output bytes left out (the middle of the output) to respect the cap.
    """

    output: str
    returncode: int | None
    timed_out: bool
    dropped_bytes: int

    def describe(self, timeout_s: float) -> str:
        """The output followed by a one-line status the model can act on."""
        if self.timed_out:
            status = f"[timed out after {timeout_s:g} s; the command and its children were killed]"
        elif self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = str(-self.returncode)
            status = f"[killed by signal {name}]"
        else:
            status = f"[exit code: {self.returncode}]"
        body = self.output if self.output else "(no output)"
        if not body.endswith("\n"):
            body += "\n"
        return body + status


class _CappedBuffer:
    """Keeps the first and the last bytes of a stream, counting what falls in between."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit * 2 // 3
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail += chunk
        excess = len(self._tail) - self._tail_limit
        if excess > 0:
            del self._tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        if not self.dropped:
            return decode_text(bytes(self._head + self._tail))
        return (
            f"{decode_text(bytes(self._head))}\n"
            f"[... {self.dropped} bytes of output truncated ...]\n"
            f"{decode_text(bytes(self._tail))}"
        )


async def run_capped(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None,
    timeout_s: float,
    max_output_bytes: int,
    on_output: Callable[[str], object] | None = None,
) -> ProcessResult:
    """Run ``argv`` and collect its combined output.

    Args:
        argv: Program and arguments (no shell involved).
        cwd: Working directory.
        env: Environment, or None to inherit ours.
        timeout_s: Seconds before the process group is killed.
        max_output_bytes: Output kept (head and tail); the rest is counted and dropped.
        on_output: Called with output text as it arrives (for live display), up to
            ``max_output_bytes`` of it; must not block.

    Returns:
        The result; a timeout is reported in it, not raised.

    Raises:
        OSError: The program could not be started (not found, not executable).
    """
    program = resolve_program(argv[0], cwd, env)
    buffer = _CappedBuffer(max_output_bytes)
    # Shielded: a cancellation between the fork and the assignment would orphan the process.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            [sys.executable, "-I", "-S", _SUPERVISOR, str(os.getpid()), program, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    try:
        with anyio.move_on_after(timeout_s) as scope:
            await _collect(process, buffer, _Streamer(on_output, max_output_bytes))
    finally:
        # Runs on timeout, on cancellation (interrupt) and on normal exit alike; shielded so
        # an interrupt cannot leave anything running.
        with anyio.CancelScope(shield=True):
            await _stop(process)
    return ProcessResult(
        output=buffer.text(),
        returncode=process.returncode,
        timed_out=scope.cancelled_caught,
        dropped_bytes=buffer.dropped,
    )


class _Streamer:
    """Forwards the first ``limit`` bytes of output as text, never splitting a character."""

    def __init__(self, callback: Callable[[str], object] | None, limit: int) -> None:
        self._callback = callback
        self._left = limit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> None:
        if self._callback is None or self._left <= 0:
            return
        text = self._decoder.decode(chunk[: self._left])
        self._left -= len(chunk)
        if text:
            self._callback(text)


async def _collect(process: anyio.abc.Process, buffer: _CappedBuffer, streamer: _Streamer) -> None:
    stdout = process.stdout
    assert stdout is not None  # opened with stdout=PIPE
    drained = anyio.Event()

    async def drain() -> None:
        async for chunk in stdout:
            buffer.add(chunk)
            streamer.feed(chunk)
        drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await process.wait()
        # A background job may hold the pipe open forever: give buffered output a moment.
        with anyio.move_on_after(_DRAIN_GRACE_S):
            await drained.wait()
        tg.cancel_scope.cancel()


def resolve_program(name: str, cwd: str, env: Mapping[str, str] | None) -> str:
    """The executable ``name`` means (as ``execvp`` would find it), or a clear OSError.

    Raises:
        FileNotFoundError: No such program.
        PermissionError: It exists but is not an executable file.
    """
    if "/" in name:
        path = os.path.join(cwd, name)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file", name)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, "not an executable file", name)
        return path
    search = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(name, path=search)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "command not found", name)
    return found


async def _stop(process: anyio.abc.Process) -> None:
    """Ask the supervisor to kill the command's descendants, then make sure of it."""
    if process.returncode is None:
        with suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(_STOP_GRACE_S):
            await process.wait()
    _kill_group(process.pid)
    await process.aclose()


def _kill_group(pgid: int) -> None:
    # start_new_session=True made the child a group leader: its pid is the group id. The
    # kernel does not reuse a pid while a group with that id still has members, so this
    # cannot hit an unrelated process.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)

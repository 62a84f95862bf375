"""Console plumbing for the CLI: non-blocking line input, SIGINT routing, event rendering."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel

from agentkit._console import console_input, prompt_toolkit_usable, read_line, sigint_handler
from agentkit._text import progress_counter, terminal_safe
from agentkit.events import (
    AgentEvent,
    ApprovalRequested,
    Interrupted,
    ReplyFinished,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)

__all__ = ["EventRenderer", "LineReader", "short", "sigint_handler", "terminal_restored"]

InputFn = Callable[[str], str]


def short(value: str, limit: int = 200) -> str:
    """``value`` on one line, cut to ``limit`` characters."""
    flat = " ".join(value.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class _Read:
    """One line being read by a daemon thread."""

    __slots__ = ("done", "error", "line")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.line: str | None = None
        self.error: Exception | None = None


class LineReader:
    """Reads lines in a daemon thread, so the event loop keeps running while the human types.

    A daemon thread (not anyio's worker pool) because a pending ``input()`` cannot be
    cancelled: when the program exits at the prompt, the thread must not keep it alive. A
    read abandoned by a cancelled caller (Ctrl-C at a y/N question) is not lost either: the
    next ``read`` takes its line, so two threads never compete for the terminal.

    Args:
        input_fn: The blocking line reader (by default :func:`agentkit._console.read_line`:
            plain reads that keep the terminal canonical, so a Ctrl-D typed ahead while an
            answer prints is read in order; GNU readline's ``input()`` loses it when it
            switches the terminal's mode. Capable terminals use prompt_toolkit instead).
        out: Where a prompt is written when an earlier read is still pending.
    """

    def __init__(self, input_fn: InputFn | None = None, out: TextIO | None = None) -> None:
        self._input: InputFn = input_fn or read_line
        # At a terminal, without a custom reader: prompt_toolkit's async prompt (no thread:
        # cancellable, history, multi-line paste; keys typed while a reply prints wait in
        # the terminal and are read by the next prompt).
        self._console = input_fn is None
        self._out = out
        self._pending: _Read | None = None

    def _start(self, prompt: str) -> _Read:
        job = _Read()
        token = anyio.lowlevel.current_token()

        def work() -> None:
            try:
                job.line = self._input(prompt)
            except EOFError:
                job.line = None
            except Exception as exc:  # handed to the event loop, re-raised there
                job.error = exc
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                anyio.from_thread.run_sync(job.done.set, token=token)

        threading.Thread(target=work, name="agentkit-input", daemon=True).start()
        return job

    async def read(self, prompt: str) -> str | None:
        """Read one line; None at end of input (Ctrl-D) or on Ctrl-C at a terminal prompt."""
        if self._console and self._pending is None and prompt_toolkit_usable():
            try:
                return await console_input(prompt)
            except (EOFError, KeyboardInterrupt):
                return None
        job = self._pending
        if job is None:
            job = self._pending = self._start(prompt)
        else:  # the abandoned read's prompt is gone from view: show this one
            out = self._out or sys.stdout
            out.write(prompt)
            out.flush()
        await job.done.wait()
        self._pending = None
        if job.error is not None:
            raise job.error
        if job.line is None and prompt:  # Ctrl-D: the terminal shows nothing, end the line
            out = self._out or sys.stdout
            out.write("\n")
            out.flush()
        return job.line


@contextlib.contextmanager
def terminal_restored() -> Iterator[Callable[[], None]]:
    """Restore the terminal's settings on exit; yields a function that restores them now.

    A line editor (``readline``) changes them while it reads; when the program leaves while
    a read is pending (Ctrl-C at the prompt), they would stay changed (no echo).
    """
    try:
        import termios

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (ImportError, OSError, ValueError):  # Windows, a closed or redirected stdin
        saved = None

    def restore() -> None:
        if saved is not None:
            with contextlib.suppress(OSError):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    try:
        yield restore
    finally:
        restore()


class EventRenderer:
    """Shows a reply's events: streamed text, tool calls with live progress, outcomes.

    Args:
        name: The agent's name, printed before its answer.
        out: Where to write (``sys.stdout`` by default).
    """

    def __init__(self, name: str, out: TextIO | None = None) -> None:
        self.name = name
        self.out = out or sys.stdout
        self._mode = ""
        self._line_start = True
        self._started: dict[str, tuple[str, float]] = {}

    def _write(self, text: str) -> None:
        self.out.write(terminal_safe(text))  # model and tool text may carry escape sequences
        if text:
            self._line_start = text.endswith("\n")
        self.out.flush()

    def line(self, text: str) -> None:
        """Write ``text`` on a line of its own."""
        self._mode = ""
        self._write(("" if self._line_start else "\n") + text + "\n")

    def __call__(self, event: AgentEvent) -> None:
        """Render one event."""
        if isinstance(event, TextDelta | ThinkingDelta):
            self._delta(event)
        elif isinstance(event, ToolCallStarted):
            call = event.tool_call
            self._started[call["id"]] = (call["name"], time.perf_counter())
            args = short(json.dumps(call["input"], ensure_ascii=False), 160)
            self.line(f"  -> {call['name']}({args}) running...")
        elif isinstance(event, ToolProgress):
            name = self._started.get(event.tool_call_id, ("tool", 0.0))[0]
            shown = event.chunk.get_text() or progress_counter(event.chunk.metadata)
            if shown:
                self.line(f"     {name}: {short(shown, 160)}")
        elif isinstance(event, ToolResult):
            self._result(event)
        elif isinstance(event, ApprovalRequested):
            names = ", ".join(c["name"] for c in event.calls)
            self.line(f"  [approval needed] {names}")
        elif isinstance(event, Interrupted):
            self.line("  [interrupted]")
        elif isinstance(event, ReplyFinished):
            if not self._line_start:
                self._write("\n")
            self._mode = ""

    def _delta(self, event: TextDelta | ThinkingDelta) -> None:
        mode = "text" if isinstance(event, TextDelta) else "thinking"
        if self._mode != mode:
            label = self.name if mode == "text" else f"{self.name} (thinking)"
            self._write(("" if self._line_start else "\n") + f"{label}: ")
            self._mode = mode
        self._write(event.delta)

    def _result(self, event: ToolResult) -> None:
        block = event.result
        name, started = self._started.pop(event.tool_call_id, (block["name"], None))
        took = f" {time.perf_counter() - started:.1f}s" if started is not None else ""
        output = block["output"]
        shown = output if isinstance(output, str) else f"[{len(output)} content blocks]"
        mark = "x" if block.get("is_error") else "ok"
        self.line(f"  <- {name} [{mark}{took}] {short(shown, 160)}")

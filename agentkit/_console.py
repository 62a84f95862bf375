"""Console helpers for your own terminal apps: cancellable input and Ctrl-C routing.

- :func:`console_input` reads one line with ``prompt_toolkit``'s async prompt when stdin
  and stdout are a (non-``dumb``) terminal: it runs on the event loop (no thread), so it
  can be cancelled (``agent.interrupt()`` on a ``UserAgent``, a cancel scope) and Ctrl-C
  at it exits at once; it has line editing, history (Up/Down), multi-line paste and Emacs
  key bindings. Elsewhere (a pipe, a file, ``TERM=dumb``) it reads plain lines in a daemon
  thread, which never keeps the process alive after the program ends.
- :func:`interrupt_on_sigint` routes Ctrl-C (SIGINT) to ``agent.interrupt()`` while a block
  runs, so Ctrl-C stops the agent's reply instead of killing the program::

      with interrupt_on_sigint(agent):
          reply = await agent("research the history of tea")  # Ctrl-C: interrupted reply
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

__all__ = [
    "console_input",
    "interrupt_on_sigint",
    "prompt_toolkit_usable",
    "read_line",
    "sigint_handler",
]


class _Interruptible(Protocol):
    async def interrupt(self, msg: Any = None) -> bool: ...


_session: Any = None  # one prompt_toolkit PromptSession per process: a shared history


def prompt_toolkit_usable() -> bool:
    """Whether stdin and stdout are a terminal that ``prompt_toolkit`` can drive.

    A ``dumb`` (or unset) ``TERM`` is left to plain line reading: prompt_toolkit's
    simplified mode for it ignores Ctrl-D.
    """
    if os.environ.get("TERM", "dumb") in ("dumb", "unknown", ""):
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio, or no loop at all
        return False
    return True


async def console_input(prompt: str = "") -> str:
    """Read one line from the console, cancellably.

    Raises:
        EOFError: at end of input (Ctrl-D).
        KeyboardInterrupt: on Ctrl-C at a terminal prompt.
    """
    if prompt_toolkit_usable() and _on_asyncio():
        return await _prompt_toolkit(prompt)
    return await _thread_input(prompt)


async def _prompt_toolkit(prompt: str) -> str:
    global _session
    if _session is None:
        from prompt_toolkit import PromptSession

        _session = PromptSession()
    # Bracketed paste keeps a pasted multi-line text in one answer; Enter submits. Ctrl-C
    # is a key in the prompt's raw mode (it raises KeyboardInterrupt); handle_sigint=False
    # leaves the process's SIGINT handling alone: prompt_toolkit would otherwise remove a
    # handler installed by the app (``interrupt_on_sigint``) when the prompt ends.
    text: str = await _session.prompt_async(prompt, handle_sigint=False)
    return text


def read_line(prompt: str = "") -> str:
    """One line from stdin, like ``input()`` but never through GNU readline.

    readline switches a terminal out of canonical mode while it reads and back after; a
    Ctrl-D typed ahead while the terminal was canonical (the answer still printing) is lost
    in that switch. Plain reads keep the terminal canonical, so typed-ahead lines and
    end-of-input arrive in order.
    """
    if prompt:
        sys.stdout.write(prompt)
        sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line[:-1] if line.endswith("\n") else line


async def _thread_input(prompt: str) -> str:
    """``input()`` in a daemon thread: an abandoned read never blocks the process's exit."""
    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    result: list[Any] = []

    def work() -> None:
        try:
            result.append(read_line(prompt))
        except BaseException as exc:  # EOFError, KeyboardInterrupt: re-raised in the loop
            result.append(exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name="agentkit-console-input", daemon=True).start()
    await done.wait()
    if isinstance(result[0], BaseException):
        if isinstance(result[0], EOFError) and prompt:
            print(flush=True)  # Ctrl-D shows nothing: end the prompt's line
        raise result[0]
    return str(result[0])


@contextlib.contextmanager
def sigint_handler(callback: Callable[[], None]) -> Iterator[None]:
    """Route SIGINT (Ctrl-C) to ``callback`` in the event loop while the block runs.

    Uses ``loop.add_signal_handler`` (the callback runs in the loop, between tasks); where
    that is unavailable it falls back to ``signal.signal`` with a thread-safe hand-off, and
    off the main thread it routes nothing. The previous handling is restored on exit.
    """
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, callback)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        previous = signal.getsignal(signal.SIGINT)
        try:
            signal.signal(signal.SIGINT, lambda *_: loop.call_soon_threadsafe(callback))
        except ValueError:  # not the main thread: Ctrl-C cannot be routed at all
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


@contextlib.contextmanager
def interrupt_on_sigint(agent: _Interruptible) -> Iterator[None]:
    """Make Ctrl-C call ``agent.interrupt()`` while the block runs (asyncio only).

    The reply in progress returns an interrupted message (its memory stays valid) and the
    program goes on; outside the block Ctrl-C raises ``KeyboardInterrupt`` as usual. Works
    with a ``ReActAgent``, a ``UserAgent`` or anything with an async ``interrupt()``.
    """
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[bool]] = set()

    def interrupt() -> None:
        task = loop.create_task(agent.interrupt())
        tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(tasks.discard)

    with sigint_handler(interrupt):
        yield

"""A tiny supervisor that runs one command and leaves no descendant of it behind.

Run as a script (``python -I -S _supervisor.py PARENT_PID PATH ARGV0 ARGS...``), not imported
by the toolkits. Killing a command's process group misses the processes that left the group
(``set -m`` jobs, ``setsid``, daemons): once their parent dies they are adopted by init and
live on. On Linux this process marks itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``),
so every orphan among the command's descendants is adopted by it instead, and asks for
SIGTERM when its own parent dies (``PR_SET_PDEATHSIG``), so even a killed agent leaves
nothing running. When the command exits, or on SIGTERM/SIGINT/SIGHUP, it kills every
descendant it has (looping until none is left) and exits with the command's status.

Not reaped: a descendant that is not a descendant any more by the time of the cleanup, i.e.
one that escaped into a different PID namespace or was adopted elsewhere. Outside Linux there
is no subreaper: descendants that left the process group are not found.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_MAX_ROUNDS = 1000  # a fork bomb cannot keep the cleanup going forever


class _Stop(Exception):
    """Raised from the signal handler to leave the wait loop."""


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children() -> list[int]:
    """Our direct children (adopted orphans included)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        pass
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat") as fh:
                    # The name field may contain spaces and ')': parse after the last ')'.
                    fields = fh.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me:
                    found.append(int(entry))
    return found


def _kill_all() -> None:
    """Kill and reap every descendant: orphans of killed children are adopted by us next."""
    for _ in range(_MAX_ROUNDS):
        children = _children()
        if not children:
            break
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(signum)


def _exit_like(status: int) -> None:
    """Exit with the command's status: its code, or death by the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of ours
        with contextlib.suppress(ValueError, OSError):  # SIGKILL/SIGSTOP have no handler
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main() -> None:
    """Run the command; clean up its descendants; exit as it did."""
    parent, program, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    status = (128 + signal.SIGTERM) << 8  # as "exited with 143" if stopped before the command
    try:
        if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
            raise _Stop(signal.SIGTERM)
        command = _spawn(program, argv)
        while True:
            pid, wstatus = os.waitpid(-1, 0)
            if pid == command:
                status = wstatus
                break
    except _Stop:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        _kill_all()
    _exit_like(status)


def _spawn(program: str, argv: list[str]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            os.execv(program, argv)
        except BaseException as exc:
            os.write(1, f"cannot run {program!r}: {exc}\n".encode(errors="replace"))
        finally:
            os._exit(127)
    return pid


if __name__ == "__main__":
    main()

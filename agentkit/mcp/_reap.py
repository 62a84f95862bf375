"""Reap what an MCP stdio server leaves behind, detached descendants included (Linux).

Stopping a stdio server ends its process group, but a descendant that moved to a session or
process group of its own (``setsid``, ``setpgid``, ``set -m`` jobs, a double-forked daemon)
is not in that group, and once its parent has exited it is re-parented to init: nothing
links it to the server any more. So the server is started with a marker in its environment
(:data:`MARKER_VAR`, a value unique to that connection), which every descendant inherits,
and ``close()`` then finds, through ``/proc``:

* every process whose parent chain leads to the server (taken *before* the server is
  stopped, while the chain still exists), and
* every process of this user whose environment still carries the connection's marker (the
  double-forked daemon whose parent is long gone),

and ends them: SIGTERM, a grace period, SIGKILL. A process is identified by its pid *and*
its start time, so a pid reused meanwhile by an unrelated process is never signalled.

Not reaped (documented in docs/mcp.md): a descendant that both left the parent chain before
``close()`` and removed the marker from its environment (or ran a set-uid program, whose
environment is unreadable), and anything on a platform without ``/proc`` (macOS, Windows),
where only the server's process group is stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping

import anyio

from agentkit._ids import new_id

__all__ = ["MARKER_VAR", "Tree", "marker_env", "reap", "server_tree"]

MARKER_VAR = "AGENTKIT_MCP_SERVER_ID"
"""The environment variable that marks a stdio server and its descendants."""

_PROC = "/proc"
_POLL = 0.02

Tree = dict[int, int]
"""Processes to reap: pid -> start time (clock ticks since boot, from ``/proc/<pid>/stat``)."""


def marker_env() -> dict[str, str]:
    """The environment entry that marks one server and its descendants (unique value)."""
    return {MARKER_VAR: new_id()}


def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, start time)`` of ``pid``, or None when it does not exist."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:  # no /proc: nothing can be found this way
        return []


def _marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False


def server_tree(pid: int, env: Mapping[str, str]) -> Tree:
    """The server's live descendants (by parent chain) and every process with its marker.

    Call it before the server is stopped: afterwards its children are orphans.

    Args:
        pid: The server process (not included in the result).
        env: The environment the server was started with (its marker).
    """
    marker = env.get(MARKER_VAR)
    needle = f"{MARKER_VAR}={marker}".encode() if marker else None
    table: dict[int, tuple[str, int, int]] = {}
    for candidate in _pids():
        stat = _stat(candidate)
        if stat is not None:
            table[candidate] = stat
    children: dict[int, list[int]] = {}
    for candidate, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(candidate)
    tree: Tree = {}
    stack = list(children.get(pid, []))
    while stack:
        current = stack.pop()
        if current not in tree:
            tree[current] = table[current][2]
            stack.extend(children.get(current, []))
    if needle is not None:
        me = os.getpid()
        for candidate, (_, _, started) in table.items():
            if candidate not in tree and candidate not in (pid, me) and _marked(candidate, needle):
                tree[candidate] = started
    return tree


def _alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == started and stat[0] not in ("Z", "X")


def _signal(tree: Tree, sig: signal.Signals) -> None:
    for pid, started in tree.items():
        if _alive(pid, started):  # the same process, not a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


async def reap(tree: Tree, grace: float) -> list[int]:
    """End the processes of ``tree`` still alive: SIGTERM, ``grace`` seconds, SIGKILL.

    Returns:
        The pids that had to be killed with SIGKILL.
    """
    if not any(_alive(pid, started) for pid, started in tree.items()):
        return []
    _signal(tree, signal.SIGTERM)
    with anyio.move_on_after(grace):
        while any(_alive(pid, started) for pid, started in tree.items()):  # noqa: ASYNC110 - no exit event for a non-child
            await anyio.sleep(_POLL)
    stubborn = {pid: started for pid, started in tree.items() if _alive(pid, started)}
    _signal(stubborn, signal.SIGKILL)
    return sorted(stubborn)

"""The control channel of the file stores (``JSONSession``, ``SQLiteSession``): a mailbox.

The stores have no server to carry ``NOTIFY`` or pub/sub, but every process that uses them
shares a file system, so the channel is a directory next to the store::

    <mailbox>/<channel>@<pid>-<bell>-<random>/   one folder per holder (a hold_session block)
    <mailbox>/<channel>@<pid>-<bell>-<random>/<n>.json   one file per command sent to it
    <mailbox>/.bells/<pid>-<bell>/<n>            a process's doorbell: "mail is waiting"

The holder folders lie flat in the mailbox, named after their channel: holding costs one
directory made and one removed (a folder per channel around them cost two more of each,
per served turn, on a thread used once), and publishing, which is rare, lists the mailbox.

A holder creates its folder before its block runs (so nothing sent after that is missed)
and removes it when the block ends. Publishing delivers to holders in this process directly
(no file, no delay) and writes one file into the folder of every other live holder (written
aside, then renamed: a reader never sees half a command), then rings that holder's process:
an empty file in its doorbell folder. Each process looks at its doorbell every
``POLL_INTERVAL`` seconds, one listing for all its holders however many runs they hold (a
listing per holder and tick was most of a served turn's CPU); when it rang, every holder of
the process reads its own folder. The bell is cleared before the folders are read and rung
after the command is in place, so a command is never left unread. The folder of a holder
whose process died (its pid no longer exists) is removed by the next publish instead of
being counted. Pids identify processes of one machine: the
mailbox works between the processes of one host, like the file stores themselves.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio
from anyio.lowlevel import RunVar

from agentkit._ids import new_id
from agentkit.exceptions import SessionError

__all__ = [
    "POLL_INTERVAL",
    "ControlChannel",
    "FileControlChannel",
    "Handler",
    "LocalHandlers",
    "dispatch",
    "listening",
]

logger = logging.getLogger("agentkit.session")

POLL_INTERVAL = 0.01
"""Seconds between two looks of a holder into its mailbox folder (the added latency)."""


_Source = TypeVar("_Source")


@asynccontextmanager
async def listening(
    listen: Callable[[_Source, Handler], Coroutine[object, object, None]],
    source: _Source,
    handler: Handler,
) -> AsyncIterator[None]:
    """Run ``listen(source, handler)`` in a task while the block runs; stop it on exit."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(listen, source, handler)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


Handler = Callable[[dict[str, object]], Awaitable[None]]


class ControlChannel(ABC):
    """Publish commands to a session's holders; subscribe as a holder.

    A command is a JSON object: ``{"command": "interrupt", "message": str | None}``.
    """

    @abstractmethod
    async def publish(self, channel: str, command: Mapping[str, object]) -> int | None:
        """Send ``command``; return how many holders got it (None: the transport can't tell)."""

    @abstractmethod
    def subscribe(self, channel: str, handler: Handler) -> AbstractAsyncContextManager[None]:
        """An async context manager: ``handler`` runs for each command while it is entered.

        Entering returns once the subscription is active on the server.
        """


class LocalHandlers:
    """The holders of this process, by channel (delivered to without a file)."""

    registry: dict[str, list[Handler]] = {}  # noqa: RUF012 - one registry per process

    @classmethod
    async def deliver(cls, channel: str, command: Mapping[str, object]) -> int:
        """Run the handlers registered on ``channel``; return how many."""
        handlers = list(cls.registry.get(channel, []))
        for handler in handlers:
            await handler(dict(command))  # each its own, as a decoded one would be
        return len(handlers)

    @classmethod
    @contextlib.contextmanager
    def registered(cls, channel: str, handler: Handler) -> Iterator[None]:
        """Register ``handler`` on ``channel`` while the block runs."""
        cls.registry.setdefault(channel, []).append(handler)
        try:
            yield
        finally:
            handlers = cls.registry[channel]
            handlers.remove(handler)
            if not handlers:
                del cls.registry[channel]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


_AT = "@"  # between a holder folder's channel and its holder name


def _holder_pid(holder: str) -> int | None:
    head = holder.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _post(mailbox: Path, channel: str, command: Mapping[str, object]) -> int:
    """Write ``command`` into the folder of every live holder of ``channel`` in other processes."""
    data = json.dumps(command).encode()
    reached = 0
    try:
        entries = list(os.scandir(mailbox))
    except FileNotFoundError:
        return 0
    for entry in entries:
        of, _, holder = entry.name.rpartition(_AT)  # a holder's name has no "@"
        if of != channel:
            continue
        pid = _holder_pid(holder)
        if pid is None or pid == os.getpid() or not entry.is_dir():
            continue  # this process's holders are delivered to directly
        if not _alive(pid):
            shutil.rmtree(entry.path, ignore_errors=True)
            continue
        name = f"{time.time_ns():020d}-{new_id()}"
        tmp = Path(entry.path, f".{name}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, Path(entry.path, f"{name}.json"))
        except FileNotFoundError:  # the holder left meanwhile: nobody to stop there
            continue
        _ring(mailbox / _BELLS / _bell_of(holder), name)
        reached += 1
    return reached


_BELLS = ".bells"


def _bell_of(holder: str) -> str:
    """The doorbell of the process (and event loop) a holder folder ``<pid>-<bell>-<n>`` is of."""
    return "-".join(holder.split("-", 2)[:2])


def _ring(bell: Path, name: str) -> None:
    """Ring a process's doorbell (after the command is in its holder's folder)."""
    bell.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(bell / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _answered(bell: Path) -> bool:
    """Clear the doorbell; whether it had rung."""
    try:
        names = os.listdir(bell)
    except FileNotFoundError:
        return False
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(bell / name)
    return bool(names)


class _Doorbell:
    """This process's doorbell in one mailbox, watched for all of its holders at once.

    The holders take turns at watching: whichever waits first looks at the bell every
    ``POLL_INTERVAL`` seconds; when it rang, :attr:`rings` counts up and every waiting
    holder wakes and reads its folder. When the watcher's block ends first (a held run
    ended: the common case), only the oldest waiting holder wakes, to watch next: the others
    sleep on (waking them all made every run's end cost a listing per held run). No task
    outlives the holders' blocks.
    """

    def __init__(self, mailbox: Path) -> None:
        self.name = new_id(f"{os.getpid()}-", 6)  # this process and event loop
        self.path = mailbox / _BELLS / self.name
        self.holders = 0
        self.rings = 0  # how often a watcher found the bell rung
        self.watched = False
        self.waiting: dict[anyio.Event, None] = {}  # holders not watching, oldest first

    @classmethod
    @contextlib.contextmanager
    def joined(cls, mailbox: Path) -> Iterator[_Doorbell]:
        """This event loop's doorbell of ``mailbox``, while the block runs."""
        try:
            bells = _DOORBELLS.get()
        except LookupError:
            bells = {}
            _DOORBELLS.set(bells)
        bell = bells.get(mailbox)
        if bell is None:
            bell = bells[mailbox] = cls(mailbox)
        bell.holders += 1
        try:
            yield bell
        finally:
            bell.holders -= 1
            if not bell.holders:  # the last holder of this loop: the bell goes too
                del bells[mailbox]
                shutil.rmtree(bell.path, ignore_errors=True)

    async def wait(self, seen: int) -> None:
        """Return once the bell rang after :attr:`rings` was ``seen``.

        A holder reads ``rings`` before it reads its folder, so a command that arrives
        while it reads (the ring found by another holder's watch) is read next.
        """
        while self.rings == seen:
            if not self.watched:
                await self._watch()
                return
            turn = anyio.Event()
            self.waiting[turn] = None
            try:
                await turn.wait()
            except BaseException:  # this holder's block ended while it waited
                self.waiting.pop(turn, None)
                if turn.is_set():  # handed the watch on its way out: pass it on
                    self._hand_over()
                raise

    async def _watch(self) -> None:
        self.watched = True
        rang = False
        try:
            while not rang:  # one listing a tick: the folder is nearly always absent
                rang = _answered(self.path)
                if not rang:
                    await anyio.sleep(POLL_INTERVAL)
        finally:
            self.watched = False
            if rang:  # every holder reads its folder
                self.rings += 1
                waiting, self.waiting = self.waiting, {}
                for turn in waiting:
                    turn.set()
            else:  # this watcher's block ended
                self._hand_over()

    def _hand_over(self) -> None:
        """Wake the oldest waiting holder (if any), to watch next."""
        if self.waiting:
            turn = next(iter(self.waiting))
            del self.waiting[turn]
            turn.set()


def _take(folder: Path) -> list[bytes]:
    """Read and remove the commands waiting in ``folder``, oldest first."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    found: list[bytes] = []
    for name in names:
        path = folder / name
        with contextlib.suppress(FileNotFoundError):
            found.append(path.read_bytes())
            path.unlink()
    return found


# One set per event loop: a bell's events belong to one loop (two loops in two threads of
# one process have a bell each; a holder folder's name says which one to ring).
_DOORBELLS: RunVar[dict[Path, _Doorbell]] = RunVar("agentkit_doorbells")


class FileControlChannel(ControlChannel):
    """A mailbox directory shared by the processes of one machine (see the module docs).

    Args:
        mailbox: The directory (created on first use).
    """

    def __init__(self, mailbox: Path) -> None:
        self.mailbox = mailbox

    async def publish(self, channel: str, command: Mapping[str, object]) -> int | None:
        """Deliver to this process's holders, mail the others; return how many got it."""
        local = await LocalHandlers.deliver(channel, command)
        remote = await anyio.to_thread.run_sync(_post, self.mailbox, channel, command)
        return local + remote

    @asynccontextmanager
    async def subscribe(self, channel: str, handler: Handler) -> AsyncIterator[None]:
        """Create this holder's folder, poll it while the block runs, then remove it.

        Raises:
            SessionError: the folder cannot be made (a read-only or full disk).
        """
        with _Doorbell.joined(self.mailbox) as bell:
            seen = bell.rings  # before the folder exists: a ring from then on is read
            folder = self.mailbox / f"{channel}{_AT}{bell.name}-{new_id()}"
            # On the loop, like the polling: a directory made and removed on a local file
            # system takes microseconds, two thread hops a good part of a millisecond of
            # CPU per held run. A folder that still holds commands is removed in a thread.
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a read-only or full disk: the store's own failure
                raise SessionError(
                    f"cannot listen for control commands in {self.mailbox}: {exc}"
                ) from exc
            try:
                with LocalHandlers.registered(channel, handler):
                    async with listening(partial(self._poll, bell, seen=seen), folder, handler):
                        yield
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        folder.rmdir()
                    except OSError:  # not empty (unread commands), or gone
                        await anyio.to_thread.run_sync(shutil.rmtree, folder, True)

    @staticmethod
    async def _poll(bell: _Doorbell, folder: Path, handler: Handler, seen: int) -> None:
        # ``seen`` is the bell's count from before the folder was made, then from before
        # each read of it: whatever is rung for after that is read next. A command is put
        # in place before its ring, so a new folder is read only once the bell rang (a
        # listing of the empty folder first cost every held run a syscall).
        while True:
            await bell.wait(seen)
            seen = bell.rings
            # A listing of a (nearly always empty) local folder: cheaper than a thread hop.
            waiting = False
            with contextlib.suppress(FileNotFoundError):
                waiting = any(n.endswith(".json") for n in os.listdir(folder))
            if waiting:
                for data in await anyio.to_thread.run_sync(_take, folder):
                    await dispatch(data, handler)


async def dispatch(data: object, handler: Handler) -> None:
    """Decode one command (JSON text) and run ``handler`` on it; log and skip what is malformed.

    Anyone who can write to the mailbox or publish on the channel may send anything: text
    that is not JSON, JSON that is not an object, or nesting deep enough to exhaust the
    parser's recursion. None of it may end the listener (and with it the held run).
    """
    if not isinstance(data, str | bytes | bytearray):
        _ignored(data, "not JSON")
        return
    try:
        command = json.loads(data)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON"
        _ignored(data, reason)
        return
    if not isinstance(command, dict):
        _ignored(data, "not a JSON object")
        return
    await handler(command)


def _ignored(data: object, reason: str) -> None:
    excerpt = repr(data[:120] if isinstance(data, str | bytes) else data)[:160]
    logger.warning("ignored a malformed control message (%s): %s", reason, excerpt)

"""Low-level file operations on directory descriptors, for ``toolkits.filesystem``.

Everything here works on ``(dir_fd, name)`` pairs produced by :mod:`toolkits._safepath`, never
on path strings, so nothing can be swapped between a check and its use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from toolkits._common import escape_name
from toolkits._safepath import RootEscapeError, resolve_at

__all__ = [
    "PathLocks",
    "ScanLimitError",
    "atomic_write",
    "iter_lines",
    "open_regular",
    "walk_files",
]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class ScanLimitError(Exception):
    """More bytes would have to be read than the configured budget allows."""


@contextlib.contextmanager
def open_regular(dir_fd: int, name: str, shown: str) -> Iterator[BinaryIO]:
    """Open ``name`` (in ``dir_fd``) for binary reading; it must be a regular file.

    ``O_NOFOLLOW``: a symlink swapped in after resolution is refused, not followed.
    ``O_NONBLOCK`` keeps a FIFO from blocking the open forever (it is then refused as not a
    regular file); it changes nothing for regular files.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise FileNotFoundError(f"{shown} does not exist") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{shown} is a directory; use list_directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RootEscapeError(f"{shown} became a symlink while opening it") from None
        raise OSError(exc.errno, f"cannot open {shown}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{shown} is a directory; use list_directory")
        raise ValueError(f"{shown} is not a regular file (a device, FIFO or socket)")
    with os.fdopen(fd, "rb") as fh:
        yield fh


def atomic_write(dir_fd: int, name: str, data: bytes, shown: str) -> bool:
    """Replace ``name`` in ``dir_fd`` with ``data`` via a temporary file and a rename.

    Readers never see a half-written file. A new file gets ``0666 & ~umask`` like any tool
    creates (the kernel applies the umask); an existing file keeps its permission bits.

    Returns:
        Whether the file existed before.
    """
    try:
        before: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is not None and stat.S_ISDIR(before.st_mode):
        raise IsADirectoryError(f"{shown} is a directory")
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise ValueError(f"{shown} is not a regular file; refusing to replace it")
    tmp = f".agentkit-{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC
    fd = os.open(tmp, flags, 0o666 if before is None else 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if before is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(before.st_mode))
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return before is not None


def iter_lines(fh: BinaryIO, max_bytes: int, budget: int) -> Iterator[tuple[bytes, bool]]:
    """Yield each line (at most ``max_bytes`` of it) and whether it was cut.

    The rest of a cut line is skipped only when the next line is asked for, and never past
    ``budget`` bytes from the start of the file: a caller that stops early reads nothing more.

    Raises:
        ScanLimitError: Reaching the next line would read past ``budget``.
    """
    while True:
        if fh.tell() >= budget:
            raise ScanLimitError
        raw = fh.readline(max_bytes)
        if not raw:
            return
        if raw.endswith(b"\n") or len(raw) < max_bytes:
            yield raw, False
            continue
        yield raw, True
        while (rest := fh.readline(64 * 1024)) and not rest.endswith(b"\n"):
            if fh.tell() >= budget:
                raise ScanLimitError


class PathLocks:
    """One lock per file (directory identity + name), so read-modify-write calls serialize.

    Two ``edit_file`` calls on one file in one turn would otherwise both read the old text
    and the second rename would drop the first edit. Locks live while someone holds or waits
    for them.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[tuple[int, int, str], tuple[threading.Lock, int]] = {}

    @contextlib.contextmanager
    def hold(self, dir_fd: int, name: str) -> Iterator[None]:
        """Hold the lock of ``name`` in the directory ``dir_fd`` (blocking; call in a thread)."""
        st = os.fstat(dir_fd)
        key = (st.st_dev, st.st_ino, name)
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


def walk_files(
    root: Path, root_fd: int, base_fd: int, base_parts: list[str], ignored: frozenset[str]
) -> Iterator[tuple[str, str, int, str]]:
    """Regular files under ``base_fd``, sorted, confined to the root, race-free.

    Symlinked directories are not descended into (``os.fwalk`` checks the directory it opened
    is the one it listed); a symlinked file counts only if it resolves inside the root.

    Yields:
        ``(path relative to the base, path relative to the root, dir_fd, name)``; open
        ``name`` with ``dir_fd`` before asking for the next item (the descriptor is then
        closed). Paths are escaped for display.
    """
    for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=base_fd):
        dirnames[:] = sorted(d for d in dirnames if d not in ignored)
        rel_dir = [p for p in dirpath.split("/") if p not in ("", ".")]
        for name in sorted(filenames):
            rel = "/".join([*rel_dir, name])
            shown = escape_name("/".join([*base_parts, rel]))
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield escape_name(rel), shown, dirfd, name
            elif stat.S_ISLNK(st.st_mode):
                yield from _linked_file(root, root_fd, [*base_parts, rel], escape_name(rel), shown)


def _linked_file(
    root: Path, root_fd: int, parts: list[str], rel: str, shown: str
) -> Iterator[tuple[str, str, int, str]]:
    try:
        target = resolve_at(root, root_fd, "/".join(parts))
    except OSError:  # outside the root, dangling, a loop: not a file of ours
        return
    with target:
        if target.name is None:
            return
        try:
            st = os.stat(target.name, dir_fd=target.dir_fd, follow_symlinks=False)
        except OSError:
            return
        if stat.S_ISREG(st.st_mode):
            yield rel, shown, target.dir_fd, target.name

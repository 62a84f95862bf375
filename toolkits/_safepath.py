"""Race-free path resolution under a root directory: ``openat``-style walking.

Checking a path (``realpath``, then "is it under the root?") and then opening it leaves a
window in which a directory on the path can be swapped for a symlink to somewhere else; the
open then follows the symlink out of the root. Here every component is opened relative to
the directory file descriptor of its parent with ``O_NOFOLLOW``, so what is opened is what
was checked. Symlinks are still followed when they lead somewhere inside the root: their
target is read (``readlinkat``) and walked the same way, component by component, with a
limit on how many are followed. ``..`` pops back to the parent descriptor and never goes
above the root.

POSIX only (``dir_fd`` and ``O_NOFOLLOW``); the toolkits that use it document that.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from toolkits._common import escape_name

__all__ = ["Resolved", "RootEscapeError", "resolve_at"]

_MAX_SYMLINKS = 40  # as the kernel's own limit (ELOOP)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class RootEscapeError(PermissionError):
    """The path (or a symlink on it) leads outside the allowed root."""


@dataclass
class Resolved:
    """A path resolved under the root: the open parent directory and the final name.

    Close it (it is a context manager): it owns ``dir_fd``.

    Attributes:
        dir_fd: Open descriptor of the directory that holds ``name`` (or of the target itself
            when ``name`` is None, i.e. the path is a directory reached as a whole).
        name: Last component, not yet opened (None when the path is the root itself or was
            resolved with ``final_dir=True``).
        parts: Canonical components from the root to the target (for display).
    """

    dir_fd: int
    name: str | None
    parts: list[str] = field(default_factory=list)

    def shown(self) -> str:
        """The canonical path relative to the root, escaped for display (``.`` for the root)."""
        return escape_name("/".join(self.parts)) if self.parts else "."

    def close(self) -> None:
        """Release the directory descriptor."""
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Resolved:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


class _Walk:
    """The walk's state: a stack of open directory descriptors, root first."""

    def __init__(self, root: Path, root_fd: int, shown: str, create_dirs: bool) -> None:
        self.root = root
        self.fds = [os.dup(root_fd)]
        self.names: list[str] = []
        self.shown = shown
        self.create_dirs = create_dirs
        self.links = 0

    def close_all(self) -> None:
        while self.fds:
            os.close(self.fds.pop())

    def up(self) -> None:
        if len(self.fds) == 1:
            raise RootEscapeError(
                f"access denied: {self.shown} resolves outside the allowed root directory"
            )
        os.close(self.fds.pop())
        self.names.pop()

    def to_root(self) -> None:
        while len(self.fds) > 1:
            os.close(self.fds.pop())
        self.names.clear()

    def link_target(self, name: str) -> str | None:
        """The symlink's target, or None if ``name`` is not a symlink (or is missing)."""
        try:
            return os.readlink(name, dir_fd=self.fds[-1])
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                return None
            raise

    def follow(self, target: str, queue: deque[str]) -> None:
        """Splice a symlink's target in front of the components still to walk."""
        self.links += 1
        if self.links > _MAX_SYMLINKS:
            raise OSError(errno.ELOOP, f"too many symbolic links resolving {self.shown}")
        if target.startswith("/"):
            absolute = Path(os.path.normpath(target))
            if absolute != self.root and not absolute.is_relative_to(self.root):
                raise RootEscapeError(
                    f"access denied: {self.shown} resolves outside the allowed root directory"
                )
            self.to_root()
            target = absolute.relative_to(self.root).as_posix()
        queue.extendleft(reversed(_split(target)))

    def descend(self, name: str) -> None:
        """Enter directory ``name`` without following a symlink (the caller handles links)."""
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fds[-1])
        except FileNotFoundError:
            if not self.create_dirs:
                raise
            # Created meanwhile: the open below decides what it is.
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=self.fds[-1])
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fds[-1])
        self.fds.append(fd)
        self.names.append(name)


def resolve_at(
    root: Path,
    root_fd: int,
    path: str,
    *,
    final_dir: bool = False,
    create_dirs: bool = False,
    follow_final: bool = True,
) -> Resolved:
    """Resolve ``path`` under ``root`` without ever leaving it, even under a race.

    Args:
        root: The canonical root (to interpret absolute paths and absolute symlinks).
        root_fd: An open descriptor of ``root``.
        path: What the caller asked for: relative to the root, or absolute inside it.
        final_dir: The target must be a directory: it is opened and returned as ``dir_fd``.
        create_dirs: Create missing directories on the way (for writes).
        follow_final: Follow a symlink in the last component (if it stays in the root).

    Returns:
        The resolution; the caller opens ``name`` with ``dir_fd`` and ``O_NOFOLLOW``.

    Raises:
        RootEscapeError: The path or a symlink on it leads outside the root.
        FileNotFoundError: A directory on the path does not exist.
        NotADirectoryError: A component that must be a directory is not one.
        ValueError: The path contains a NUL byte.
    """
    if "\x00" in path:
        raise ValueError("invalid path: it contains a NUL byte")
    try:
        os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"invalid path {escape_name(path)!r}: character {exc.start} is a lone surrogate, "
            "which no file name can contain"
        ) from None
    shown = repr(escape_name(path))
    if path.startswith("/"):
        absolute = Path(os.path.normpath(path))
        if absolute != root and not absolute.is_relative_to(root):
            raise RootEscapeError(
                f"access denied: {shown} resolves outside the allowed root directory"
            )
        path = absolute.relative_to(root).as_posix()
    walk = _Walk(root, root_fd, shown, create_dirs)
    try:
        name = _walk(walk, deque(_split(path)), final_dir, follow_final)
    except BaseException:
        walk.close_all()
        raise
    # Keep only the innermost descriptor; the others were needed only for "..".
    dir_fd = walk.fds.pop()
    walk.close_all()
    parts = [*walk.names, name] if name is not None else list(walk.names)
    return Resolved(dir_fd, name, parts)


def _walk(walk: _Walk, queue: deque[str], final_dir: bool, follow_final: bool) -> str | None:
    """Consume ``queue``; return the final name (None if the walk ends on a directory)."""
    while queue:
        name = queue.popleft()
        if name == "..":
            walk.up()
            continue
        last = not queue
        if last and not final_dir:
            target = walk.link_target(name) if follow_final else None
            if target is None:
                return name
            walk.follow(target, queue)
            continue
        try:
            walk.descend(name)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            target = walk.link_target(name)
            if target is None:
                raise NotADirectoryError(
                    f"{escape_name('/'.join([*walk.names, name]))} is not a directory"
                ) from None
            walk.follow(target, queue)
    return None


def is_regular(dir_fd: int, name: str) -> bool:
    """``name`` in ``dir_fd`` is a regular file (not following a symlink)."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False

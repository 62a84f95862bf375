r"""File tools confined to one root directory: read, write, edit, list, glob, grep.

Every path is walked one component at a time from an open descriptor of the root
(``openat`` with ``O_NOFOLLOW``; symlinks are followed by reading them and walking their target
the same way), so ``../``, absolute paths and symlinks pointing elsewhere are refused, and
swapping a directory for a symlink while a call runs cannot lead outside the root either.
Relative paths are relative to the root; absolute paths are accepted only inside it. Binary
files are refused with a message; text that is not valid UTF-8 is shown with replacement
characters (and refused by ``edit_file``, which must not corrupt it). File names are shown
escaped (``\xff`` for an undecodable byte, ``\n``, ``\u202e``...): output is always valid
Unicode on one line per entry. ``write_file``/``edit_file`` on one file serialize (a per-file
lock), and both are registered ``sequential`` so calls in one turn apply in order. POSIX only.

Use it locally::

    from toolkits import filesystem
    toolkit = filesystem.toolkit("/path/to/project")

or serve it over MCP: ``python -m toolkits.filesystem --root /path/to/project``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import anyio.to_thread

from agentkit.tools import Toolkit, annotate
from toolkits._common import escape_name, looks_binary, target_toolkit
from toolkits._fsops import (
    PathLocks,
    ScanLimitError,
    atomic_write,
    iter_lines,
    open_regular,
    walk_files,
)
from toolkits._patterns import (
    LinePattern,
    compile_glob,
    compile_line_regex,
    glob_name_matcher,
)
from toolkits._safepath import Resolved, RootEscapeError, is_regular, resolve_at

__all__ = ["FileSystem", "main", "toolkit"]

_T = TypeVar("_T")
_SNIFF_BYTES = 8192
DEFAULT_IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".mypy_cache"}
)


class FileSystem:
    """File tools bound to one root directory.

    Args:
        root: Directory the tools may touch; everything outside is refused.
        max_read_bytes: Most bytes of text ``read_file`` returns per call.
        max_line_chars: Longer lines are cut (minified files would flood the context).
        max_write_bytes: Largest content ``write_file``/``edit_file`` will write.
        max_entries: Most entries ``list_directory`` and ``glob`` return.
        max_matches: Default and upper bound of ``grep`` matches.
        max_files_scanned: ``glob``/``grep`` stop after looking at this many files.
        max_grep_file_bytes: ``grep`` skips files larger than this.
        max_scan_bytes: Most bytes ``read_file`` reads from one file in one call (to reach
            ``offset``, or through a huge line); it reports where it stopped.
        ignored_dirs: Directory names ``glob`` and ``grep`` do not descend into.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = 256 * 1024,
        max_line_chars: int = 2000,
        max_write_bytes: int = 10 * 1024 * 1024,
        max_entries: int = 1000,
        max_matches: int = 200,
        max_files_scanned: int = 50_000,
        max_grep_file_bytes: int = 10 * 1024 * 1024,
        ignored_dirs: frozenset[str] = DEFAULT_IGNORED_DIRS,
        max_scan_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        resolved = Path(os.path.realpath(root))
        if not resolved.is_dir():
            raise NotADirectoryError(f"filesystem root {str(root)!r} is not a directory")
        self.root = resolved
        self.max_read_bytes = max_read_bytes
        self.max_line_chars = max_line_chars
        self.max_write_bytes = max_write_bytes
        self.max_entries = max_entries
        self.max_matches = max_matches
        self.max_files_scanned = max_files_scanned
        self.max_grep_file_bytes = max_grep_file_bytes
        self.ignored_dirs = ignored_dirs
        self.max_scan_bytes = max_scan_bytes
        self._locks = PathLocks()

    # -- tools (async: the blocking work runs in a worker thread) ----------------------------

    async def read_file(self, path: str, offset: int = 1, limit: int = 2000) -> str:
        """Read a text file, optionally a range of its lines.

        Args:
            path: File path, relative to the root directory.
            offset: First line to return (1-based).
            limit: Maximum number of lines to return.
        """
        return await _in_thread(self._read_file, path, offset, limit)

    async def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a text file (UTF-8); missing parent directories are created.

        Args:
            path: File path, relative to the root directory.
            content: The complete new content of the file.
        """
        return await _in_thread(self._write_file, path, content, abandon=False)

    async def edit_file(
        self, path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> str:
        """Replace an exact string in a text file.

        `old_string` must occur exactly once (include surrounding lines to make it unique),
        unless `replace_all` is true.

        Args:
            path: File path, relative to the root directory.
            old_string: The exact text to replace, whitespace included.
            new_string: The replacement text.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        return await _in_thread(
            self._edit_file, path, old_string, new_string, replace_all, abandon=False
        )

    async def list_directory(self, path: str = ".") -> str:
        """List a directory: subdirectories end with '/', files show their size.

        Args:
            path: Directory path, relative to the root directory.
        """
        return await _in_thread(self._list_directory, path)

    async def glob(self, pattern: str, path: str = ".") -> str:
        """Find files by glob pattern, e.g. '**/*.py' or 'src/*.txt'.

        Args:
            pattern: Glob pattern relative to `path`; '**' matches any number of directories.
            path: Directory to search from, relative to the root directory.
        """
        return await _in_thread(self._glob, pattern, path)

    async def grep(
        self,
        pattern: str,
        path: str = ".",
        include: str | None = None,
        ignore_case: bool = False,
        max_matches: int | None = None,
    ) -> str:
        """Search file contents with a regular expression; prints 'file:line: text'.

        Args:
            pattern: Regular expression (Python syntax) searched line by line.
            path: File or directory to search, relative to the root directory.
            include: Only search files whose name matches this glob, e.g. '*.py'.
            ignore_case: Match case-insensitively.
            max_matches: Stop after this many matching lines.
        """
        return await _in_thread(self._grep, pattern, path, include, ignore_case, max_matches)

    # -- implementations (blocking) -----------------------------------------------------------

    @contextlib.contextmanager
    def _resolve(
        self, path: str, *, final_dir: bool = False, create_dirs: bool = False
    ) -> Iterator[Resolved]:
        """Resolve ``path`` race-free under the root (see :mod:`toolkits._safepath`)."""
        path = path or "."
        if create_dirs and os.path.normpath(path).split("/")[0] == "..":
            # Refused before anything is created on the way.
            raise RootEscapeError(
                f"access denied: {escape_name(path)!r} resolves outside the allowed root directory"
            )
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            resolved = resolve_at(
                self.root, root_fd, path, final_dir=final_dir, create_dirs=create_dirs
            )
        except FileNotFoundError:
            raise FileNotFoundError(f"{escape_name(path)} does not exist") from None
        except NotADirectoryError as exc:
            raise NotADirectoryError(
                f"{escape_name(path)} is not a directory (or does not exist): {exc}"
            ) from None
        finally:
            os.close(root_fd)
        with resolved:
            yield resolved

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)

    def _read_file(self, path: str, offset: int, limit: int) -> str:
        if offset < 1:
            raise ValueError("offset must be >= 1 (line numbers start at 1)")
        if limit < 1:
            raise ValueError("limit must be >= 1")
        with self._resolve(path) as target:
            shown = target.shown()
            if target.name is None:
                raise IsADirectoryError(f"{shown} is a directory; use list_directory")
            with open_regular(target.dir_fd, target.name, shown) as fh:
                if looks_binary(fh.read(_SNIFF_BYTES)):
                    size = os.fstat(fh.fileno()).st_size
                    raise ValueError(f"{shown} is a binary file ({size} bytes)")
                fh.seek(0)
                try:
                    return self._read_lines(fh, shown, offset, limit)
                except ScanLimitError:
                    return (
                        f"[stopped after reading {self.max_scan_bytes} bytes of {shown} without "
                        f"reaching line {offset}; use grep to find what you need]"
                    )

    def _read_lines(self, fh: BinaryIO, shown: str, offset: int, limit: int) -> str:
        lines: list[str] = []
        used = 0
        lineno = 0
        lines_iter = iter_lines(fh, self.max_line_chars * 4, self.max_scan_bytes)
        for lineno, (raw, cut) in enumerate(lines_iter, start=1):
            if lineno < offset:
                continue
            # At least one line always comes back, or the model would be told to retry the
            # very offset it asked for.
            if lines and used + len(raw) > self.max_read_bytes:
                return "".join(lines) + _more(lineno)
            lines.append(self._decode_line(raw, cut))
            used += len(raw)
            # Stop before reading the next line: it may be gigabytes long.
            if len(lines) >= limit:
                return "".join(lines) + (_more(lineno + 1) if fh.read(1) else "")
        if not lines and offset > 1:
            return f"[{shown} has {lineno} lines; offset {offset} is past the end]"
        return "".join(lines) if lines else f"[{shown} is empty]"

    def _decode_line(self, raw: bytes, cut: bool) -> str:
        line = raw.decode("utf-8", errors="replace")
        body = line.rstrip("\r\n")
        if cut or len(body) > self.max_line_chars:
            return body[: self.max_line_chars] + " [... line truncated]\n"
        return line

    def _write_file(self, path: str, content: str) -> str:
        data = _encode(content, "content")
        if len(data) > self.max_write_bytes:
            raise ValueError(
                f"content is {len(data)} bytes; the limit is {self.max_write_bytes} bytes"
            )
        with self._resolve(path, create_dirs=True) as target:
            shown = target.shown()
            if target.name is None:
                raise IsADirectoryError(f"{shown} is a directory")
            with self._locks.hold(target.dir_fd, target.name):
                existed = atomic_write(target.dir_fd, target.name, data, shown)
        verb = "Overwrote" if existed else "Created"
        return f"{verb} {shown} ({len(data)} bytes)"

    def _edit_file(self, path: str, old: str, new: str, replace_all: bool) -> str:
        if not old:
            raise ValueError("old_string is empty; use write_file to create or replace a file")
        if old == new:
            raise ValueError("old_string and new_string are identical; nothing to change")
        _encode(old, "old_string")
        _encode(new, "new_string")
        with self._resolve(path) as target:
            shown = target.shown()
            if target.name is None:
                raise IsADirectoryError(f"{shown} is a directory")
            # Read, change and write under the file's lock: a parallel edit waits its turn.
            with self._locks.hold(target.dir_fd, target.name):
                with open_regular(target.dir_fd, target.name, shown) as fh:
                    data = fh.read(self.max_write_bytes + 1)
                out, count = self._apply_edit(data, shown, old, new, replace_all)
                atomic_write(target.dir_fd, target.name, out, shown)
        return f"Replaced {count if replace_all else 1} occurrence(s) in {shown}"

    def _apply_edit(
        self, data: bytes, shown: str, old: str, new: str, replace_all: bool
    ) -> tuple[bytes, int]:
        if len(data) > self.max_write_bytes:
            raise ValueError(f"{shown} is larger than {self.max_write_bytes} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{shown} is not valid UTF-8 text (byte {exc.start}); refusing to edit it"
            ) from None
        count = text.count(old)
        if count == 0:
            raise ValueError(
                f"old_string was not found in {shown}; read the file and copy it exactly"
            )
        if count > 1 and not replace_all:
            raise ValueError(
                f"old_string occurs {count} times in {shown}; include more surrounding text "
                "to make it unique, or set replace_all=true"
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        out = updated.encode("utf-8")
        if len(out) > self.max_write_bytes:
            raise ValueError(f"the edited file would exceed {self.max_write_bytes} bytes")
        return out, count

    def _list_directory(self, path: str) -> str:
        with self._resolve(path, final_dir=True) as target:
            with os.scandir(target.dir_fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            with self._root_fd() as root_fd:
                lines = [
                    self._describe(root_fd, target.parts, entry)
                    for entry in entries[: self.max_entries]
                ]
            shown = target.shown()
        if len(entries) > self.max_entries:
            lines.append(f"[... {len(entries) - self.max_entries} more entries not shown]")
        header = f"{shown}/ ({len(entries)} entries)"
        return "\n".join([header, *lines])

    def _describe(self, root_fd: int, parts: list[str], entry: os.DirEntry[str]) -> str:
        name = escape_name(entry.name)
        try:
            if entry.is_symlink():
                # Show where it leads only when that is inside the root: the target of a
                # link that leaves it is none of the model's business.
                try:
                    with resolve_at(self.root, root_fd, "/".join([*parts, entry.name])) as link:
                        return f"{name} -> {link.shown()}"
                except OSError:
                    return f"{name} -> (outside the root, or broken)"
            if entry.is_dir(follow_symlinks=False):
                return f"{name}/"
            return f"{name}  ({entry.stat(follow_symlinks=False).st_size} bytes)"
        except OSError:
            return f"{name}  (unreadable)"

    def _glob(self, pattern: str, path: str) -> str:
        if not pattern or "\x00" in pattern:
            raise ValueError("pattern must be a non-empty glob such as '**/*.py'")
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise PermissionError("the glob pattern must be relative and may not contain '..'")
        regex = compile_glob(pattern)
        found: list[str] = []
        for scanned, (rel, shown, _fd, _name) in enumerate(self._walk(path), start=1):
            if scanned > self.max_files_scanned:
                found.append(f"[stopped after scanning {self.max_files_scanned} files]")
                break
            if regex.fullmatch(rel):
                found.append(shown)
                if len(found) >= self.max_entries:
                    found.append(f"[stopped at {self.max_entries} results]")
                    break
        return "\n".join(found) if found else f"No files match {pattern!r}"

    def _walk(self, path: str) -> Iterator[tuple[str, str, int, str]]:
        with self._resolve(path, final_dir=True) as base, self._root_fd() as root_fd:
            yield from walk_files(self.root, root_fd, base.dir_fd, base.parts, self.ignored_dirs)

    def _grep(
        self,
        pattern: str,
        path: str,
        include: str | None,
        ignore_case: bool,
        max_matches: int | None,
    ) -> str:
        regex = compile_line_regex(pattern, ignore_case=ignore_case)
        name_glob = glob_name_matcher(include) if include else None
        limit = max(1, min(max_matches or self.max_matches, self.max_matches))
        matches: list[str] = []
        for scanned, (rel, shown, dir_fd, name) in enumerate(self._grep_files(path), start=1):
            if scanned > self.max_files_scanned:
                matches.append(f"[stopped after scanning {self.max_files_scanned} files]")
                break
            if name_glob and not name_glob.fullmatch(rel.rsplit("/", 1)[-1]):
                continue
            if self._grep_file(shown, dir_fd, name, regex, matches, limit):
                matches.append(f"[stopped at {limit} matches]")
                break
        return "\n".join(matches) if matches else f"No matches for {pattern!r}"

    def _grep_files(self, path: str) -> Iterator[tuple[str, str, int, str]]:
        with self._resolve(path) as target:
            if target.name is not None and is_regular(target.dir_fd, target.name):
                shown = target.shown()
                yield shown, shown, target.dir_fd, target.name
                return
        yield from self._walk(path)

    def _grep_file(
        self, shown: str, dir_fd: int, name: str, regex: LinePattern, out: list[str], limit: int
    ) -> bool:
        """Append matches of one file to ``out``; True once ``limit`` is reached."""
        try:
            with open_regular(dir_fd, name, shown) as fh:
                if os.fstat(fh.fileno()).st_size > self.max_grep_file_bytes:
                    return False
                data = fh.read(self.max_grep_file_bytes)
        except OSError:  # unreadable, vanished, or swapped: skip it
            return False
        if looks_binary(data[:_SNIFF_BYTES]):
            return False
        pos = counted = 0
        lineno = 1
        # One search per matching line over the whole buffer: linear in the file's size.
        while (match := regex.search(data, pos)) is not None:
            start = match.start()
            if start == len(data) and (not data or data.endswith(b"\n")):
                break  # the empty "line" after the final newline is not a line
            lineno += data.count(b"\n", counted, start)
            counted = start
            end = data.find(b"\n", start)
            end = len(data) if end == -1 else end
            line = data[data.rfind(b"\n", 0, start) + 1 : end].decode("utf-8", errors="replace")
            out.append(f"{shown}:{lineno}: {line.rstrip(chr(13))[:300]}")
            if len(out) >= limit:
                return True
            pos = end + 1
            if pos > len(data):
                break
        return False


def _more(lineno: int) -> str:
    return f"[... more lines follow; call read_file with offset={lineno} to continue]"


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} is not valid Unicode (a lone surrogate at character {exc.start})"
        ) from None


async def _in_thread(fn: Callable[..., _T], *args: Any, abandon: bool = True) -> _T:
    """Run blocking file work in a worker thread.

    Reads and searches are abandoned on cancellation, so an interrupt returns at once (each
    has a size or count limit, so the thread finishes soon after). Writes are waited for
    (they are small and quick): when an interrupted call returns, the file is settled.
    """
    return await anyio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=abandon)


# Titles and behaviour hints served over MCP (annotations on every tool).
_TITLES = {
    "read_file": "Read file",
    "list_directory": "List directory",
    "glob": "Find files",
    "grep": "Search file contents",
    "write_file": "Write file",
    "edit_file": "Edit file",
}


def toolkit(
    root: str | os.PathLike[str],
    *,
    read_only: bool = False,
    approve_writes: bool = False,
    group: str = "basic",
    into: Toolkit | None = None,
    **limits: Any,
) -> Toolkit:
    """Build a Toolkit with the file tools confined to ``root``.

    Args:
        root: Directory the tools may touch.
        read_only: Register only ``read_file``, ``list_directory``, ``glob`` and ``grep``.
        approve_writes: Register ``write_file`` and ``edit_file`` with ``requires_approval``.
        group: Tool group to register the tools in.
        into: Register into this Toolkit instead of a new one.
        **limits: Keyword arguments for :class:`FileSystem` (``max_read_bytes``...).

    Returns:
        The Toolkit holding the tools.
    """
    fs = FileSystem(root, **limits)
    tk = target_toolkit(into, group, f"Read, write and search files under {fs.root}")
    readers: list[Callable[..., Any]] = [fs.read_file, fs.list_directory, fs.glob, fs.grep]
    for reader in readers:
        tool = tk.register_tool_function(reader, group=group)
        annotate(tool, title=_TITLES[tool.name], read_only=True, open_world=False)
    if not read_only:
        writers: list[Callable[..., Any]] = [fs.write_file, fs.edit_file]
        for writer in writers:
            # sequential: edits to one file in one turn apply in the order the model gave.
            tool = tk.register_tool_function(
                writer, group=group, requires_approval=approve_writes, sequential=True
            )
            # Both overwrite content: destructive; edit_file with the same edit twice fails
            # the second time, write_file twice leaves the same file (idempotent).
            annotate(
                tool,
                title=_TITLES[tool.name],
                read_only=False,
                destructive=True,
                idempotent=tool.name == "write_file",
                open_world=False,
            )
    return tk


def main(argv: list[str] | None = None) -> None:
    """Serve the file tools over MCP: ``python -m toolkits.filesystem DIR`` (or ``--root DIR``)."""
    from toolkits._cli import add_root_arguments, base_parser, root_from_args, serve_from_args

    parser = base_parser(
        "toolkits.filesystem", "Serve agentkit's file tools (confined to --root) over MCP."
    )
    add_root_arguments(parser, "directory the tools may access")
    parser.add_argument("--read-only", action="store_true", help="no write_file/edit_file")
    args = parser.parse_args(argv)
    args.root = root_from_args(parser, args)
    serve_from_args(
        parser,
        args,
        lambda: toolkit(args.root, read_only=args.read_only),
        name="agentkit-filesystem",
    )


if __name__ == "__main__":
    main()

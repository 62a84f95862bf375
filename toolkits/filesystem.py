"""File tools confined to one root directory: read, write, edit, list, glob, grep.

Every path is resolved to its canonical form (symlinks included) and refused if it lands
outside the root, so ``../``, absolute paths and symlinks pointing elsewhere are all refused
by the same check. Relative paths are relative to the root; absolute paths are accepted only
inside it. Binary files are refused with a message; text that is not valid UTF-8 is shown with
replacement characters (and refused by ``edit_file``, which must not corrupt it).

Use it locally::

    from toolkits import filesystem
    toolkit = filesystem.toolkit("/path/to/project")

or serve it over MCP: ``python -m toolkits.filesystem --root /path/to/project``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import anyio.to_thread

from agentkit.tools import Toolkit
from agentkit.tools.annotations import annotate
from toolkits._common import display_path, looks_binary, resolve_inside, target_toolkit

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

    def _resolve(self, path: str) -> Path:
        return resolve_inside(self.root, path if path else ".")

    def _show(self, path: Path) -> str:
        return display_path(self.root, path)

    def _read_file(self, path: str, offset: int, limit: int) -> str:
        if offset < 1:
            raise ValueError("offset must be >= 1 (line numbers start at 1)")
        if limit < 1:
            raise ValueError("limit must be >= 1")
        target = self._resolve(path)
        with _open_regular(target, self._show(target)) as fh:
            if looks_binary(fh.read(_SNIFF_BYTES)):
                size = os.fstat(fh.fileno()).st_size
                raise ValueError(f"{self._show(target)} is a binary file ({size} bytes)")
            fh.seek(0)
            return self._read_lines(fh, self._show(target), offset, limit)

    def _read_lines(self, fh: BinaryIO, shown: str, offset: int, limit: int) -> str:
        lines: list[str] = []
        used = 0
        lineno = 0
        for lineno, (raw, cut) in enumerate(_iter_lines(fh, self.max_line_chars * 4), start=1):
            if lineno < offset:
                continue
            # At least one line always comes back, or the model would be told to retry the
            # very offset it asked for.
            if len(lines) >= limit or (lines and used + len(raw) > self.max_read_bytes):
                return "".join(lines) + (
                    f"[... more lines follow; call read_file with offset={lineno} to continue]"
                )
            lines.append(self._decode_line(raw, cut))
            used += len(raw)
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
        data = content.encode("utf-8")
        if len(data) > self.max_write_bytes:
            raise ValueError(
                f"content is {len(data)} bytes; the limit is {self.max_write_bytes} bytes"
            )
        target = self._resolve(path)
        if target == self.root or target.is_dir():
            raise IsADirectoryError(f"{self._show(target)} is a directory")
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(target, data)
        verb = "Overwrote" if existed else "Created"
        return f"{verb} {self._show(target)} ({len(data)} bytes)"

    def _edit_file(self, path: str, old: str, new: str, replace_all: bool) -> str:
        if not old:
            raise ValueError("old_string is empty; use write_file to create or replace a file")
        if old == new:
            raise ValueError("old_string and new_string are identical; nothing to change")
        target = self._resolve(path)
        shown = self._show(target)
        with _open_regular(target, shown) as fh:
            data = fh.read(self.max_write_bytes + 1)
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
        _atomic_write(target, out)
        return f"Replaced {count if replace_all else 1} occurrence(s) in {shown}"

    def _list_directory(self, path: str) -> str:
        target = self._resolve(path)
        if not target.is_dir():
            raise NotADirectoryError(f"{self._show(target)} is not a directory (or does not exist)")
        with os.scandir(target) as it:
            entries = sorted(it, key=lambda e: e.name)
        lines = [_describe_entry(entry) for entry in entries[: self.max_entries]]
        if len(entries) > self.max_entries:
            lines.append(f"[... {len(entries) - self.max_entries} more entries not shown]")
        header = f"{self._show(target)}/ ({len(entries)} entries)"
        return "\n".join([header, *lines])

    def _glob(self, pattern: str, path: str) -> str:
        if not pattern or "\x00" in pattern:
            raise ValueError("pattern must be a non-empty glob such as '**/*.py'")
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise PermissionError("the glob pattern must be relative and may not contain '..'")
        base = self._resolve(path)
        regex = _glob_regex(pattern)
        found: list[str] = []
        for scanned, (file, _real) in enumerate(self._walk_files(base), start=1):
            if scanned > self.max_files_scanned:
                found.append(f"[stopped after scanning {self.max_files_scanned} files]")
                break
            if regex.fullmatch(file.relative_to(base).as_posix()):
                found.append(self._show(file))
                if len(found) >= self.max_entries:
                    found.append(f"[stopped at {self.max_entries} results]")
                    break
        return "\n".join(found) if found else f"No files match {pattern!r}"

    def _grep(
        self,
        pattern: str,
        path: str,
        include: str | None,
        ignore_case: bool,
        max_matches: int | None,
    ) -> str:
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        limit = max(1, min(max_matches or self.max_matches, self.max_matches))
        base = self._resolve(path)
        files = iter([(base, base)]) if base.is_file() else self._walk_files(base)
        matches: list[str] = []
        for scanned, (file, real) in enumerate(files, start=1):
            if scanned > self.max_files_scanned:
                matches.append(f"[stopped after scanning {self.max_files_scanned} files]")
                break
            if include and not fnmatch.fnmatch(file.name, include):
                continue
            if self._grep_file(self._show(file), real, regex, matches, limit):
                matches.append(f"[stopped at {limit} matches]")
                break
        return "\n".join(matches) if matches else f"No matches for {pattern!r}"

    def _grep_file(
        self, shown: str, real: Path, regex: re.Pattern[str], out: list[str], limit: int
    ) -> bool:
        """Append matches of one file to ``out``; True once ``limit`` is reached."""
        try:
            with _open_regular(real, shown) as fh:
                if os.fstat(fh.fileno()).st_size > self.max_grep_file_bytes:
                    return False
                if looks_binary(fh.read(_SNIFF_BYTES)):
                    return False
                fh.seek(0)
                for lineno, (raw, _cut) in enumerate(_iter_lines(fh, 4096), start=1):
                    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if regex.search(line):
                        out.append(f"{shown}:{lineno}: {line[:300]}")
                        if len(out) >= limit:
                            return True
        except OSError:  # unreadable, vanished, or a symlink swapped in meanwhile: skip it
            return False
        return False

    def _walk_files(self, base: Path) -> Iterator[tuple[Path, Path]]:
        """``(path, canonical path)`` of regular files under ``base``, confined to the root.

        Sorted; symlinked directories are not descended into; a symlinked file counts only
        if its target is inside the root.
        """
        if not base.is_dir():
            raise NotADirectoryError(f"{self._show(base)} is not a directory (or does not exist)")
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in self.ignored_dirs)
            for name in sorted(filenames):
                file = Path(dirpath, name)
                real = Path(os.path.realpath(file))
                if real.is_relative_to(self.root) and real.is_file():
                    yield file, real


def _iter_lines(fh: BinaryIO, max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Yield each line (at most ``max_bytes`` of it) and whether it was cut.

    Reading is bounded: a gigabyte without a newline is skipped through in blocks, never
    held in memory.
    """
    while True:
        raw = fh.readline(max_bytes)
        if not raw:
            return
        if raw.endswith(b"\n") or len(raw) < max_bytes:
            yield raw, False
            continue
        while (rest := fh.readline(64 * 1024)) and not rest.endswith(b"\n"):
            pass
        yield raw, True


def _describe_entry(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return f"{entry.name} -> {os.readlink(entry.path)}"
        if entry.is_dir():
            return f"{entry.name}/"
        return f"{entry.name}  ({entry.stat().st_size} bytes)"
    except OSError:
        return f"{entry.name}  (unreadable)"


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob to a regex over POSIX relative paths.

    ``**`` as a whole segment matches any number of directories; ``*``, ``?`` and ``[...]``
    match within one name (as in shells, unlike ``fnmatch`` where ``*`` crosses ``/``).
    """
    out: list[str] = []
    segments = pattern.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment_regex(segment))
        if not last:
            out.append("/")
    return re.compile("".join(out), re.DOTALL)


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1 : end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace("\\-", "-")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@contextlib.contextmanager
def _open_regular(path: Path, shown: str) -> Iterator[BinaryIO]:
    """Open a regular file for binary reading without following a final symlink.

    ``resolve_inside`` already canonicalised the path; ``O_NOFOLLOW`` closes the window in
    which the last component could be swapped for a symlink between the check and the open.
    ``O_NONBLOCK`` keeps a FIFO from blocking the open forever (it is then refused as not a
    regular file); it changes nothing for regular files.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{shown} does not exist") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{shown} is a directory; use list_directory") from None
    except OSError as exc:
        raise OSError(f"cannot open {shown}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{shown} is a directory; use list_directory")
        raise ValueError(f"{shown} is not a regular file (a device, FIFO or socket)")
    with os.fdopen(fd, "rb") as fh:
        yield fh


def _atomic_write(target: Path, data: bytes) -> None:
    """Write via a temporary file and ``os.replace``: readers never see a half-written file."""
    mode = None
    if target.exists():
        mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
    group_name: str = "basic",
    into: Toolkit | None = None,
    **limits: Any,
) -> Toolkit:
    """Build a Toolkit with the file tools confined to ``root``.

    Args:
        root: Directory the tools may touch.
        read_only: Register only ``read_file``, ``list_directory``, ``glob`` and ``grep``.
        approve_writes: Register ``write_file`` and ``edit_file`` with ``requires_approval``.
        group_name: Tool group to register the tools in.
        into: Register into this Toolkit instead of a new one.
        **limits: Keyword arguments for :class:`FileSystem` (``max_read_bytes``...).

    Returns:
        The Toolkit holding the tools.
    """
    fs = FileSystem(root, **limits)
    tk = target_toolkit(into, group_name, f"Read, write and search files under {fs.root}")
    readers: list[Callable[..., Any]] = [fs.read_file, fs.list_directory, fs.glob, fs.grep]
    for reader in readers:
        tool = tk.register_tool_function(reader, group_name=group_name)
        annotate(tool, title=_TITLES[tool.name], read_only=True, open_world=False)
    if not read_only:
        writers: list[Callable[..., Any]] = [fs.write_file, fs.edit_file]
        for writer in writers:
            tool = tk.register_tool_function(
                writer, group_name=group_name, requires_approval=approve_writes
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
    """Serve the file tools over MCP: ``python -m toolkits.filesystem --root DIR``."""
    from toolkits._cli import base_parser, serve_from_args

    parser = base_parser(
        "toolkits.filesystem", "Serve agentkit's file tools (confined to --root) over MCP."
    )
    parser.add_argument("--root", required=True, help="directory the tools may access")
    parser.add_argument("--read-only", action="store_true", help="no write_file/edit_file")
    args = parser.parse_args(argv)
    serve_from_args(
        parser,
        args,
        lambda: toolkit(args.root, read_only=args.read_only),
        name="agentkit-filesystem",
    )


if __name__ == "__main__":
    main()

"""``JSONSession``: one JSON file per session in a directory, written atomically.

Session ids become file names through a reversible encoding that cannot leave the directory:
lowercase letters, digits, ``_`` and ``-`` are kept; an uppercase letter ``X`` becomes
``^x`` (so ids that differ only in case stay distinct on case-insensitive file systems);
every other character, ``.`` and ``/`` included, becomes ``%XX`` per UTF-8 byte. So
``"../etc/passwd"`` is stored as ``%2E%2E%2Fetc%2Fpasswd.json`` inside the directory.

A write goes to a temporary file in the same directory, is flushed and fsynced, then
``os.replace``d over the target (and the directory is fsynced): a reader sees the old state
or the new one, never a torn file, and a crash cannot lose both.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import anyio.to_thread

from agentkit.exceptions import StateError
from agentkit.session.base import Session

__all__ = ["JSONSession", "decode_file_stem", "encode_file_stem"]

_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_SUFFIX = ".json"
_MAX_STEM_BYTES = 240  # file names are limited to 255 bytes on common file systems


def encode_file_stem(session_id: str) -> str:
    """Encode a session id into a safe, reversible file name stem (see the module docs).

    Raises:
        ValueError: if the encoded name would be too long for a file system.
    """
    parts: list[str] = []
    for char in session_id:
        if char in _KEEP:
            parts.append(char)
        elif "A" <= char <= "Z":
            parts.append("^" + char.lower())
        else:
            parts.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    stem = "".join(parts)
    if len(stem) > _MAX_STEM_BYTES:
        raise ValueError(
            f"session id {session_id[:40]!r}... is too long for a file name once encoded "
            f"({len(stem)} > {_MAX_STEM_BYTES} bytes); use a shorter id"
        )
    return stem


def decode_file_stem(stem: str) -> str | None:
    """Invert :func:`encode_file_stem`; None if ``stem`` is not one of its outputs."""
    out = bytearray()
    i = 0
    while i < len(stem):
        char = stem[i]
        if char in _KEEP:
            out += char.encode()
            i += 1
        elif char == "^" and i + 1 < len(stem) and "a" <= stem[i + 1] <= "z":
            out += stem[i + 1].upper().encode()
            i += 2
        elif char == "%" and _is_hex(stem[i + 1 : i + 3]):
            out.append(int(stem[i + 1 : i + 3], 16))
            i += 3
        else:
            return None
    try:
        session_id = out.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Only canonical encodings name sessions (e.g. "%61" is not the encoding of "a").
    return session_id if session_id and encode_file_stem(session_id) == stem else None


def _is_hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789ABCDEF" for c in pair)


def _fsync_directory(directory: Path) -> None:
    """Persist a rename (POSIX only; Windows has no directory handles to fsync)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JSONSession(Session):
    """Sessions stored as ``<encoded id>.json`` files in ``directory``.

    File I/O runs in worker threads, so the event loop never blocks on the disk. Concurrent
    saves of one id are safe (the last ``os.replace`` wins; no file is ever half-written).
    Files are created with mode 0600: a conversation is private data.

    Args:
        directory: Where the files live; created (with parents) if missing.
        indent: Pretty-print the files with this indent (None: compact).
    """

    backend = "JSON"

    def __init__(self, directory: str | os.PathLike[str], *, indent: int | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.indent = indent

    def path_for(self, session_id: str) -> Path:
        """The file a session id is stored in (always directly inside ``directory``)."""
        return self.directory / (encode_file_stem(session_id) + _SUFFIX)

    async def _write(self, session_id: str, text: str) -> None:
        path = self.path_for(session_id)
        await anyio.to_thread.run_sync(self._write_sync, path, text)

    def _write_sync(self, path: Path, text: str) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_directory(self.directory)

    async def _read(self, session_id: str) -> str | None:
        path = self.path_for(session_id)
        return await anyio.to_thread.run_sync(self._read_sync, path, session_id)

    @staticmethod
    def _read_sync(path: Path, session_id: str) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise StateError(f"JSON session {session_id!r} is not UTF-8 text: {exc}") from exc

    async def _exists(self, session_id: str) -> bool:
        path = self.path_for(session_id)
        return await anyio.to_thread.run_sync(path.is_file)

    async def _delete(self, session_id: str) -> bool:
        path = self.path_for(session_id)

        def unlink() -> bool:
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            return True

        return await anyio.to_thread.run_sync(unlink)

    async def _list_ids(self) -> list[str]:
        def scan() -> list[str]:
            ids: list[str] = []
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if not entry.name.endswith(_SUFFIX) or not entry.is_file():
                        continue
                    session_id = decode_file_stem(entry.name[: -len(_SUFFIX)])
                    if session_id is not None:  # skip foreign files and temporaries
                        ids.append(session_id)
            return ids

        return await anyio.to_thread.run_sync(scan)

    def __repr__(self) -> str:
        return f"JSONSession({str(self.directory)!r})"

"""``JSONSession``: one JSON file per session in a directory, written atomically.

Session ids become file names through a reversible encoding that cannot leave the directory:
lowercase letters, digits, ``_`` and ``-`` are kept; an uppercase letter ``X`` becomes
``^x`` (so ids that differ only in case stay distinct on case-insensitive file systems);
every other character, ``.`` and ``/`` included, becomes ``%XX`` per UTF-8 byte. So
``"../etc/passwd"`` is stored as ``%2E%2E%2Fetc%2Fpasswd.json`` inside the directory.

A write goes to a temporary file in the same directory, is flushed and fsynced, then
``os.replace``d over the target (and the directory is fsynced, unless the save was asked
for with ``durable=False``): a reader sees the old state
or the new one, never a torn file, and a crash cannot lose both.

A file holds ``{"agentkit_session": 1, "version": N, "updated_at": ..., "title": ...,`` on its
first line and ``"state": {...}}`` after it, so ``list_sessions`` reads the first line of each
file, never a state (a file holding a bare state object, as written before versions existed,
reads as version 1). A file is rewritten whole on every save: an atomic rename is this store's
only transaction, so it cannot write only the messages that changed the way the database
stores do (``Session.splits``). A failed write (a full disk, a read-only directory) raises
``SessionError`` and leaves the stored file as it was; so does the constructor on a directory
it cannot create or write. Saves in one
directory take an exclusive ``flock`` on ``.agentkit.lock`` around "read the version, write
the temporary file, rename it", which makes the version check atomic across threads and
processes (POSIX; without ``fcntl`` the check is best effort). A writer killed mid-save
leaves its temporary file behind: opening a ``JSONSession`` removes such files when no save
is in flight (the lock is free), so a live writer's file is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio.to_thread

from agentkit.exceptions import SessionConflictError, SessionError, StateError
from agentkit.session._base import EncodedState, Session, SessionInfo

try:
    import fcntl

    _HAVE_FLOCK = True
except ImportError:  # pragma: no cover - Windows: no flock; the version check is best effort
    _HAVE_FLOCK = False

__all__ = ["JSONSession", "decode_file_stem", "encode_file_stem"]

_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_SUFFIX = ".json"
_LOCK_NAME = ".agentkit.lock"
_TMP_PREFIX, _TMP_SUFFIX = ".", ".tmp"
_FORMAT_KEY = "agentkit_session"
_FORMAT = 1  # the file layout's version (the state inside carries its own)
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


@contextlib.contextmanager
def _locked(directory: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold the directory's exclusive save lock; yield False if ``blocking`` and it is busy."""
    if not _HAVE_FLOCK:  # pragma: no cover - see the module docs
        yield True
        return
    fd = os.open(directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True  # closing the descriptor releases the lock (and so does dying)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer), or raise."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _header(version: int, title: str | None) -> str:
    """The file's first line (JSON text of its own keeps newlines escaped: one line)."""
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    fields = {_FORMAT_KEY: _FORMAT, "version": version, "updated_at": now, "title": title}
    return json.dumps(fields, ensure_ascii=False)[:-1] + ",\n"


def _parse_header(line: str, session_id: str) -> SessionInfo | None:
    """The metadata on a file's first line; None if the file has no such line (old format)."""
    if not line.startswith(f'{{"{_FORMAT_KEY}":') or not line.endswith(",\n"):
        return None
    try:
        fields = json.loads(line[:-2] + "}")
        version, title = fields["version"], fields["title"]
        updated = datetime.fromisoformat(fields["updated_at"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(version, int) or not (title is None or isinstance(title, str)):
        return None
    return SessionInfo(session_id, version, updated, title)


def _parse(text: str, session_id: str) -> tuple[dict[str, object] | str, int]:
    """Split a file's text into (state, version); a pre-version bare state is version 1."""
    try:
        data = json.loads(text)
    except ValueError:
        return text, 1  # the base class reports the corrupt JSON
    if isinstance(data, dict) and _FORMAT_KEY in data:
        if data[_FORMAT_KEY] != _FORMAT:  # a file layout only a newer agentkit knows
            raise SessionError(
                f"JSON session {session_id!r} has file format {data[_FORMAT_KEY]!r}: this "
                f"agentkit reads format {_FORMAT} (a newer agentkit wrote it? upgrade agentkit)"
            )
        version, state = data.get("version"), data.get("state")
        if not isinstance(version, int) or version < 1 or not isinstance(state, dict):
            raise StateError(f"JSON session {session_id!r} has a malformed version header")
        return state, version
    return text, 1


class JSONSession(Session):
    """Sessions stored as ``<encoded id>.json`` files in ``directory``.

    File I/O runs in worker threads, so the event loop never blocks on the disk. Saves are
    atomic and versioned (see the module docs); files are created with mode 0600: a
    conversation is private data.

    Args:
        directory: Where the files live; created (with parents) if missing. Temporary files
            left by writers that died mid-save are removed.
        indent: Pretty-print the files with this indent (None: compact).

    Raises:
        SessionError: if the directory cannot be created or written.
    """

    backend = "JSON"

    def __init__(self, directory: str | os.PathLike[str], *, indent: int | None = None) -> None:
        self.directory = Path(directory)
        self.indent = indent
        with self._storage("open", None):
            self.directory.mkdir(parents=True, exist_ok=True)
            # Opening the save lock (in remove_stale_temporaries) needs a writable directory:
            # a read-only one fails here rather than at the first save.
            self.remove_stale_temporaries()

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files of saves that died; return how many were removed.

        Runs only when no save is in flight in the directory (the save lock is free):
        every temporary file is then a leftover. Called on open.
        """
        removed = 0
        with _locked(self.directory, blocking=False) as free:
            if not free:
                return 0
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(_TMP_PREFIX) and name.endswith(_TMP_SUFFIX):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.path)
                            removed += 1
        return removed

    @property
    def store_key(self) -> str:
        """The directory's resolved path."""
        return f"json:{self.directory.resolve()}"

    def path_for(self, session_id: str) -> Path:
        """The file a session id is stored in (always directly inside ``directory``)."""
        return self.directory / (encode_file_stem(session_id) + _SUFFIX)

    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        path = self.path_for(session_id)
        return await anyio.to_thread.run_sync(
            self._write_sync, path, session_id, state.head, expected, title, durable
        )

    def _write_sync(
        self,
        path: Path,
        session_id: str,
        text: str,
        expected: int | None,
        title: str | None,
        durable: bool = True,
    ) -> int:
        with _locked(self.directory):
            current = self._read_sync(path, session_id)
            actual = 0 if current is None else current[1]
            if expected is not None and expected != actual:
                raise SessionConflictError(session_id, expected, actual, self.backend)
            if title is None and current is not None:
                title = self._stored_title(path)
            version = actual + 1
            self._replace(path, f'{_header(version, title)}"state":{text}}}', durable)
        return version

    @staticmethod
    def _stored_title(path: Path) -> str | None:
        with path.open(encoding="utf-8") as handle:
            info = _parse_header(handle.readline(), "-")
        return None if info is None else info.title

    def _replace(self, path: Path, text: str, durable: bool = True) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)
        try:
            try:
                # Unbuffered: an error (ENOSPC, EIO) surfaces from this write or the fsync,
                # never from a flush at close that nothing would check.
                _write_all(fd, text.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        # The file's bytes are always fsynced before the rename, so after a power cut the
        # name holds the old state or the new one, never a torn file. Not durable: the
        # rename itself may be undone (the next durable write's directory fsync keeps it).
        if durable:
            _fsync_directory(self.directory)

    async def _read(
        self, session_id: str
    ) -> tuple[dict[str, object] | str, int, dict[str, list[str]]] | None:
        path = self.path_for(session_id)
        found = await anyio.to_thread.run_sync(self._read_sync, path, session_id)
        return None if found is None else (*found, {})

    @staticmethod
    def _read_sync(path: Path, session_id: str) -> tuple[dict[str, object] | str, int] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise StateError(f"JSON session {session_id!r} is not UTF-8 text: {exc}") from exc
        return _parse(text, session_id)

    async def _exists(self, session_id: str) -> bool:
        path = self.path_for(session_id)
        return await anyio.to_thread.run_sync(path.is_file)

    async def _delete(self, session_id: str) -> bool:
        path = self.path_for(session_id)

        def unlink() -> bool:
            with _locked(self.directory):
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

    async def _list_infos(self, prefix: str) -> list[SessionInfo]:
        def scan() -> list[SessionInfo]:
            infos: list[SessionInfo] = []
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if not entry.name.endswith(_SUFFIX) or not entry.is_file():
                        continue
                    session_id = decode_file_stem(entry.name[: -len(_SUFFIX)])
                    if session_id is None or not session_id.startswith(prefix):
                        continue
                    info = self._info_sync(Path(entry.path), session_id)
                    if info is not None:
                        infos.append(info)
            return infos

        return await anyio.to_thread.run_sync(scan)

    def _info_sync(self, path: Path, session_id: str) -> SessionInfo | None:
        try:
            with path.open(encoding="utf-8") as handle:
                line = handle.readline()
                mtime = os.fstat(handle.fileno()).st_mtime
        except FileNotFoundError:  # deleted since the scan
            return None
        info = _parse_header(line, session_id)
        if info is not None:
            return info
        # A file from before the header line: parse it whole (once; its next save adds it).
        found = self._read_sync(path, session_id)
        version = 1 if found is None else found[1]
        return SessionInfo(session_id, version, datetime.fromtimestamp(mtime, UTC), None)

    def __repr__(self) -> str:
        return f"JSONSession({str(self.directory)!r})"

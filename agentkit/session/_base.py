"""The ``Session`` ABC: save and load an agent's state under a session id.

A session store only moves JSON text: the agent (or anything with ``state_dict()`` /
``load_state_dict()``) decides what its state is. Backends implement small primitives
(``_write``, ``_read``, ``_delete``, ``_list_ids``) and inherit the public API, the JSON
encoding, its error handling and the version tracking below.

``load`` returns ``False`` when the session does not exist (the agent is left untouched),
so "resume if saved, else start fresh" is one ``if``; a stored state that cannot be decoded
raises :class:`~agentkit.exceptions.StateError` naming the session and the backend.

Optimistic concurrency: every stored session has a version (1 after its first save, +1 per
save; 0 means "does not exist"). ``load(session_id, agent)`` records the version it read in
``agent.session_versions`` (a dict the saved object owns, keyed by (store, session id)), and
``save(session_id, agent)`` writes only if the store still holds that version; otherwise it
raises :class:`~agentkit.exceptions.SessionConflictError` and writes nothing, so a worker
never silently overwrites another worker's newer state. A ``load`` that finds nothing records
version 0, so two workers that both start a new session cannot both create it. "Store" means
the physical store (the directory, database file, URL + table or prefix), not the Python
object: two ``SQLiteSession`` objects on one file share the tracking. ``ReActAgent`` keeps
the versions on its conversation (``agent.copy()`` starts untracked, as a new conversation),
``StateGroup`` on itself; an object of your own opts in with a ``session_versions = {}``
attribute (not part of its state). A save with nothing tracked (the object has no
``session_versions``, or was never loaded or saved through this store under this id) is a
plain overwrite, as is ``save(..., force=True)``.

Saves write what changed where the store allows it: a store with ``splits`` (SQLite,
Postgres, Redis) keeps a state's message logs (every list of objects under ``"messages"``)
one item per row beside the state's *head*, and writes only the items a save changed, in the
transaction that checks the version (see ``EncodedState`` and ``KnownItems``); loading puts
them back. ``JSONSession`` writes whole files.

Listing: ``list_sessions`` pages through the stored sessions' metadata (id, version, time of
the last save, the ``title`` given to ``save``), most recently saved first, without reading a
single state.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
import secrets
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from agentkit._formats import Migration, upgrade
from agentkit.exceptions import AgentkitError, SessionConflictError, SessionError, StateError

__all__ = [
    "EncodedState",
    "Session",
    "SessionConflictError",
    "SessionInfo",
    "SessionPage",
    "StateGroup",
    "Stateful",
    "check_session_id",
]

GROUP_SCHEMA_VERSION = 1
"""The version of the :class:`StateGroup` layout this agentkit writes (``schema_version``).

A group state without it (written before 0.2.0 was released) is version 1.
"""

GROUP_MIGRATIONS: dict[int, Migration] = {}
"""``{n: fn}``: ``fn`` turns a version-``n`` group state into a version-``n + 1`` one."""

MAX_SESSION_ID_LENGTH = 200
"""Longest accepted session id, in characters (keeps encoded file names under 255 bytes)."""

MAX_TITLE_LENGTH = 1000
"""Longest accepted session title, in characters."""

MAX_PAGE_SIZE = 1000
"""Most sessions one ``list_sessions`` call returns."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One stored session's metadata, as ``Session.list_sessions`` returns it.

    Attributes:
        session_id: The session id.
        version: Its stored version (see the module docs).
        updated_at: When it was last saved (timezone-aware; the epoch for entries saved
            before agentkit recorded it).
        title: The title given to its last save that had one (None: never given).
    """

    session_id: str
    version: int
    updated_at: datetime
    title: str | None


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of ``Session.list_sessions``.

    Attributes:
        sessions: Most recently saved first.
        next_cursor: Pass it as ``cursor`` for the next page; None on the last page.
    """

    sessions: list[SessionInfo]
    next_cursor: str | None


def _encode_cursor(info: SessionInfo) -> str:
    raw = json.dumps([info.updated_at.isoformat(), info.session_id], ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        updated, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        when = datetime.fromisoformat(updated)
        if when.tzinfo is None:
            raise ValueError("naive time")
        return when, check_session_id(session_id)
    except (ValueError, TypeError, UnicodeError, binascii.Error, AttributeError):
        raise ValueError(f"not a cursor from list_sessions: {str(cursor)[:80]!r}") from None


def _check_title(title: str | None) -> str | None:
    if title is None:
        return None
    if not isinstance(title, str):
        raise TypeError(f"a session title must be a str or None, got {type(title).__name__}")
    if len(title) > MAX_TITLE_LENGTH:
        raise ValueError(f"a session title must be at most {MAX_TITLE_LENGTH} characters")
    try:
        title.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"a session title must be valid Unicode text: {title!r}") from None
    return title


@runtime_checkable
class Stateful(Protocol):
    """What a session can save: an agent, a toolkit, a :class:`StateGroup`..."""

    def state_dict(self) -> dict[str, object]:
        """Return a JSON-safe snapshot of the object's state."""
        ...

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Replace the object's state with ``state`` (raising ``StateError`` if invalid)."""
        ...


# C0 controls and DEL: one regex scan in C (a generator over the characters cost every store
# call about 40 Python steps; a served turn makes three).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_session_id(session_id: object) -> str:
    """Validate a session id: a non-empty ``str`` of at most 200 characters.

    Control characters (NUL included) and lone surrogates are rejected; any other character
    is allowed: each backend stores ids so that they cannot collide or escape its namespace
    (``JSONSession`` percent-encodes them into file names).

    Args:
        session_id: The candidate id.

    Returns:
        The id, unchanged.

    Raises:
        TypeError: if it is not a string.
        ValueError: if it is empty or too long.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"a session id must be a str, got {type(session_id).__name__}")
    if not session_id:
        raise ValueError("a session id must not be empty")
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise ValueError(
            f"a session id must be at most {MAX_SESSION_ID_LENGTH} characters, "
            f"got {len(session_id)}"
        )
    if _CONTROL.search(session_id):
        raise ValueError(f"a session id must not contain control characters: {session_id!r}")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"a session id must be valid Unicode text: {session_id!r}") from None
    return session_id


class StateGroup:
    """Several stateful objects saved and loaded together, as one session.

    Loading is all-or-nothing: if any member rejects its state, the members already loaded
    are restored to what they were, and the error propagates.

    Args:
        members: Key -> object with ``state_dict()`` / ``load_state_dict()``.

    Example:
        >>> await session.save("debate-7", StateGroup({"alice": alice, "bob": bob}))
    """

    def __init__(self, members: Mapping[str, Stateful]) -> None:
        self.members = dict(members)
        self.session_versions: dict[tuple[str, str], int] = {}  # see the module docs

    def state_dict(self) -> dict[str, object]:
        """Return ``{"schema_version": 1, "members": {key: member_state}}``."""
        return {
            "schema_version": GROUP_SCHEMA_VERSION,
            "members": {key: m.state_dict() for key, m in self.members.items()},
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Load every member's state, or none of them.

        Raises:
            StateError: if a member's state is missing, the shape is wrong, or the group
                layout is from a newer agentkit.
        """
        state = upgrade(
            state,
            what="StateGroup state",
            key="schema_version",
            current=GROUP_SCHEMA_VERSION,
            migrations=GROUP_MIGRATIONS,
            missing=1,
        )
        states = state.get("members")
        if not isinstance(states, dict):
            raise StateError("a StateGroup state needs a 'members' dict")
        missing = sorted(set(self.members) - set(states))
        if missing:
            raise StateError(f"the saved state has no entry for {missing}")
        backups: list[tuple[Stateful, dict[str, object]]] = []
        try:
            for key, member in self.members.items():
                backup = member.state_dict()
                member.load_state_dict(states[key])
                backups.append((member, backup))
        except Exception:
            for member, backup in reversed(backups):
                member.load_state_dict(backup)
            raise


def _dumps(value: object, indent: int | None) -> str:
    separators = (",", ":") if indent is None else None
    try:
        return json.dumps(
            value, ensure_ascii=False, allow_nan=False, indent=indent, separators=separators
        )
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not JSON-safe: {exc}") from exc
    except RecursionError as exc:
        raise StateError("the state is not JSON-safe: it is nested too deeply") from exc


LOG_KEY = "messages"
"""The key whose list of objects is a *log*: stored item by item where the store allows it."""

_MARKER = "$items"  # the head's stand-in for a log: {"$items": <length>}


_CONTAINERS = (dict, list)


def _types(items: list[object]) -> set[type]:
    """The distinct types of ``items``, found in C (``map``), not a Python step per item."""
    return set(map(type, items))


def _is_log(value: object) -> bool:
    return type(value) is list and bool(value) and _types(value) == {dict}


def _split(value: object, path: tuple[str | int, ...], logs: dict[str, list[object]]) -> object:
    """``value`` with every log under it replaced by a marker (the logs go into ``logs``).

    Containers without a log below them are returned as they are (never copied), so the
    walk costs a visit of the state outside its logs; a log's items are not entered (a log
    inside an item stays in the item's text).
    """
    if isinstance(value, dict):
        out: dict[object, object] | None = None
        for key, child in value.items():
            if type(key) is not str:  # json turns it into a string: no path to it
                continue
            if key == LOG_KEY and _is_log(child):
                logs[json.dumps((*path, key), ensure_ascii=False, separators=(",", ":"))] = child
                new: object = {_MARKER: len(child)}
            elif isinstance(child, _CONTAINERS):
                new = _split(child, (*path, key), logs)
            else:
                continue
            if new is not child:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        if not any(issubclass(t, _CONTAINERS) for t in _types(value)):
            return value  # scalars only (a served thread's aliases: up to 2000 ids)
        copied: list[object] | None = None
        for i, child in enumerate(value):
            if not isinstance(child, _CONTAINERS):
                continue
            new = _split(child, (*path, i), logs)
            if new is not child:
                if copied is None:
                    copied = list(value)
                copied[i] = new
        return value if copied is None else copied
    return value


# CPython's C encoder (what json.dumps runs); absent where the C accelerator is.
_C_ENCODER: Callable[..., Callable[[object, int], Iterable[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)


def _dumps_each(items: list[object], indent: int | None) -> list[str]:
    """Each item's JSON text, as ``_dumps`` writes it.

    Compact, through one C encoder for the whole list: ``json.dumps`` per item would build
    an encoder per item, 2.2 times the CPU of one ``dumps`` of the list; this costs about
    1.2 times it (docs/benchmarks.md, round 7).
    """
    if indent is not None or _C_ENCODER is None:  # no C encoder to reuse
        return [_dumps(item, indent) for item in items]
    encode = _C_ENCODER(
        {},  # markers: cycle detection, as dumps does
        _no_default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # indent
        ":",
        ",",
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
    try:
        return ["".join(encode(item, 0)) for item in items]
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not JSON-safe: {exc}") from exc
    except RecursionError as exc:
        raise StateError("the state is not JSON-safe: it is nested too deeply") from exc


def _no_default(value: object) -> object:
    """What ``json.dumps`` does with a value it cannot encode."""
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class EncodedState:
    """A state as a store receives it: a *head* and, where the store splits, its *logs*.

    Every non-empty list of objects stored under a ``"messages"`` key (at any depth: an
    agent's ``memory.messages``, a served thread's ``agent.memory.messages``, a
    ``StateGroup`` member's) is a log: in ``head`` its value is ``{"$items": <length>}``,
    and each of its items is compact JSON text of its own in ``logs`` (keyed by the log's
    path, a JSON array of the keys and indexes from the root). A store that keeps items as
    rows writes only the items that changed (a turn appends a few messages; a lease write
    changes none), found by comparing with the items it last wrote or read
    (``changes_since``, see ``KnownItems``) or with the stored BLAKE2b-128 digests
    (``changes``). What puts a log back is the store's rows, not the marker: a state that
    itself holds ``{"$items": 3}`` somewhere round-trips unchanged. A store that writes
    whole texts (``splits`` False) gets the whole state's text as ``head`` and no logs.

    Attributes:
        head: JSON text of the state, its logs replaced by markers.
        logs: Log path -> the items' JSON texts, in order.
    """

    __slots__ = ("_digests", "head", "logs")

    def __init__(self, state: dict[str, object], indent: int | None, *, split: bool) -> None:
        if not isinstance(state, dict):
            raise TypeError(f"state_dict() must return a dict, got {type(state).__name__}")
        logs: dict[str, list[object]] = {}
        if split:
            try:
                head = _split(state, (), logs)
            except RecursionError as exc:
                raise StateError("the state is not JSON-safe: it is nested too deeply") from exc
        else:
            head = state
        self.head = _dumps(head, indent)
        self.logs = {path: _dumps_each(items, indent) for path, items in logs.items()}
        self._digests: dict[str, list[bytes]] | None = None

    @property
    def digests(self) -> dict[str, list[bytes]]:
        """Log path -> the items' digests, in order.

        Computed on first use: a save that compares with known items hashes only the items
        it writes.
        """
        if self._digests is None:
            self._digests = {path: [_digest(t) for t in texts] for path, texts in self.logs.items()}
        return self._digests

    def changes(
        self, stored: Mapping[tuple[str, int], bytes]
    ) -> tuple[list[tuple[str, int, bytes, str]], list[tuple[str, int]]]:
        """What a store holding items with the ``stored`` digests must write.

        Args:
            stored: ``(log path, index) -> digest`` of the items the store holds now.

        Returns:
            ``(upserts, cuts)``: the ``(log, index, digest, text)`` rows to write (new or
            changed), and ``(log, length)`` pairs: delete that log's items at ``index >=
            length`` (0 for a log the state no longer has).
        """
        upserts = [
            (path, i, digest, self.logs[path][i])
            for path, digests in self.digests.items()
            for i, digest in enumerate(digests)
            if stored.get((path, i)) != digest
        ]
        lengths: dict[str, int] = {}
        for path, i in stored:
            n = len(self.logs.get(path, ()))
            if i >= n:
                lengths[path] = n
        return upserts, sorted(lengths.items())

    def changes_since(
        self, known: Mapping[str, list[str]]
    ) -> tuple[list[tuple[str, int, bytes, str]], list[tuple[str, int]]]:
        """``changes`` for a store known to hold exactly the items ``known`` (log -> texts).

        Compares texts (a memcmp each), so only the items written are hashed.
        """
        upserts: list[tuple[str, int, bytes, str]] = []
        for path, texts in self.logs.items():
            old = known.get(path, ())
            upserts.extend(
                (path, i, _digest(text), text)
                for i, text in enumerate(texts)
                if i >= len(old) or old[i] != text
            )
        cuts = [
            (path, len(self.logs.get(path, ())))
            for path, old in known.items()
            if len(old) > len(self.logs.get(path, ()))
        ]
        return upserts, sorted(cuts)


class KnownItems:
    """The items a store object last wrote or read, per session: what a save compares with.

    Reading the stored digests costs a splitting store a pass over a row (or field) per
    message on every save, and hashing every item; a served thread saves three times a
    turn through one store object, which knows what it wrote last. An entry is the
    ``(version, gen, logs)`` a save wrote or a load read; ``gen`` is a token the store
    draws when it creates the session, so ``(version, gen)`` names one stored content even
    across a delete and a re-creation at the same version. A save uses an entry only after
    the store has checked, in the save's own transaction, that it still holds that
    ``(version, gen)``; otherwise it compares with the stored digests. So an entry can be
    stale (another worker saved since) but never wrong. Bounded: the least recently used
    sessions are forgotten.

    Args:
        size: Most sessions remembered.
    """

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[int, str, Mapping[str, list[str]]]] = OrderedDict()
        self._lock = threading.Lock()  # SQLite saves run in worker threads

    def get(self, session_id: str) -> tuple[int, str, Mapping[str, list[str]]] | None:
        """The entry for ``session_id``: ``(version, gen, logs)``, or None."""
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is not None:
                self._entries.move_to_end(session_id)
            return entry

    def put(
        self, session_id: str, version: int, gen: str | None, logs: Mapping[str, list[str]]
    ) -> None:
        """Remember what the store holds at ``(version, gen)`` (no ``gen``: forget it)."""
        with self._lock:
            if gen is None:  # a row from before gens: its next save draws one
                self._entries.pop(session_id, None)
                return
            self._entries[session_id] = (version, gen, logs)
            self._entries.move_to_end(session_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def drop(self, session_id: str) -> None:
        """Forget ``session_id`` (it was deleted, or a save failed midway)."""
        with self._lock:
            self._entries.pop(session_id, None)

    def valid(
        self, session_id: str, version: int, gen: str | None
    ) -> Mapping[str, list[str]] | None:
        """The known logs if the store holds ``(version, gen)`` as the entry says, else None."""
        entry = self.get(session_id)
        if entry is None or gen is None or entry[0] != version or entry[1] != gen:
            return None
        return entry[2]


def new_gen() -> str:
    """A fresh session generation token (see ``KnownItems``)."""
    return secrets.token_hex(8)


def group_items(rows: Iterable[tuple[str, int, str]], session_id: str) -> dict[str, list[str]]:
    """Stored item rows ``(log path, index, text)``, sorted by path then index, as logs.

    Raises:
        StateError: if a log's indexes are not 0, 1, 2... (a row is missing).
    """
    logs: dict[str, list[str]] = {}
    for path, index, text in rows:
        items = logs.setdefault(path, [])
        if index != len(items):
            raise StateError(f"session {session_id!r}: item {len(items)} of log {path} is missing")
        items.append(text)
    return logs


def _join(state: dict[str, object], logs: Mapping[str, list[str]]) -> None:
    """Put the stored logs back into the head ``state`` in place (see ``EncodedState``)."""
    for path_text, texts in logs.items():
        path = json.loads(path_text)
        parent: object = state
        for step in path[:-1]:
            parent = parent[step]  # type: ignore[index]
        marker = parent[path[-1]]  # type: ignore[index]
        if not (
            isinstance(marker, dict)
            and marker.keys() == {_MARKER}
            and type(marker[_MARKER]) is int
            and marker[_MARKER] == len(texts)
        ):
            raise ValueError(f"the head holds no marker for the {len(texts)} items of {path}")
        parent[path[-1]] = json.loads("[" + ",".join(texts) + "]")  # type: ignore[index]


class Session(ABC):
    """A store of agent states keyed by session id.

    Subclasses implement the four primitives on JSON text; everything public lives here.
    Sessions are async context managers (``close()`` on exit).
    """

    backend = "session"
    indent: int | None = None  # pretty-print stored JSON with this indent (None: compact)
    splits = False  # whether ``_write`` gets logs item by item (see ``EncodedState``)

    # -- public API --------------------------------------------------------------------
    @property
    def store_key(self) -> str:
        """Identity of the physical store (what version tracking is keyed on)."""
        return repr(self)

    async def save(
        self, session_id: str, agent: Stateful, *, force: bool = False, title: str | None = None
    ) -> int:
        """Save ``agent.state_dict()`` under ``session_id``; return the new version.

        Save between replies: a state taken while a reply is running reflects a half-done
        step (the agent's own ``state_dict`` decides what that means).

        Args:
            session_id: The session.
            agent: What to save.
            force: Overwrite whatever is stored, even a newer version.
            title: A short label kept beside the state for ``list_sessions`` (None: keep the
                stored one).

        Raises:
            SessionConflictError: the store holds a newer version than the one ``agent``
                was loaded at (or last saved as) through this store; nothing is written.
            StateError: if the state is not JSON-safe.
        """
        key = (self.store_key, check_session_id(session_id))
        expected = None if force else self._tracked(agent).get(key)
        version = await self.save_state(
            session_id, agent.state_dict(), expected_version=expected, title=title
        )
        self._track(agent, key, version)
        return version

    async def load(self, session_id: str, agent: Stateful) -> bool:
        """Load the state saved under ``session_id`` into ``agent``.

        Returns:
            True if a state was found and loaded; False if there is no such session (the
            agent is not touched, and its next ``save`` must create the session).

        Raises:
            StateError: if the stored state is corrupt, or the agent rejects it.
        """
        key = (self.store_key, check_session_id(session_id))
        found = await self.load_versioned(session_id)
        if found is None:
            self._track(agent, key, 0)
            return False
        state, version = found
        agent.load_state_dict(state)
        self._track(agent, key, version)
        return True

    def tracked_version(self, session_id: str, agent: Stateful) -> int | None:
        """The version ``agent`` was loaded at or saved as here (None: not tracked)."""
        return self._tracked(agent).get((self.store_key, check_session_id(session_id)))

    async def save_state(
        self,
        session_id: str,
        state: dict[str, object],
        *,
        expected_version: int | None = None,
        title: str | None = None,
        durable: bool = True,
    ) -> int:
        """Save a raw state dict (what ``save`` does after calling ``state_dict()``).

        Args:
            session_id: The session.
            state: A JSON-safe dict.
            expected_version: Write only if the stored version is this one (0: only if the
                session does not exist); None writes unconditionally.
            title: A short label kept beside the state for ``list_sessions`` (None: keep the
                stored one).
            durable: False lets the store skip flushing this write to stable storage: it
                is atomic and versioned as ever, and visible to every reader at once, but a
                power cut or OS crash (of the store's machine) may undo it, together with
                the other non-durable writes since the last durable one. A durable write
                also makes every earlier write durable (SQLite's WAL and Postgres' log are
                written in order), so it never loses a durable save. For state that is
                worth less than a flush (a served thread's lease: it belongs to a worker
                that a power cut ends too). SQLite: ``PRAGMA synchronous=NORMAL`` for the
                write; Postgres: ``synchronous_commit`` off for its transaction; JSON: the
                file is still fsynced, the directory (the rename) is not; Redis: as durable
                as the server's persistence either way.

        Returns:
            The new version.

        Raises:
            SessionConflictError: the stored version is not ``expected_version``.
        """
        if expected_version is not None and expected_version < 0:
            raise ValueError(f"expected_version must be >= 0 or None, not {expected_version}")
        # A splitting store's texts are compact (they are rows, not files to read).
        encoded = EncodedState(state, None if self.splits else self.indent, split=self.splits)
        key = check_session_id(session_id)
        title = _check_title(title)
        with self._storage("save", key):
            return await self._write(key, encoded, expected_version, title, durable=durable)

    async def load_state(self, session_id: str) -> dict[str, object] | None:
        """Return the raw state dict saved under ``session_id``, or None if there is none.

        Raises:
            StateError: if the stored text is not a JSON object.
        """
        found = await self.load_versioned(session_id)
        return None if found is None else found[0]

    async def load_versioned(self, session_id: str) -> tuple[dict[str, object], int] | None:
        """Return ``(state, version)`` for ``session_id``, or None if there is none.

        Raises:
            StateError: if the stored text is not a JSON object.
        """
        key = check_session_id(session_id)
        with self._storage("read", key):
            found = await self._read(key)
        if found is None:
            return None
        head, version, logs = found
        if isinstance(head, dict):  # the backend already parsed it (JSONSession)
            return head, version
        try:
            state = json.loads(head)
            if isinstance(state, dict):
                _join(state, logs)
        except (ValueError, RecursionError, LookupError, TypeError) as exc:
            # corrupt, nested too deeply, or items that do not fit the head
            raise StateError(
                f"{self.backend} session {session_id!r} holds corrupt JSON: {exc}"
            ) from exc
        if not isinstance(state, dict):
            raise StateError(f"{self.backend} session {session_id!r} does not hold a JSON object")
        return state, version

    async def version(self, session_id: str) -> int:
        """The stored version of ``session_id`` (0 if it does not exist)."""
        key = check_session_id(session_id)
        with self._storage("read", key):
            found = await self._read(key)
        return 0 if found is None else found[1]

    async def delete(self, session_id: str) -> bool:
        """Delete a session; return whether it existed.

        A later ``save`` of an agent loaded before the delete raises
        ``SessionConflictError`` (the session it was based on is gone).
        """
        key = check_session_id(session_id)
        with self._storage("delete", key):
            return await self._delete(key)

    async def exists(self, session_id: str) -> bool:
        """Whether a state is saved under ``session_id``."""
        key = check_session_id(session_id)
        with self._storage("check", key):
            return await self._exists(key)

    async def list_ids(self) -> list[str]:
        """Return every saved session id, sorted."""
        with self._storage("list", None):
            return sorted(await self._list_ids())

    async def list_sessions(
        self, *, prefix: str = "", limit: int = 100, cursor: str | None = None
    ) -> SessionPage:
        """One page of the stored sessions' metadata, most recently saved first.

        No state is read: this is the cheap way to show a list of conversations. Pages are
        stable under concurrent saves in the sense that no session is returned twice across
        pages unless it was saved again in between (it then moves to the front).

        Args:
            prefix: Only ids that start with this.
            limit: Most entries on the page (1 to 1000).
            cursor: ``next_cursor`` of the previous page (None: the first page).

        Raises:
            ValueError: on a bad ``limit`` or a cursor this method did not make.
        """
        if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
            raise ValueError(f"limit must be an int from 1 to {MAX_PAGE_SIZE}, got {limit!r}")
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        after = None if cursor is None else _decode_cursor(cursor)
        with self._storage("list", None):
            infos = await self._list_page(prefix, limit + 1, after)
        if len(infos) <= limit:
            return SessionPage(infos, None)
        return SessionPage(infos[:limit], _encode_cursor(infos[limit - 1]))

    async def close(self) -> None:
        """Release the backend's resources (a no-op for file-based sessions)."""
        return  # file-based backends hold nothing open between operations

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- version tracking --------------------------------------------------------------
    @staticmethod
    def _tracked(agent: object) -> Mapping[tuple[str, str], int]:
        versions = getattr(agent, "session_versions", None)
        # Without a mapping of its own the object is untracked: saves are plain overwrites.
        return versions if isinstance(versions, MutableMapping) else {}

    @staticmethod
    def _track(agent: object, key: tuple[str, str], version: int) -> None:
        versions = getattr(agent, "session_versions", None)
        if isinstance(versions, MutableMapping):
            versions[key] = version

    @contextlib.contextmanager
    def _storage(self, action: str, session_id: str | None) -> Iterator[None]:
        """Turn a backend failure (``OSError``, ``sqlite3.Error``...) into ``SessionError``.

        The documented errors pass through; cancellation is never caught.
        """
        try:
            yield
        except AgentkitError:
            raise
        except Exception as exc:
            where = f" session {session_id!r}" if session_id is not None else ""
            raise SessionError(
                f"{self.backend}{where}: cannot {action} ({self!r}): {type(exc).__name__}: {exc}"
            ) from exc

    # -- backend primitives ------------------------------------------------------------
    @abstractmethod
    async def _write(
        self,
        session_id: str,
        state: EncodedState,
        expected: int | None,
        title: str | None,
        *,
        durable: bool = True,
    ) -> int:
        """Store ``state`` atomically if the stored version is ``expected``; return the new one.

        A store with ``splits`` False stores ``state.head`` (the whole text; ``state.logs``
        is empty). One with ``splits`` True stores the head in place of the whole text and
        the logs' items beside it, in the same atomic step: ``state.changes`` says which
        items to write and which to delete, given the stored digests; what is read back
        must be exactly what was written. ``expected`` None: write whatever is stored; 0:
        only if nothing is stored. ``title``
        None keeps the stored title. The time of the save is recorded for ``list_sessions``.
        ``durable`` False: the write need not be flushed to stable storage (see
        ``save_state``); a backend without a cheaper path writes durably anyway.

        Raises:
            SessionConflictError: the stored version differs; nothing was written (no
                item either).
        """

    @abstractmethod
    async def _read(
        self, session_id: str
    ) -> tuple[str | dict[str, object], int, Mapping[str, list[str]]] | None:
        """Return the stored ``(head, version, logs)``, or None if there is none.

        ``logs``: log path -> its items' texts in order (see ``group_items``), read in the
        same snapshot as the head; empty for a store that does not split (and for a state
        stored before stores split). A backend that has to parse the stored text anyway may
        return the state dict as the head.
        """

    @abstractmethod
    async def _delete(self, session_id: str) -> bool:
        """Delete the entry; return whether it existed."""

    @abstractmethod
    async def _list_ids(self) -> list[str]:
        """Return the stored ids in any order."""

    async def _exists(self, session_id: str) -> bool:
        """Whether the entry exists (backends override this with a cheaper check)."""
        return await self._read(session_id) is not None

    async def _list_page(
        self, prefix: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[SessionInfo]:
        """Up to ``limit`` entries under ``prefix``, (updated_at, id) descending, after ``after``.

        This default sorts what ``_list_infos`` returns; an indexed backend overrides it.
        """
        infos = [
            info
            for info in await self._list_infos(prefix)
            if after is None or (info.updated_at, info.session_id) < after
        ]
        infos.sort(key=lambda info: (info.updated_at, info.session_id), reverse=True)
        return infos[:limit]

    async def _list_infos(self, prefix: str) -> list[SessionInfo]:
        """Every entry's metadata under ``prefix``, in any order, without reading states."""
        raise NotImplementedError(f"{type(self).__name__} cannot list session metadata")

"""The ``Session`` ABC: save and load an agent's state under a session id.

A session store only moves JSON text: the agent (or anything with ``state_dict()`` /
``load_state_dict()``) decides what its state is. Backends implement four small primitives
(``_write``, ``_read``, ``_delete``, ``_list_ids``) and inherit the public API, the JSON
encoding and its error handling.

``load`` returns ``False`` when the session does not exist (the agent is left untouched),
so "resume if saved, else start fresh" is one ``if``; a stored state that cannot be decoded
raises :class:`~agentkit.exceptions.StateError` naming the session and the backend.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from agentkit.exceptions import AgentkitError, SessionError, StateError

__all__ = ["Session", "StateGroup", "Stateful", "check_session_id"]

MAX_SESSION_ID_LENGTH = 200
"""Longest accepted session id, in characters (keeps encoded file names under 255 bytes)."""


@runtime_checkable
class Stateful(Protocol):
    """What a session can save: an agent, a toolkit, a :class:`StateGroup`..."""

    def state_dict(self) -> dict[str, Any]:
        """Return a JSON-safe snapshot of the object's state."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the object's state with ``state`` (raising ``StateError`` if invalid)."""
        ...


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
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in session_id):
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

    def state_dict(self) -> dict[str, Any]:
        """Return ``{"members": {key: member_state}}``."""
        return {"members": {key: m.state_dict() for key, m in self.members.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load every member's state, or none of them.

        Raises:
            StateError: if a member's state is missing or the shape is wrong.
        """
        states = state.get("members") if isinstance(state, dict) else None
        if not isinstance(states, dict):
            raise StateError("a StateGroup state needs a 'members' dict")
        missing = sorted(set(self.members) - set(states))
        if missing:
            raise StateError(f"the saved state has no entry for {missing}")
        backups: list[tuple[Stateful, dict[str, Any]]] = []
        try:
            for key, member in self.members.items():
                backup = member.state_dict()
                member.load_state_dict(states[key])
                backups.append((member, backup))
        except Exception:
            for member, backup in reversed(backups):
                member.load_state_dict(backup)
            raise


def _encode(state: dict[str, Any], indent: int | None) -> str:
    if not isinstance(state, dict):
        raise TypeError(f"state_dict() must return a dict, got {type(state).__name__}")
    separators = (",", ":") if indent is None else None
    try:
        return json.dumps(
            state, ensure_ascii=False, allow_nan=False, indent=indent, separators=separators
        )
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not JSON-safe: {exc}") from exc
    except RecursionError as exc:
        raise StateError("the state is not JSON-safe: it is nested too deeply") from exc


class Session(ABC):
    """A store of agent states keyed by session id.

    Subclasses implement the four primitives on JSON text; everything public lives here.
    Sessions are async context managers (``close()`` on exit).
    """

    backend = "session"
    indent: int | None = None  # pretty-print stored JSON with this indent (None: compact)

    # -- public API --------------------------------------------------------------------
    async def save(self, session_id: str, agent: Stateful) -> None:
        """Save ``agent.state_dict()`` under ``session_id``, replacing any previous state.

        Save between replies: a state taken while a reply is running reflects a half-done
        step (the agent's own ``state_dict`` decides what that means).

        Raises:
            StateError: if the state is not JSON-safe.
            SessionError: if the store cannot write it (the backend's error is the cause).
        """
        await self.save_state(session_id, agent.state_dict())

    async def load(self, session_id: str, agent: Stateful) -> bool:
        """Load the state saved under ``session_id`` into ``agent``.

        Returns:
            True if a state was found and loaded; False if there is no such session (the
            agent is not touched).

        Raises:
            StateError: if the stored state is corrupt, or the agent rejects it.
            SessionError: if the store cannot be read (the backend's error is the cause).
        """
        state = await self.load_state(session_id)
        if state is None:
            return False
        agent.load_state_dict(state)
        return True

    async def save_state(self, session_id: str, state: dict[str, Any]) -> None:
        """Save a raw state dict (what ``save`` does after calling ``state_dict()``)."""
        key = check_session_id(session_id)
        text = _encode(state, self.indent)
        with self._storage("save", key):
            await self._write(key, text)

    async def load_state(self, session_id: str) -> dict[str, Any] | None:
        """Return the raw state dict saved under ``session_id``, or None if there is none.

        Raises:
            StateError: if the stored text is not a JSON object.
            SessionError: if the store cannot be read (the backend's error is the cause).
        """
        key = check_session_id(session_id)
        with self._storage("read", key):
            text = await self._read(key)
        if text is None:
            return None
        try:
            state = json.loads(text)
        except (ValueError, RecursionError) as exc:  # corrupt, or nested too deeply
            raise StateError(
                f"{self.backend} session {session_id!r} holds corrupt JSON: {exc}"
            ) from exc
        if not isinstance(state, dict):
            raise StateError(f"{self.backend} session {session_id!r} does not hold a JSON object")
        return state

    async def delete(self, session_id: str) -> bool:
        """Delete a session; return whether it existed."""
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
    async def _write(self, session_id: str, text: str) -> None:
        """Store ``text`` under ``session_id`` atomically (replace on conflict)."""

    @abstractmethod
    async def _read(self, session_id: str) -> str | None:
        """Return the stored text, or None if there is none."""

    @abstractmethod
    async def _delete(self, session_id: str) -> bool:
        """Delete the entry; return whether it existed."""

    @abstractmethod
    async def _list_ids(self) -> list[str]:
        """Return the stored ids in any order."""

    async def _exists(self, session_id: str) -> bool:
        """Whether the entry exists (backends override this with a cheaper check)."""
        return await self._read(session_id) is not None

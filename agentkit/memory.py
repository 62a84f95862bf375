"""Conversation memory and the tool-call invariant.

The invariant every agent keeps after each step, error and interrupt:

* every ``tool_use`` block has exactly one ``tool_result`` block with the same id, placed
  after it (or, if the call awaits human approval, none yet: its id is "pending");
* no ``tool_result`` exists without an earlier ``tool_use`` of the same id;
* an id is not issued again while its call is unanswered (reuse after the result is fine).

:func:`check_memory_invariant` checks it and names the offending call id. The agent does not
run it on the hot path (it is O(n) over the whole conversation); tests call it after every
step, and :meth:`agentkit.agent.ReActAgent.load_state_dict` calls it on untrusted input.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from typing import ClassVar

from agentkit.exceptions import MemoryInvariantError, StateError
from agentkit.messages import Msg

__all__ = ["InMemoryMemory", "Memory", "MemoryInvariantError", "check_memory_invariant"]


def check_memory_invariant(messages: Iterable[Msg], pending_ids: Iterable[str] = ()) -> None:
    """Check that every tool call in ``messages`` has exactly one result.

    A result answers the latest *unanswered* call with its id, so a provider that reuses
    ids across turns (some local servers do) is fine; an id issued again while still
    unanswered is not.

    Args:
        messages: The conversation, oldest first.
        pending_ids: Ids of calls awaiting human approval: they must have *no* result yet.

    Raises:
        MemoryInvariantError: naming the first offending call id and what is wrong.
    """
    open_ids: set[str] = set()
    seen: set[str] = set()
    for msg in messages:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if block["type"] == "tool_use":
                call_id = block["id"]
                if call_id in open_ids:
                    raise MemoryInvariantError(call_id, "issued twice before it was answered")
                open_ids.add(call_id)
                seen.add(call_id)
            elif block["type"] == "tool_result":
                call_id = block["id"]
                if call_id not in open_ids:
                    problem = (
                        "more than one tool_result"
                        if call_id in seen
                        else "tool_result without an earlier tool_use of the same id"
                    )
                    raise MemoryInvariantError(call_id, problem)
                open_ids.discard(call_id)
    pending = set(pending_ids)
    for call_id in sorted(pending - open_ids):
        problem = "a pending call already has a result" if call_id in seen else "no tool_use"
        raise MemoryInvariantError(call_id, f"{problem} (pending call)")
    for call_id in sorted(open_ids - pending):
        raise MemoryInvariantError(call_id, "tool_use without a tool_result")


class Memory(ABC):
    """Interface of conversation memories (subclass it to store messages elsewhere).

    Messages are kept in order. Implementations must not copy messages on ``get_memory``
    beyond a shallow list copy: the agent calls it once per model call.
    """

    __slots__ = ()

    atomic_add: ClassVar[bool] = False
    """True when ``add`` never suspends (so a cancellation can never cut it halfway): the
    agent then skips shielding its writes."""

    @abstractmethod
    async def add(self, msgs: Msg | Sequence[Msg] | None) -> None:
        """Append one message or several (None is ignored)."""

    @abstractmethod
    async def get_memory(self) -> list[Msg]:
        """Return the messages, oldest first (a new list; the messages are shared)."""

    @abstractmethod
    async def delete(self, index: int | Iterable[int]) -> None:
        """Delete messages by position.

        Raises:
            IndexError: when an index is out of range (nothing is deleted then).
        """

    @abstractmethod
    async def clear(self) -> None:
        """Remove every message."""

    @abstractmethod
    async def size(self) -> int:
        """Return the number of messages."""

    @abstractmethod
    def state_dict(self) -> dict[str, object]:
        """Return a JSON-safe snapshot."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, object]) -> None:
        """Replace the contents with a snapshot from :meth:`state_dict`.

        Raises:
            StateError: when the snapshot is malformed.
        """


_SCAN_LIMIT = 32


class InMemoryMemory(Memory):
    """Messages in a Python list: the default memory.

    Args:
        messages: Initial messages (the list is copied, the messages are not).
    """

    __slots__ = ("_ids", "_messages")

    atomic_add: ClassVar[bool] = True

    def __init__(self, messages: Iterable[Msg] | None = None) -> None:
        self._messages: list[Msg] = []
        # Id keys of the messages, built once there are more than _SCAN_LIMIT of them; a
        # short conversation is checked by a scan instead (a set costs more than its
        # messages' metadata, and a chat service keeps thousands of idle conversations).
        self._ids: set[Hashable] | None = None
        self._extend(list(messages or ()))

    def _extend(self, items: Sequence[Msg]) -> None:
        # A message already held (same id) is skipped: in a MsgHub a reply reaches an agent
        # both by broadcast and as the next pipeline input, and must be stored once. Ids are
        # compared by ``id_key`` (the packed id: ``id`` makes its text on each access).
        if not items:
            return
        messages = self._messages
        keys = [item.id_key for item in items]
        if not messages:  # a new or reloaded conversation: one set tells whether ids repeat
            unique = set(keys)
            if len(unique) == len(keys):
                messages.extend(items)
                self._ids = unique if len(keys) > _SCAN_LIMIT else None
                return
        ids = self._ids
        if ids is None and len(messages) + len(keys) > _SCAN_LIMIT:
            ids = self._ids = {m.id_key for m in messages}
        if ids is None:
            held = [m.id_key for m in messages] if messages else []
            for item, key in zip(items, keys, strict=True):
                if key not in held:  # a scan of at most _SCAN_LIMIT ids, in C
                    held.append(key)
                    messages.append(item)
            return
        for item, key in zip(items, keys, strict=True):
            if key not in ids:
                ids.add(key)
                messages.append(item)

    @property
    def messages(self) -> list[Msg]:
        """The live list of messages (no copy; do not mutate while an agent replies)."""
        return self._messages

    async def add(self, msgs: Msg | Sequence[Msg] | None) -> None:
        """Append one message or several (None is ignored; a message already held is skipped).

        Raises:
            TypeError: when something other than a Msg is given.
        """
        if msgs is None:
            return
        items = [msgs] if isinstance(msgs, Msg) else list(msgs)
        for item in items:
            if not isinstance(item, Msg):
                raise TypeError(f"memory holds Msg objects, got {type(item).__name__}")
        self._extend(items)

    async def get_memory(self) -> list[Msg]:
        """Return the messages, oldest first (a new list; the messages are shared)."""
        return list(self._messages)

    async def delete(self, index: int | Iterable[int]) -> None:
        """Delete messages by position (negative indexes count from the end).

        Raises:
            IndexError: when an index is out of range (nothing is deleted then).
        """
        size = len(self._messages)
        indexes = [index] if isinstance(index, int) else list(index)
        normalized = set()
        for i in indexes:
            if not -size <= i < size:
                raise IndexError(f"memory index {i} out of range (size {size})")
            normalized.add(i % size)
        self._messages = [m for i, m in enumerate(self._messages) if i not in normalized]
        self._ids = None  # rebuilt when needed

    async def clear(self) -> None:
        """Remove every message."""
        self._messages = []
        self._ids = None

    async def size(self) -> int:
        """Return the number of messages."""
        return len(self._messages)

    def state_dict(self) -> dict[str, object]:
        """Return ``{"messages": [msg.to_dict(), ...]}`` (JSON-safe)."""
        return {"messages": [m.to_dict() for m in self._messages]}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Replace the contents with a snapshot from :meth:`state_dict`.

        Raises:
            StateError: when the snapshot is malformed (naming the message), or two messages
                share an id.
        """
        raw = state.get("messages") if isinstance(state, dict) else None
        if not isinstance(raw, list):
            raise StateError("memory state needs a 'messages' list")
        messages = []
        ids: set[Hashable] = set()
        for i, item in enumerate(raw):
            try:
                msg = Msg.from_dict(item)
            except ValueError as exc:
                raise StateError(f"memory message {i} is invalid: {exc}") from exc
            key = msg.id_key
            if key in ids:  # ``add`` would skip it silently, breaking tool-call pairs
                raise StateError(f"memory message {i} repeats the message id {msg.id!r}")
            ids.add(key)
            messages.append(msg)
        # Ids checked unique above: no second pass through ``_extend``.
        self._messages, self._ids = messages, ids if len(ids) > _SCAN_LIMIT else None

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"InMemoryMemory(<{len(self._messages)} messages>)"

"""``MsgHub``: a group conversation where every participant hears every other's replies.

Inside ``async with MsgHub(participants):`` each participant has a ``post_reply`` hook: when
it replies (however it was called: directly, in a pipeline, as a tool), a copy of the reply
is passed to every *other* participant's ``observe()``. Leaving the block removes the hooks,
also on error or cancellation.

What is broadcast is what others can *hear*: text, image and audio blocks. Tool calls,
tool results and thinking are the speaker's private work: copying a ``tool_use`` into
another agent's memory would leave it a call without a result, and thinking blocks carry
provider signatures that are only valid for the model that produced them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Self

from agentkit._ids import new_id
from agentkit.messages import ContentBlock, Msg
from agentkit.pipelines._protocols import HubParticipant

__all__ = ["MsgHub", "audible_copy"]

_AUDIBLE = frozenset(("text", "image", "audio"))


def audible_copy(msg: Msg) -> Msg | None:
    """A copy of ``msg`` keeping only what others may hear; None when nothing remains.

    The copy keeps the id, name, role, metadata and timestamp, so the same message can be
    recognised in every participant's memory.
    """
    copy = msg.copy()
    if isinstance(copy.content, str):
        return copy if copy.content else None
    blocks: list[ContentBlock] = [b for b in copy.content if b["type"] in _AUDIBLE]
    if not blocks:
        return None
    copy.content = blocks
    return copy


class MsgHub:
    """Broadcast each participant's replies to the others while the hub is open.

    Args:
        participants: The agents in the conversation (each needs ``observe`` and hooks).
        announcement: Message(s) every participant observes when the hub opens.
        auto_broadcast: Broadcast replies automatically (``set_auto_broadcast`` toggles).

    Example:
        >>> async with MsgHub([alice, bob, carol], announcement=topic) as hub:
        ...     await alice()
        ...     await sequential_pipeline([bob, carol])
        ...     hub.add(dave)
    """

    def __init__(
        self,
        participants: Iterable[HubParticipant],
        announcement: Msg | list[Msg] | None = None,
        *,
        auto_broadcast: bool = True,
    ) -> None:
        self._participants: list[HubParticipant] = []
        self.announcement = announcement
        self.auto_broadcast = auto_broadcast
        self._hook_name = new_id("agentkit.msghub.", 6)
        self._open = False
        self.add(participants)

    @property
    def participants(self) -> list[HubParticipant]:
        """The current participants, in order (a copy)."""
        return list(self._participants)

    async def __aenter__(self) -> Self:
        if self._open:
            raise RuntimeError("this MsgHub is already open")
        self._open = True
        try:
            for agent in self._participants:
                self._attach(agent)
            if self.announcement is not None:
                await self.broadcast(self.announcement)
        except BaseException:
            self._close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    def _close(self) -> None:
        for agent in self._participants:
            self._detach(agent)
        self._open = False

    # -- membership --------------------------------------------------------------------
    def add(self, agents: HubParticipant | Iterable[HubParticipant]) -> None:
        """Add participants (already present ones are ignored); they hear later replies."""
        for agent in _as_list(agents):
            if not any(agent is p for p in self._participants):
                self._participants.append(agent)
                if self._open:
                    self._attach(agent)

    def delete(self, agents: HubParticipant | Iterable[HubParticipant]) -> None:
        """Remove participants (absent ones are ignored); they stop hearing and being heard."""
        for agent in _as_list(agents):
            for i, p in enumerate(self._participants):
                if p is agent:
                    del self._participants[i]
                    if self._open:
                        self._detach(agent)
                    break

    def set_auto_broadcast(self, enable: bool) -> None:
        """Turn automatic broadcasting of replies on or off."""
        self.auto_broadcast = enable

    # -- broadcasting ------------------------------------------------------------------
    async def broadcast(self, msg: Msg | list[Msg], *, exclude: Any = None) -> None:
        """Have every participant (except ``exclude``) observe a copy of ``msg``.

        Copies keep only audible blocks (see the module docs); a message with nothing
        audible is not sent.
        """
        messages = [c for m in _as_msgs(msg) if (c := audible_copy(m)) is not None]
        if not messages:
            return
        for agent in list(self._participants):
            if agent is not exclude:
                # Each observer gets its own copies: memories must never share a Msg.
                for m in messages:
                    await agent.observe(m.copy())

    async def _on_reply(self, agent: Any, kwargs: dict[str, object], output: Any) -> None:
        if self.auto_broadcast and isinstance(output, Msg):
            await self.broadcast(output, exclude=agent)

    def _attach(self, agent: HubParticipant) -> None:
        agent.register_hook("post_reply", self._hook_name, self._on_reply)

    def _detach(self, agent: HubParticipant) -> None:
        # KeyError: the user removed the hook already; nothing left to undo.
        with contextlib.suppress(KeyError):
            agent.remove_hook("post_reply", self._hook_name)

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self._participants)
        return f"MsgHub([{names}], open={self._open})"


def _as_list(agents: HubParticipant | Iterable[HubParticipant]) -> list[HubParticipant]:
    if isinstance(agents, Iterable):
        return list(agents)
    return [agents]


def _as_msgs(msg: Msg | list[Msg]) -> list[Msg]:
    return list(msg) if isinstance(msg, list) else [msg]

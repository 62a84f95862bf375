"""Argument handling for ``ReActAgent``: model strings, the round-1 positional form, input."""

from __future__ import annotations

from agentkit.exceptions import UsageError
from agentkit.memory import MemoryInvariantError, check_memory_invariant
from agentkit.messages import Msg, MsgInput
from agentkit.models._base import ChatModel

__all__ = [
    "as_input",
    "as_messages",
    "no_running_loop",
    "resolve_model",
]


def as_messages(msg: MsgInput) -> list[Msg]:
    """``msg`` as a list of messages (a string is one user message)."""
    if msg is None:
        return []
    if isinstance(msg, Msg):
        return [msg]
    if isinstance(msg, str):
        return [Msg("user", msg, "user")]
    items = list(msg)
    for item in items:
        if not isinstance(item, Msg):
            raise UsageError(f"expected Msg, list of Msg, str or None; got {type(item).__name__}")
    return items


def as_input(msg: MsgInput) -> list[Msg]:
    """Messages given to the agent, checked: they may not leave a tool call unanswered.

    Memory at rest has every call answered, so input that is balanced on its own keeps it
    valid; anything else would be refused by every provider on the next request, and the
    saved state could not be loaded back.
    """
    msgs = as_messages(msg)
    if any(not isinstance(m.content, str) for m in msgs):
        try:
            check_memory_invariant(msgs)
        except MemoryInvariantError as exc:
            raise MemoryInvariantError(
                exc.call_id,
                f"{exc.problem} in the messages given to the agent (give tool calls and "
                "their results together, or edit agent.memory directly)",
            ) from None
    return msgs


def resolve_model(model: object) -> ChatModel:
    """A ``ChatModel``, or a ``"provider:model"`` string resolved by ``from_string``."""
    if isinstance(model, str):
        from agentkit.models._registry import from_string

        return from_string(model)
    if not isinstance(model, ChatModel):
        raise UsageError(
            f"model must be a ChatModel (e.g. OpenAIChatModel(...)) or a "
            f"'provider:model' string such as 'openai:gpt-4o-mini'; got {type(model).__name__}"
        )
    return model


def no_running_loop() -> None:
    """Raise ``UsageError`` when called inside a running asyncio event loop."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError("run_sync() cannot run inside an event loop; use 'await agent.run(...)'")

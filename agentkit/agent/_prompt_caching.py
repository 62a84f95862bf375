"""``PromptCaching``: ask every model request of an agent for prompt caching, and notice busts.

Providers cache a request's prefix: the tool definitions, then the system prompt, then the
messages. The capability puts ``settings["cache"]`` (a ``PromptCache``) on each request;
each adapter turns it into its provider's form (``cache_control`` breakpoints on Anthropic,
``cachePoint`` blocks on Bedrock Converse, ``prompt_cache_key``/``prompt_cache_retention`` on
OpenAI; Gemini caches implicitly). See docs/models.md, "Prompt caching".

A request that asks for caching is compared with the conversation's previous one that did
(:func:`check_prefix`, called by the loop after every capability's ``before_model``): when
its tools or system prompt differ, the cache the previous request built cannot be read, so
the loop emits a ``CacheBusted`` event and logs a warning naming what changed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

from agentkit.agent._capabilities import Capability
from agentkit.events import AgentEvent, CacheBusted
from agentkit.exceptions import UsageError
from agentkit.models._base import CachePoint, ModelRequest, PromptCache, ToolDefinition

if TYPE_CHECKING:
    from agentkit.messages import Msg
    from agentkit.tools._context import RunContext

__all__ = ["CachePrefix", "PromptCaching", "check_prefix"]

logger = logging.getLogger("agentkit.agent")

_POINTS = frozenset(get_args(CachePoint))


# Capability[Any], not generic in the deps: a ``key`` lambda given inline would then be
# checked against the agent's deps type, and one reading ``ctx.deps`` of an agent declared
# without ``deps_type`` (deps given per run) would stop type-checking.
class PromptCaching(Capability[Any]):
    """Ask every model request of the agent for prompt caching.

    Args:
        ttl: ``"1h"`` for the long cache (Anthropic and Bedrock: one hour, writes at 2x the
            input price; OpenAI: ``prompt_cache_retention: "24h"``); None or ``"5m"``: the
            provider's default (five minutes).
        key: OpenAI's ``prompt_cache_key`` (requests with one key share a cache): a string,
            or a function of the run's context (``lambda ctx: ctx.deps.user_id``).
        points: Where the cache points go (default: ``("tools", "system", "messages")``).

    Raises:
        UsageError: an unknown ``ttl`` or point, or an empty ``key``.

    Example:
        >>> agent = ReActAgent("a", "sys", model, toolkit, capabilities=[PromptCaching()])
    """

    def __init__(
        self,
        *,
        ttl: Literal["5m", "1h"] | None = None,
        key: str | Callable[[RunContext[Any]], str] | None = None,
        points: Iterable[CachePoint] | None = None,
    ) -> None:
        if ttl not in (None, "5m", "1h"):
            raise UsageError(f'PromptCaching(ttl=...) must be "5m" or "1h", not {ttl!r}')
        if isinstance(key, str) and not key:
            raise UsageError("PromptCaching(key=...) must not be empty")
        cache = PromptCache()
        if points is not None:
            given: Iterable[str] = [points] if isinstance(points, str) else points
            chosen = cast("list[CachePoint]", list(given))
            unknown = [p for p in chosen if p not in _POINTS]
            if unknown:
                raise UsageError(
                    f"PromptCaching(points=...) takes {sorted(_POINTS)}, not {unknown}"
                )
            cache["points"] = chosen
        if ttl is not None:
            cache["ttl"] = ttl
        if isinstance(key, str):
            cache["key"] = key
        self.cache = cache
        self.key = key if callable(key) else None

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        """The request with ``settings["cache"]`` (keys a request already has are kept)."""
        cache = PromptCache(**self.cache)
        if self.key is not None:
            cache["key"] = self.key(ctx)
        cache.update(request.settings.get("cache") or {})
        return replace(request, settings={**request.settings, "cache": cache})


class PrefixHolder(Protocol):
    """Where the previous caching request's prefix is kept (the conversation)."""

    cache_prefix: CachePrefix | None


@dataclass(frozen=True, slots=True)
class CachePrefix:
    """The start of a request that providers cache first: its tools and system prompt.

    Attributes:
        tools: The function tools, in order.
        builtin: The built-in tool specs, as sorted JSON.
        system: The leading system messages' content (JSON text for block lists).
    """

    tools: tuple[ToolDefinition, ...]
    builtin: tuple[str, ...]
    system: tuple[str, ...]

    @classmethod
    def of(cls, request: ModelRequest) -> CachePrefix:
        """The prefix of ``request``."""
        system: list[str] = []
        for msg in request.messages:
            if msg.role != "system":
                break
            system.append(_content_key(msg))
        builtin = tuple(json.dumps(b, sort_keys=True, default=str) for b in request.builtin_tools)
        return cls(tuple(request.tools), builtin, tuple(system))


def _content_key(msg: Msg) -> str:
    content = msg.content
    return content if isinstance(content, str) else json.dumps(content, default=str)


def bust_of(previous: CachePrefix, current: CachePrefix) -> CacheBusted | None:
    """What changed from ``previous`` to ``current`` (None: nothing, the cache holds)."""
    tools_changed = previous.tools != current.tools or previous.builtin != current.builtin
    system_changed = previous.system != current.system
    if not (tools_changed or system_changed):
        return None
    reasons: list[Literal["tools", "system"]] = []
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    if tools_changed:
        reasons.append("tools")
        before = {t.name: t for t in previous.tools}
        after = {t.name: t for t in current.tools}
        added = tuple(name for name in after if name not in before)
        removed = tuple(name for name in before if name not in after)
        order_before = [t.name for t in previous.tools if t.name in after]
        order_after = [t.name for t in current.tools if t.name in before]
        changed = tuple(
            name
            for i, name in enumerate(order_after)
            if before[name] != after[name] or order_before[i] != name
        )
    if system_changed:
        reasons.append("system")
    return CacheBusted(tuple(reasons), added, removed, changed)


def check_prefix(
    holder: PrefixHolder, request: ModelRequest, emit: Callable[[AgentEvent], None] | None
) -> CacheBusted | None:
    """Compare ``request`` with the previous caching request kept on ``holder``.

    ``holder`` is the conversation (its ``cache_prefix`` attribute): the comparison spans
    the runs of one conversation, so instructions that change per run are seen too. A
    bust is emitted (when someone listens) and logged at WARNING.

    Returns:
        The ``CacheBusted`` event, or None when the prefix is the same (or is the first).
    """
    current = CachePrefix.of(request)
    previous = holder.cache_prefix
    holder.cache_prefix = current
    if previous is None:
        return None
    bust = bust_of(previous, current)
    if bust is None:
        return None
    logger.warning(
        "prompt cache busted: the %s changed since the previous request (added tools: %s, "
        "removed: %s, changed: %s)",
        " and ".join(bust.reasons),
        list(bust.added_tools),
        list(bust.removed_tools),
        list(bust.changed_tools),
    )
    if emit is not None:
        emit(bust)
    return bust

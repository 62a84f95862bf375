"""Per-instance hooks around a reply, each model call and each tool call.

A *pre* hook is called ``fn(agent, kwargs)`` and may return a new kwargs dict; a *post* hook
is called ``fn(agent, kwargs, output)`` and may return a new output; returning None keeps
the value. Hooks may be sync or async and run in registration order. ``pre_acting`` and
``post_acting`` fire once per tool call, also when calls run in parallel (they then run
concurrently, one pair per call, with no shared re-entrancy flag).

The registry is created on first registration, so an agent without hooks pays nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias, get_args

__all__ = ["HookKind", "HookRegistry", "PostHook", "PreHook"]

HookKind: TypeAlias = Literal[
    "pre_reply", "post_reply", "pre_reasoning", "post_reasoning", "pre_acting", "post_acting"
]
HOOK_KINDS: frozenset[str] = frozenset(get_args(HookKind))

PreHook: TypeAlias = Callable[
    [Any, dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any] | None] | None
]
PostHook: TypeAlias = Callable[[Any, dict[str, Any], Any], Any]


class HookRegistry:
    """Named hooks by kind, in registration order."""

    __slots__ = ("_hooks",)

    def __init__(self) -> None:
        self._hooks: dict[str, dict[str, Callable[..., Any]]] = {}

    def register(self, kind: str, name: str, fn: Callable[..., Any]) -> None:
        """Add (or replace) the hook ``name`` of ``kind``.

        Raises:
            ValueError: on an unknown kind.
            TypeError: when ``fn`` is not callable.
        """
        if kind not in HOOK_KINDS:
            raise ValueError(f"unknown hook kind {kind!r}; expected one of {sorted(HOOK_KINDS)}")
        if not callable(fn):
            raise TypeError(f"hook {name!r} must be callable")
        self._hooks.setdefault(kind, {})[name] = fn

    def remove(self, kind: str, name: str) -> None:
        """Remove one hook.

        Raises:
            KeyError: when no such hook is registered.
        """
        hooks = self._hooks.get(kind)
        if not hooks or name not in hooks:
            raise KeyError(f"no {kind} hook named {name!r}")
        del hooks[name]
        if not hooks:
            del self._hooks[kind]

    def clear(self, kind: str | None = None) -> None:
        """Remove the hooks of one kind, or all hooks."""
        if kind is None:
            self._hooks.clear()
        else:
            self._hooks.pop(kind, None)

    def has(self, kind: str) -> bool:
        """Whether any hook of ``kind`` is registered."""
        return kind in self._hooks

    def names(self, kind: str) -> list[str]:
        """Names of the hooks of ``kind``, in call order."""
        return list(self._hooks.get(kind, ()))

    async def run_pre(self, kind: str, agent: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Run the pre hooks of ``kind``; return the (possibly replaced) kwargs.

        Raises:
            TypeError: when a hook returns something other than a dict or None.
        """
        for name, fn in list(self._hooks.get(kind, {}).items()):
            result = fn(agent, kwargs)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                if not isinstance(result, dict):
                    raise TypeError(f"{kind} hook {name!r} must return a dict or None")
                kwargs = result
        return kwargs

    async def run_post(self, kind: str, agent: Any, kwargs: dict[str, Any], output: Any) -> Any:
        """Run the post hooks of ``kind``; return the (possibly replaced) output."""
        for fn in list(self._hooks.get(kind, {}).values()):
            result = fn(agent, kwargs, output)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                output = result
        return output


class HookHost:
    """``register_hook`` / ``remove_hook`` / ``clear_hooks`` for any agent-like class.

    Subclasses set ``self._hooks = None`` in ``__init__``; the registry is created on the
    first registration, so an agent without hooks pays nothing.
    """

    __slots__ = ("_hooks",)
    _hooks: HookRegistry | None

    def register_hook(self, kind: str, name: str, fn: Callable[..., Any]) -> None:
        """Register (or replace) a hook; see ``agentkit.agent.hooks`` for the signatures."""
        if self._hooks is None:
            self._hooks = HookRegistry()
        self._hooks.register(kind, name, fn)

    def remove_hook(self, kind: str, name: str) -> None:
        """Remove one hook (``KeyError`` if there is no such hook)."""
        if self._hooks is None:
            raise KeyError(f"no {kind} hook named {name!r}")
        self._hooks.remove(kind, name)

    def clear_hooks(self, kind: str | None = None) -> None:
        """Remove the hooks of one kind, or all of them."""
        if self._hooks is not None:
            self._hooks.clear(kind)

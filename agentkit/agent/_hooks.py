"""Per-instance hooks around a reply, each model call and each tool call.

A *pre* hook is called ``fn(agent, kwargs)`` and may return a new kwargs dict; a *post* hook
is called ``fn(agent, kwargs, output)`` and may return a new output; returning None keeps
the value. Hooks may be sync or async and run in registration order. ``pre_acting`` and
``post_acting`` fire once per tool call, also when calls run in parallel (they then run
concurrently, one pair per call, with no shared re-entrancy flag).

The registry is created on first registration, so an agent without hooks pays nothing.

The typed way is a subclass of ``AgentHooks`` that overrides the methods it needs, added
with ``agent.add_hooks(MyHooks())``; each method gets typed arguments (the messages, the
``tool_use`` block, the ``ToolResponse``...) and may return a replacement or None. It is
adapted onto the string registry above (AgentScope's form, which stays).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast, get_args

from agentkit.exceptions import UsageError

if TYPE_CHECKING:
    from agentkit.messages import Msg, ToolUseBlock
    from agentkit.tools._response import ToolResponse

__all__ = ["AgentHooks", "HookKind", "HookRegistry", "PostHook", "PreHook"]

HookKind: TypeAlias = Literal[
    "pre_reply", "post_reply", "pre_reasoning", "post_reasoning", "pre_acting", "post_acting"
]
HOOK_KINDS: frozenset[str] = frozenset(get_args(HookKind))

T = TypeVar("T")

PreHook: TypeAlias = Callable[
    [Any, dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any] | None] | None
]
PostHook: TypeAlias = Callable[[Any, dict[str, Any], Any], object]


class HookRegistry:
    """Named hooks by kind, in registration order."""

    __slots__ = ("_hooks",)

    def __init__(
        self, hooks: Mapping[str, Mapping[str, Callable[..., object]]] | None = None
    ) -> None:
        # Copied: a registry built from another one's hooks (``copy``) changes apart from it.
        given = hooks or {}
        self._hooks = {kind: dict(named) for kind, named in given.items()}

    def copy(self) -> HookRegistry:
        """A registry of the same hooks; a change on either side does not show on the other."""
        return HookRegistry(self._hooks)

    def register(self, kind: str, name: str, fn: Callable[..., object]) -> None:
        """Add (or replace) the hook ``name`` of ``kind``.

        Raises:
            ValueError: on an unknown kind.
            TypeError: when ``fn`` is not callable.
        """
        if kind not in HOOK_KINDS:
            raise UsageError(f"unknown hook kind {kind!r}; expected one of {sorted(HOOK_KINDS)}")
        if not callable(fn):
            raise UsageError(f"hook {name!r} must be callable")
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

    async def run_pre(self, kind: str, agent: object, kwargs: dict[str, Any]) -> dict[str, Any]:
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
                    raise UsageError(f"{kind} hook {name!r} must return a dict or None")
                kwargs = result
        return kwargs

    async def run_post(self, kind: str, agent: object, kwargs: dict[str, Any], output: T) -> T:
        """Run the post hooks of ``kind``; return the (possibly replaced) output.

        A post hook returns a replacement of the same kind (a ``Msg`` for a ``Msg``...).
        """
        for fn in list(self._hooks.get(kind, {}).values()):
            result = fn(agent, kwargs, output)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                output = cast(T, result)  # unchecked, as in AgentScope: the hook's contract
        return output


class AgentHooks:
    """Typed hooks: override what you need; every default does nothing.

    ``agent`` is the agent running the hook. A method returning None keeps the value;
    returning a value replaces it (``before_tool``: another ``tool_use`` block, e.g. with
    sanitized arguments; ``after_tool``: another result; ``after_model``: another
    assistant message; ``after_run``: another reply).
    """

    async def before_run(self, agent: Any, messages: list[Msg]) -> None:
        """A reply starts with ``messages`` (empty when resuming or continuing)."""

    async def after_run(self, agent: Any, reply: Msg) -> Msg | None:
        """A reply ended with ``reply``."""
        return None

    async def before_model(self, agent: Any, messages: list[Msg]) -> None:
        """A model request is about to be sent with ``messages`` (system message first)."""

    async def after_model(self, agent: Any, message: Msg) -> Msg | None:
        """The model answered ``message`` (not stored yet)."""
        return None

    async def before_tool(self, agent: Any, call: ToolUseBlock) -> ToolUseBlock | None:
        """A tool call is about to run."""
        return None

    async def after_tool(
        self, agent: Any, call: ToolUseBlock, result: ToolResponse
    ) -> ToolResponse | None:
        """A tool call finished with ``result``."""
        return None


def _adapt(hooks: AgentHooks) -> dict[str, Callable[..., object]]:
    """String-registry hooks that call the typed methods ``hooks`` overrides."""

    async def pre_reply(agent: object, kwargs: dict[str, object]) -> None:
        msg = kwargs.get("msg")
        await hooks.before_run(agent, list(msg) if isinstance(msg, list) else [])

    async def post_reply(agent: object, kwargs: dict[str, object], reply: Msg) -> Msg | None:
        return await hooks.after_run(agent, reply)

    async def pre_reasoning(agent: object, kwargs: dict[str, Any]) -> None:
        await hooks.before_model(agent, kwargs["messages"])

    async def post_reasoning(agent: object, kwargs: dict[str, object], msg: Msg) -> Msg | None:
        return await hooks.after_model(agent, msg)

    async def pre_acting(agent: object, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        call = await hooks.before_tool(agent, kwargs["tool_call"])
        return None if call is None else {**kwargs, "tool_call": call}

    async def post_acting(
        agent: object, kwargs: dict[str, Any], result: ToolResponse
    ) -> ToolResponse | None:
        return await hooks.after_tool(agent, kwargs["tool_call"], result)

    pairs: dict[str, tuple[str, Callable[..., object]]] = {
        "before_run": ("pre_reply", pre_reply),
        "after_run": ("post_reply", post_reply),
        "before_model": ("pre_reasoning", pre_reasoning),
        "after_model": ("post_reasoning", post_reasoning),
        "before_tool": ("pre_acting", pre_acting),
        "after_tool": ("post_acting", post_acting),
    }
    return {
        kind: fn
        for method, (kind, fn) in pairs.items()
        if getattr(type(hooks), method) is not getattr(AgentHooks, method)
    }


class HookHost:
    """``register_hook`` / ``remove_hook`` / ``clear_hooks`` for any agent-like class.

    Subclasses set ``self._hooks = None`` in ``__init__``; the registry is created on the
    first registration, so an agent without hooks pays nothing.
    """

    __slots__ = ("_hooks",)
    _hooks: HookRegistry | None

    def register_hook(self, kind: str, name: str, fn: Callable[..., object]) -> None:
        """Register (or replace) a hook; see ``agentkit.agent._hooks`` for the signatures."""
        if self._hooks is None:
            self._hooks = HookRegistry()
        self._hooks.register(kind, name, fn)

    def remove_hook(self, kind: str, name: str) -> None:
        """Remove one hook (``KeyError`` if there is no such hook)."""
        if self._hooks is None:
            raise KeyError(f"no {kind} hook named {name!r}")
        self._hooks.remove(kind, name)

    def add_hooks(self, hooks: AgentHooks, name: str | None = None) -> None:
        """Register the typed hooks of ``hooks`` (only the methods it overrides).

        Args:
            hooks: An ``AgentHooks`` subclass instance.
            name: The registry name of its hooks (default: the class name); pass the same
                name to ``remove_hook(kind, name)``.
        """
        label = name or type(hooks).__name__
        for kind, fn in _adapt(hooks).items():
            self.register_hook(kind, label, fn)

    def clear_hooks(self, kind: str | None = None) -> None:
        """Remove the hooks of one kind, or all of them."""
        if self._hooks is not None:
            self._hooks.clear(kind)

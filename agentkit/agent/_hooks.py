"""Per-instance hooks around a reply, each model call and each tool call (AgentScope's form).

A *pre* hook is called ``fn(agent, kwargs)`` and may return a new kwargs dict; a *post* hook
is called ``fn(agent, kwargs, output)`` and may return a new output; returning None keeps
the value. Hooks may be sync or async and run in registration order. ``pre_acting`` and
``post_acting`` fire once per tool call, also when calls run in parallel (they then run
concurrently, one pair per call, with no shared re-entrancy flag).

The typed way to take part in a run is a :class:`~agentkit.Capability`; these string hooks
are the untyped form, and the loop has one path for both:

- The reasoning and acting hooks (``pre_reasoning``, ``post_reasoning``, ``pre_acting``,
  ``post_acting``) run through one private capability, built from the agent's registry
  when each run starts (:func:`with_loop_hooks`) and placed *first* in the run's
  capabilities: at every point the string hooks run before the agent's other
  capabilities. A hook registered or removed between runs takes effect on the next run;
  without such hooks no capability is added, so an agent without hooks pays nothing.
  The kwargs they see: ``pre_reasoning`` gets ``{"messages", "tools", "tool_choice"}``
  from the ``ModelRequest`` (``tools``: the function tools' definitions; built-in tools
  stay in the request) and what it returns becomes the request sent; ``post_reasoning``
  gets those kwargs and the assistant ``Msg`` made of the answer, and a ``Msg`` it returns
  becomes the answer (its content, and its metadata through ``MESSAGE_METADATA``);
  ``pre_acting`` gets ``{"tool_call": call}`` and ``post_acting`` those kwargs and the
  call's ``ToolResponse``.
- The reply hooks (``pre_reply``, ``post_reply``) stay around ``reply()`` itself: every
  agent-like has them (``UserAgent`` and ``A2AAgent`` too, which have no run and no
  capabilities; ``MsgHub`` broadcasts through ``post_reply``), and ``pre_reply`` may
  change the reply's inputs, which ``Capability.before_run`` cannot.

The registry is created on first registration, so an agent without hooks pays nothing.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar, cast, get_args

from agentkit.agent._capabilities import MESSAGE_METADATA, Capabilities, Capability
from agentkit.exceptions import UsageError
from agentkit.messages import Msg, ToolUseBlock
from agentkit.models._base import ToolDefinition
from agentkit.tools._context import DepsT
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.models._base import ChatResponse, ModelRequest
    from agentkit.tools._context import RunContext, ToolContext

__all__ = ["HookHost", "HookKind", "HookRegistry", "PostHook", "PreHook", "with_loop_hooks"]

HookKind: TypeAlias = Literal[
    "pre_reply", "post_reply", "pre_reasoning", "post_reasoning", "pre_acting", "post_acting"
]
HOOK_KINDS: frozenset[str] = frozenset(get_args(HookKind))
_LOOP_KINDS = ("pre_reasoning", "post_reasoning", "pre_acting", "post_acting")

T = TypeVar("T")

PreHook: TypeAlias = Callable[
    [object, dict[str, object]],
    dict[str, object] | Awaitable[dict[str, object] | None] | None,
]
"""``fn(agent, kwargs)``: new kwargs, or None to keep them (sync or async)."""
PostHook: TypeAlias = Callable[[object, dict[str, object], object], object]
"""``fn(agent, kwargs, output)``: a new output of the same kind, or None to keep it."""


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

    async def run_pre(
        self, kind: str, agent: object, kwargs: dict[str, object]
    ) -> dict[str, object]:
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

    async def run_post(self, kind: str, agent: object, kwargs: dict[str, object], output: T) -> T:
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

    def clear_hooks(self, kind: str | None = None) -> None:
        """Remove the hooks of one kind, or all of them."""
        if self._hooks is not None:
            self._hooks.clear(kind)


class _LoopHooks(Capability[DepsT]):
    """The reasoning and acting string hooks of one run, as the run's first capability.

    A fresh instance per run (:func:`with_loop_hooks`) holds the run's hook state: the
    kwargs of the latest model request (``post_reasoning`` gets them; a run makes one
    request at a time) and, per call id, the kwargs ``before_tool`` left for
    ``after_tool`` (``post_acting`` gets them; parallel calls each have their own).
    """

    def __init__(self, agent: HookHost, hooks: HookRegistry) -> None:
        self._agent = agent  # the hooks' first argument
        self._hooks = hooks  # the agent's own registry: a removal mid-run shows at once
        self._reasoning: dict[str, object] = {}
        self._acting: dict[str, dict[str, object]] = {}

    async def before_model(self, ctx: RunContext[DepsT], request: ModelRequest) -> ModelRequest:
        """``pre_reasoning``: the request as kwargs, and the kwargs it returns as the request."""
        hooks = self._hooks
        if not (hooks.has("pre_reasoning") or hooks.has("post_reasoning")):
            return request
        kwargs: dict[str, object] = {
            "messages": request.messages,
            "tools": [*request.tools, *map(_builtin, request.builtin_tools)],
            "tool_choice": request.settings.get("tool_choice"),
        }
        if hooks.has("pre_reasoning"):
            kwargs = await hooks.run_pre("pre_reasoning", self._agent, kwargs)
        self._reasoning = kwargs
        return _as_request(request, kwargs)

    async def after_model(self, ctx: RunContext[DepsT], response: ChatResponse) -> ChatResponse:
        """``post_reasoning``: the answer as an assistant ``Msg``, and the ``Msg`` as the answer."""
        if not self._hooks.has("post_reasoning"):
            return response
        recorded = (response.metadata or {}).get(MESSAGE_METADATA)
        metadata = dict(recorded) if isinstance(recorded, dict) else None
        msg = Msg(ctx.agent_name, list(response.content), "assistant", metadata)
        out = await self._hooks.run_post("post_reasoning", self._agent, self._reasoning, msg)
        if not isinstance(out, Msg):
            raise UsageError(f"a post_reasoning hook must return a Msg or None, got {out!r}")
        if out.name != msg.name or out.role != "assistant":  # the stored answer is the agent's
            raise UsageError(
                "a post_reasoning hook may change the answer's content and metadata, not its "
                f"author or role (got {out.name!r}, {out.role!r})"
            )
        # Written back even when the hooks returned None: they may have edited ``msg``.
        merged = {k: v for k, v in (response.metadata or {}).items() if k != MESSAGE_METADATA}
        if out.metadata:
            merged[MESSAGE_METADATA] = dict(out.metadata)
        return dataclasses.replace(
            response, content=out.get_content_blocks(), metadata=merged or None
        )

    async def before_tool(
        self, ctx: ToolContext[DepsT], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        """``pre_acting``: ``{"tool_call": call}``, and the call the hooks return runs."""
        kwargs: dict[str, object] = {"tool_call": call}
        if self._hooks.has("pre_acting"):
            kwargs = await self._hooks.run_pre("pre_acting", self._agent, kwargs)
        self._acting[ctx.call_id] = kwargs  # for this call's post_acting
        block = kwargs.get("tool_call")
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            raise UsageError("a pre_acting hook must leave a tool_use block in 'tool_call'")
        return cast(ToolUseBlock, block)

    async def after_tool(self, ctx: ToolContext[DepsT], result: ToolResponse) -> ToolResponse:
        """``post_acting``: the kwargs ``before_tool`` left and the result; returns a result."""
        kwargs = self._acting.pop(ctx.call_id, {})
        if not self._hooks.has("post_acting"):
            return result
        out = await self._hooks.run_post("post_acting", self._agent, kwargs, result)
        if not isinstance(out, ToolResponse):
            raise UsageError(f"a post_acting hook must return a ToolResponse or None, got {out!r}")
        return out


def _as_request(request: ModelRequest, kwargs: Mapping[str, object]) -> ModelRequest:
    """The request ``pre_reasoning`` kwargs describe (``request`` where they kept it).

    Raises:
        UsageError: when the kwargs lost their shape.
    """
    messages, tools = kwargs.get("messages"), kwargs.get("tools")
    choice = kwargs.get("tool_choice")
    if not (
        isinstance(messages, list)
        and (tools is None or isinstance(tools, list))
        and (choice is None or isinstance(choice, str))
    ):
        raise UsageError(
            "a pre_reasoning hook must return 'messages' (a list of Msg), 'tools' (a list "
            "of ToolDefinition or None) and 'tool_choice' (a str or None)"
        )
    functions, builtin = ToolDefinition.split(cast("list[ToolDefinition]", tools or []))
    settings = request.settings
    if choice != settings.get("tool_choice"):
        settings = settings.copy()
        if choice is None:
            settings.pop("tool_choice", None)
        else:
            settings["tool_choice"] = choice
    if (
        messages is request.messages
        and functions == request.tools
        and builtin == request.builtin_tools
        and settings is request.settings
    ):
        return request
    return dataclasses.replace(
        request,
        messages=cast("list[Msg]", messages),
        tools=functions,
        builtin_tools=builtin,
        settings=settings,
    )


def _builtin(spec: dict[str, object]) -> ToolDefinition:
    """A request's built-in tool spec as the ``ToolDefinition`` a toolkit offered it as."""
    name = spec.get("name", spec.get("type", ""))
    return ToolDefinition(str(name), "", {}, native=spec)


def with_loop_hooks(
    agent: HookHost, hooks: HookRegistry | None, capabilities: Capabilities[DepsT]
) -> Capabilities[DepsT]:
    """A run's capabilities with the reasoning and acting hooks of ``agent`` first.

    Args:
        agent: The agent the hooks get as their first argument.
        hooks: Its registry (None: it has no hooks).
        capabilities: The run's capabilities.

    Called when each run starts, so a hook registered or removed since the last run counts;
    ``capabilities`` themselves when the agent has no such hook (nothing added, nothing to
    pay).
    """
    if hooks is None or not any(hooks.has(kind) for kind in _LOOP_KINDS):
        return capabilities
    return capabilities.first(_LoopHooks(agent, hooks))

"""``Toolkit``: the one door every tool call passes through.

It keeps the registered tools (Python functions, MCP tools, agents as tools: all ``Tool``
implementations) and their groups, hands the model the definitions of the active ones, and
runs calls (``call_tool_function``): validation, timeouts, error responses, output limits.
Tools kept current by someone else (an MCP server's) come with their ``ToolSource``, which
the toolkit holds, copies and saves with its own state.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, overload

from agentkit.exceptions import StateError, ToolGroupError, ToolRegistrationError, UsageError
from agentkit.messages import ToolUseBlock
from agentkit.tools._base import Tool
from agentkit.tools._response import ToolResponse
from agentkit.tools._sources import SavedSources, ToolSource, parse_saved_sources

if TYPE_CHECKING:
    from agentkit.models._base import ToolDefinition
    from agentkit.tools._context import RunContext
    from agentkit.tools._function import PostProcess

__all__ = ["Namesake", "ToolGroup", "Toolkit"]

logger = logging.getLogger("agentkit.tools")
Namesake: TypeAlias = Literal["raise", "override", "skip", "rename"]
"""What to do when a tool name is already taken."""
F = TypeVar("F", bound=Callable[..., object])
BASIC = "basic"
# What OpenAI accepts (Anthropic allows a superset): a name outside it fails the model call.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STATE_VERSION = 1
UNTAINTED: frozenset[str] = frozenset()
"""``Toolkit.tainted_by`` of a toolkit no open-world content reached: one shared object
(``frozenset()`` makes a new one per call since Python 3.10)."""
_STATE_KEYS = ("version", "active_groups")  # every other key holds saved tool-source parts


@dataclass(slots=True)
class ToolGroup:
    """A named set of tools switched on and off together.

    Attributes:
        name: Group name.
        description: What the group is for (shown to the model by the meta tool).
        active: Whether its tools are offered to the model.
        notes: Instructions for using the group's tools, added to the prompt while active.
    """

    name: str
    description: str
    active: bool = False
    notes: str | None = None


class Toolkit:
    """Registered tools, their groups, and the execution of tool calls.

    Args:
        max_output_chars: Final tool outputs with more text than this are truncated with a
            note telling the model so (None: no limit).
        default_timeout: Seconds allowed to a call when its tool has no ``timeout``.

    Attributes:
        tainted_by: Where the open-world content that entered runs on this toolkit came
            from (``"*"``: anywhere, such as the web; a server's name: that server's
            output). Untrusted MCP servers' tools need approval once it is not empty (see
            ``agentkit.mcp.mark_untrusted_content``); clear it when a new conversation
            starts. A copy starts with what its original had. A frozenset, replaced (not
            changed) on each mark, so an untainted toolkit costs no set of its own.

    Example:
        >>> toolkit = Toolkit()
        >>> @toolkit.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> toolkit.get_tool_definitions()[0].name
        'add'
    """

    __slots__ = (
        "__weakref__",
        "_active",
        "_groups",
        "_meta",
        "_saved_sources",
        "_shared",
        "_sources",
        "_tools",
        "default_timeout",
        "max_output_chars",
        "tainted_by",
    )

    def __init__(
        self, *, max_output_chars: int | None = 100_000, default_timeout: float | None = None
    ) -> None:
        if max_output_chars is not None and max_output_chars < 1:
            raise UsageError(f"max_output_chars must be positive or None, not {max_output_chars}")
        self.max_output_chars = max_output_chars
        self.default_timeout = default_timeout
        self._tools: dict[str, Tool] = {}
        self._groups: dict[str, ToolGroup] = {
            BASIC: ToolGroup(BASIC, "Tools that are always available.", active=True)
        }
        self._active: list[Tool] | None = None  # cache, reset on any registry change
        self._meta: Tool | None = None
        # True while ``_tools`` and ``_groups`` may be shared with a copy: copied before
        # the first change (copy-on-write).
        self._shared = False
        self._sources: tuple[ToolSource, ...] = ()
        # Loaded parts of sources not added yet: handed over by ``add_tool_source``.
        self._saved_sources: SavedSources = {}
        self.tainted_by: frozenset[str] = UNTAINTED

    def copy(self) -> Toolkit:
        """A toolkit with the same tools, groups and settings, copied on write.

        The copy shares this toolkit's registry until either side changes it (registering
        or removing tools, creating, removing or switching groups, loading a state): the
        side that changes copies the registry first, so no change ever shows on the other
        side. Cheap (no dict or group is copied until then): use it for a per-conversation
        toolkit built from a template. The tools themselves are shared, as when one tool is
        registered in two toolkits; a registered meta tool is rebuilt for the copy so that
        it switches the copy's groups. Change groups through the toolkit's methods or the
        ``groups`` view: a ``ToolGroup`` object held from before the copy may belong to the
        other side afterwards. The copy has this toolkit's tool sources (each follows it:
        when an MCP server's tool list changes, every copy is refreshed as this toolkit
        is), their saved parts not claimed yet, and its ``tainted_by``.
        """
        self._shared = True
        clone = self._copy_registry()
        for source in self._sources:
            clone.add_tool_source(source.follow(clone))
        return clone

    def _copy_registry(self) -> Toolkit:
        """The copy itself (see :meth:`copy`)."""
        meta = self._meta
        if meta is None:
            shared = {"_tools": self._tools, "_groups": self._groups, "_active": self._active}
            return self._copied({**shared, "_meta": None, "_shared": True})
        # The meta tool is bound to this toolkit: the copy gets a registry of its own, with
        # its own meta tool at the same position in the registration order.
        from agentkit.tools._meta import MetaTool

        rebound = MetaTool(self, meta.name)  # the same groups, so the same schema
        rebound.group = meta.group
        tools = dict(self._tools)
        tools[meta.name] = rebound
        groups = {name: replace(g) for name, g in self._groups.items()}
        owned = {"_tools": tools, "_groups": groups, "_active": None, "_meta": rebound}
        clone = self._copied({**owned, "_shared": False})
        rebound.toolkit = clone
        return clone

    def _copied(self, fields: Mapping[str, object]) -> Toolkit:
        """A shallow copy of this toolkit with its registry ``fields`` replaced.

        The copy holds no tool source yet (:meth:`copy` adds each one, following the copy)
        and a copy of its own of the saved parts not claimed yet.
        """
        cls = type(self)
        clone = cls.__new__(cls)
        if hasattr(self, "__dict__"):  # a subclass's own attributes
            clone.__dict__.update(self.__dict__)
        slots: dict[str, object] = {
            "max_output_chars": self.max_output_chars,
            "default_timeout": self.default_timeout,
            "tainted_by": self.tainted_by,  # immutable: shared
            "_sources": (),
            "_saved_sources": {
                key: {name: dict(part) for name, part in parts.items()}
                for key, parts in self._saved_sources.items()
            },
            **fields,
        }
        for name, value in slots.items():
            setattr(clone, name, value)
        return clone

    def _own(self) -> None:
        """Copy the shared registry before a change (see :meth:`copy`)."""
        if self._shared:
            self._tools = dict(self._tools)
            self._groups = {name: replace(g) for name, g in self._groups.items()}
            self._shared = False

    # ----------------------------------------------------------------- registration

    def register_tool_function(
        self,
        fn: Callable[..., object],
        *,
        name: str | None = None,
        description: str | None = None,
        group: str = BASIC,
        preset_kwargs: Mapping[str, object] | None = None,
        requires_approval: bool = False,
        sequential: bool = False,
        timeout: float | None = None,
        postprocess: PostProcess | None = None,
        namesake: Namesake = "raise",
        inline: bool = False,
    ) -> Tool:
        """Register a Python function (sync or async, plain or generator) as a tool.

        Args:
            fn: The function. Its signature and docstring (Google, NumPy or reST) give the
                schema; a parameter annotated ``ToolContext`` receives the call context.
            name: Tool name (default: the function's name).
            description: Tool description (default: the docstring's summary and body).
            group: Tool group (must exist; "basic" always does).
            preset_kwargs: Arguments fixed now and hidden from the model (API keys...).
            requires_approval: A human must approve each call (the agent enforces it).
            sequential: Never run concurrently with other calls of the same turn.
            timeout: Seconds before a call is stopped and answered with an error.
            postprocess: ``fn(tool_use_block, final_response)`` returning a replacement
                response or None (sync or async).
            namesake: What to do if the name is taken: "raise", "override", "skip" (keep
                the existing tool) or "rename" (append ``_2``, ``_3``...).
            inline: Call a sync function on the event loop instead of in a worker thread:
                for functions that return in microseconds and never block (no I/O, no
                locks), where the thread handoff would cost more than the call. The loop
                waits for the call, and an interrupt cannot stop it mid-call: it lands when
                the call returns (between items for a sync generator).

        Returns:
            The registered tool (the existing one for namesake="skip").

        Raises:
            ToolRegistrationError: the signature cannot be described, the name is taken, or
                ``inline=True`` for an async function or together with ``timeout``.
            ToolGroupError: the group does not exist.
        """
        # Imported on first registration: pydantic and docstring-parser are not needed
        # by ``import agentkit``.
        from agentkit.tools._function import FunctionTool

        tool = FunctionTool(
            fn,
            name=name,
            description=description,
            group=group,
            preset_kwargs=preset_kwargs,
            requires_approval=requires_approval,
            sequential=sequential,
            timeout=timeout,
            postprocess=postprocess,
            inline=inline,
        )
        return self.register_tool(tool, namesake=namesake)

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        group: str = BASIC,
        preset_kwargs: Mapping[str, object] | None = None,
        requires_approval: bool = False,
        sequential: bool = False,
        timeout: float | None = None,
        postprocess: PostProcess | None = None,
        namesake: Namesake = "raise",
        inline: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, **kwargs: Any) -> F | Callable[[F], F]:
        """Decorator form of :meth:`register_tool_function`; returns the function unchanged.

        Use bare (``@toolkit.tool``) or with keyword arguments
        (``@toolkit.tool(name=..., timeout=...)``).
        """

        def decorate(func: F) -> F:
            self.register_tool_function(func, **kwargs)
            return func

        return decorate if fn is None else decorate(fn)

    def register_tool(self, tool: Tool, *, namesake: Namesake = "raise") -> Tool:
        """Register any ``Tool`` implementation (MCP tool, agent as tool, custom).

        Args:
            tool: The tool.
            namesake: What to do if its name is taken (see :meth:`register_tool_function`).

        Returns:
            The registered tool (the existing one for namesake="skip").

        Raises:
            ToolRegistrationError: bad name, name taken (namesake="raise"), bad namesake.
            ToolGroupError: the tool's group does not exist.
        """
        if not _NAME_RE.match(tool.name):
            raise ToolRegistrationError(
                f"invalid tool name {tool.name!r}: use 1 to 64 letters, digits, '_' or '-' "
                "(pass name=... to choose one)"
            )
        if tool.group not in self._groups:
            raise ToolGroupError(
                f"tool {tool.name!r}: the tool group {tool.group!r} does not exist; "
                "create it first with create_tool_group()"
            )
        existing = self._tools.get(tool.name)
        if existing is not None and existing is not tool:
            if namesake == "raise":
                raise ToolRegistrationError(
                    f"a tool named {tool.name!r} is already registered; remove it first or "
                    "pass namesake='override', 'skip' or 'rename'"
                )
            if namesake == "skip":
                return existing
            if namesake == "rename":
                tool.name = self._free_name(tool.name)
                tool.invalidate_schema()
            elif namesake != "override":
                raise ToolRegistrationError(f"unknown namesake strategy {namesake!r}")
        self._own()
        self._tools[tool.name] = tool
        self._active = None
        return tool

    def _free_name(self, name: str) -> str:
        i = 2
        while True:
            suffix = f"_{i}"
            candidate = name[: 64 - len(suffix)] + suffix
            if candidate not in self._tools:
                return candidate
            i += 1

    def remove_tools(self, names: Iterable[str]) -> None:
        """Remove tools by name; names not registered are ignored."""
        for name in [names] if isinstance(names, str) else names:
            if name in self._tools:
                self._own()
            if self._tools.pop(name, None) is not None:
                self._active = None
                if self._meta is not None and self._meta.name == name:
                    self._meta = None

    def get_tool(self, name: str) -> Tool | None:
        """The tool registered under ``name``, or None."""
        return self._tools.get(name)

    @property
    def tools(self) -> Mapping[str, Tool]:
        """All registered tools by name (read-only view), active or not."""
        return MappingProxyType(self._tools)

    def is_active(self, tool: Tool) -> bool:
        """Whether ``tool``'s group is active (its schema is offered to the model)."""
        group = self._groups.get(tool.group)
        return group is not None and group.active

    def active_tools(self) -> list[Tool]:
        """The tools whose group is active, in registration order."""
        if self._active is None:
            self._active = [t for t in self._tools.values() if self.is_active(t)]
        return list(self._active)

    def get_tool_definitions(self) -> list[ToolDefinition]:
        """The provider-neutral definitions of the active tools (``ChatModel.request``)."""
        return [t.tool_definition for t in self.active_tools()]

    # ----------------------------------------------------------------- calling

    def call_tool_function(
        self,
        block: ToolUseBlock,
        *,
        context: object = None,
        run: RunContext[Any] | None = None,
        approved: bool = False,
    ) -> AsyncGenerator[ToolResponse, None]:
        """Run the call ``block`` asks for.

        Use as ``async for chunk in toolkit.call_tool_function(block)``: progress chunks
        (``is_last=False``), then exactly one final chunk (``is_last=True``). Never raises
        for tool-side problems (unknown tool, inactive group, invalid JSON or arguments, the
        tool raising, a timeout): they come back as final chunks with ``is_error=True`` and
        ``metadata["error"]`` naming the kind. Cancellation propagates: the caller records
        the interrupted call (see :func:`agentkit.tools.interrupted_response`). Consume it
        to the end or close it (``contextlib.aclosing``).

        Args:
            block: The ``tool_use`` block.
            context: Passed to the tool as ``ToolContext.data`` (the agent passes itself).
            run: The run's context (its deps, id, usage...); the tool's ``ToolContext`` is
                it plus the call. None: a call outside any run (no deps).
            approved: A human approved this call (``ToolContext.tool_call_approved``).
        """
        from agentkit.tools._call import call_tool

        return call_tool(self, block, context, run=run, approved=approved)

    async def execute(
        self,
        block: ToolUseBlock,
        *,
        context: object = None,
        on_progress: Callable[[ToolResponse], Awaitable[None] | None] | None = None,
    ) -> ToolResponse:
        """Run a call to its end and return the final response.

        The coroutine form of :meth:`call_tool_function` (same checks, same errors, same
        cancellation): progress chunks go to ``on_progress`` (sync or async), if given.
        """
        async with aclosing(self.call_tool_function(block, context=context)) as chunks:
            async for chunk in chunks:
                if chunk.is_last:
                    return chunk
                if on_progress is not None:
                    result = on_progress(chunk)
                    if inspect.isawaitable(result):
                        await result
        raise AssertionError("a tool call ended without a final response")  # pragma: no cover

    # ----------------------------------------------------------------- groups

    def create_tool_group(
        self, name: str, description: str, active: bool = False, notes: str | None = None
    ) -> ToolGroup:
        """Create a tool group.

        Raises:
            ToolGroupError: the name is taken or invalid.
        """
        if name in self._groups:
            raise ToolGroupError(f"the tool group {name!r} already exists")
        if not _NAME_RE.match(name):
            raise ToolGroupError(f"invalid tool group name {name!r}")
        group = ToolGroup(name, description, active, notes)
        self._own()
        self._groups[name] = group
        self._groups_changed()
        return group

    def update_tool_groups(self, names: Iterable[str], active: bool) -> None:
        """Activate or deactivate groups (all or nothing).

        Raises:
            ToolGroupError: a group does not exist, or an attempt to deactivate "basic".
        """
        names = [names] if isinstance(names, str) else list(names)
        self._check_groups(names, "deactivate" if not active else None)
        self._own()
        for name in names:
            self._groups[name].active = active
        self._groups_changed()

    def remove_tool_groups(self, names: Iterable[str]) -> None:
        """Remove groups and their tools (all or nothing).

        Raises:
            ToolGroupError: a group does not exist, or an attempt to remove "basic".
        """
        names = [names] if isinstance(names, str) else list(names)
        self._check_groups(names, "remove")
        self._own()
        for name in names:
            del self._groups[name]
        self.remove_tools([t.name for t in self._tools.values() if t.group in names])
        self._groups_changed()

    def _check_groups(self, names: list[str], basic_forbidden: str | None) -> None:
        unknown = [n for n in names if n not in self._groups]
        if unknown:
            raise ToolGroupError(
                f"unknown tool group(s) {unknown}; existing: {sorted(self._groups)}"
            )
        if basic_forbidden and BASIC in names:
            raise ToolGroupError(f"cannot {basic_forbidden} the {BASIC!r} tool group")

    @property
    def groups(self) -> Mapping[str, ToolGroup]:
        """All tool groups by name (read-only view; the groups are this toolkit's own)."""
        self._own()  # a caller may switch a group through it (``groups[n].active = ...``)
        return MappingProxyType(self._groups)

    def get_active_group_notes(self) -> str:
        """The notes of the active groups, for the system prompt ("" when there are none)."""
        return "\n\n".join(
            f"## Tool group {g.name!r}\n{g.notes}"
            for g in self._groups.values()
            if g.active and g.notes
        )

    def _groups_changed(self) -> None:
        self._active = None
        if self._meta is not None:
            from agentkit.tools._meta import refresh_meta_tool

            refresh_meta_tool(self._meta, self)

    # ----------------------------------------------------------------- meta tool

    def register_meta_tool(self, name: str = "reset_equipped_tools") -> Tool:
        """Register the meta tool that lets the model choose the active tool groups itself.

        Its schema lists one boolean per group (other than "basic"); a call activates exactly
        the groups set to true. Invalid arguments change nothing.
        """
        from agentkit.tools._meta import MetaTool

        if self._meta is not None:
            self.remove_tools([self._meta.name])
        meta = MetaTool(self, name)
        self.register_tool(meta)
        self._meta = meta
        return meta

    @property
    def meta_tool_name(self) -> str | None:
        """Name of the registered meta tool, or None."""
        return None if self._meta is None else self._meta.name

    # ----------------------------------------------------------------- sources

    @property
    def tool_sources(self) -> tuple[ToolSource, ...]:
        """The tool sources added (MCP clients' registrations), in order."""
        return self._sources

    def add_tool_source(self, source: ToolSource) -> None:
        """Hold ``source``: copies follow it, and its part is saved with this toolkit's state.

        A part of the loaded state saved for it (same ``state_key`` and ``name``) and not
        claimed yet is restored into it now. The source registers its tools itself.
        """
        if any(held is source for held in self._sources):
            return
        self._sources = (*self._sources, source)
        parts = self._saved_sources.get(source.state_key)
        part = parts.pop(source.name, None) if parts else None
        if part is not None:
            source.restore_state(part)

    def remove_tool_source(self, source: ToolSource) -> None:
        """Stop holding ``source`` (its tools stay registered; remove them apart)."""
        self._sources = tuple(held for held in self._sources if held is not source)

    # ----------------------------------------------------------------- state

    def state_dict(self) -> dict[str, object]:
        """JSON-safe state: which groups are active, and the tool sources' saved parts.

        An MCP client's part is its tool pins (under ``"mcp_pins"``): a restored session
        still catches a tool changed while the process was down.
        """
        state: dict[str, object] = {
            "version": _STATE_VERSION,
            "active_groups": [g.name for g in self._groups.values() if g.active],
        }
        saved: SavedSources = {
            key: {name: dict(part) for name, part in parts.items()}
            for key, parts in self._saved_sources.items()
        }
        for source in self._sources:
            part = source.save_state()
            if part is not None:
                saved.setdefault(source.state_key, {})[source.name] = dict(part)
        state.update((key, parts) for key, parts in saved.items() if parts)
        return state

    def load_state_dict(self, state: object) -> None:
        """Restore which groups are active, and the tool sources' saved parts.

        Groups this toolkit lacks are skipped (logged). A part saved for a source not added
        yet waits for it (see :meth:`add_tool_source`) and is saved again meanwhile.

        Raises:
            StateError: ``state`` is malformed or of another version.
        """
        if not isinstance(state, Mapping) or state.get("version") != _STATE_VERSION:
            raise StateError(f"not a Toolkit state of version {_STATE_VERSION}: {state!r}")
        active = state.get("active_groups")
        if not isinstance(active, list) or not all(isinstance(n, str) for n in active):
            raise StateError("Toolkit state: 'active_groups' must be a list of names")
        missing = [n for n in active if n not in self._groups]
        if missing:
            logger.warning("Toolkit state names unknown tool groups %s; skipped", missing)
        # Checked before anything changes.
        saved = parse_saved_sources(state, [k for k in state if k not in _STATE_KEYS])
        self._own()
        for group in self._groups.values():
            group.active = group.name == BASIC or group.name in active
        self._groups_changed()
        for key, parts in saved.items():
            waiting: dict[str, dict[str, str]] = {}
            for name, part in parts.items():
                claimed = [s for s in self._sources if s.state_key == key and s.name == name]
                for source in claimed:
                    source.restore_state(part)
                if not claimed:
                    waiting[name] = part
            self._saved_sources[key] = waiting

    def __repr__(self) -> str:
        return f"Toolkit(tools={list(self._tools)}, groups={list(self._groups)})"

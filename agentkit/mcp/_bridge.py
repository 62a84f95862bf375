"""Registering an MCP client's tools in a Toolkit, and keeping them in sync.

A registration is the toolkit's ``ToolSource`` for the client: the toolkit holds it (and
has it follow each of its copies, each copy getting a registration of its own), and the
client refers to the registrations of its tools weakly (:class:`Registrations`), so when
the server announces ``tools/list_changed`` (handshake era) or a ``ToolsListChanged`` listen
event (2026-07-28), or after a reconnect, every toolkit holding its tools is refreshed: new
tools are added, removed tools removed, changed ones replaced.

A *deferred* registration (``defer=True``: a cold server) registers the tools of the
manifest cached on disk (:mod:`agentkit.mcp._manifest_cache`) without starting the server;
the first call of one of its tools starts it, lists its tools again and applies that
listing like a ``list_changed``, so a definition that changed while the server was cold is
caught by the pins before the call runs.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from agentkit.exceptions import MCPError, ToolRegistrationError
from agentkit.mcp._defenses import ToolChange
from agentkit.mcp._manifest_cache import Manifest, load_manifest, save_manifest
from agentkit.mcp._pins import check_pins, withhold
from agentkit.mcp._tool import MCPTool, tool_hash, toolkit_name
from agentkit.tools._base import Tool
from agentkit.tools._response import ToolResponse
from agentkit.tools._toolkit import Namesake, Toolkit

if TYPE_CHECKING:
    import mcp_types

    from agentkit.mcp._client import MCPClient
    from agentkit.tools._context import ToolContext

__all__ = [
    "Registration",
    "Registrations",
    "create_resource_tool",
    "register_mcp_client",
    "remove_mcp_clients",
]


@dataclass(eq=False)
class Registration:
    """An MCP client's tools in one toolkit: that toolkit's ``ToolSource`` for the client.

    Held by the toolkit (``Toolkit.tool_sources``), which it refers to weakly: a finished
    conversation's toolkit copy goes with its registration.
    """

    client: MCPClient
    toolkit_ref: weakref.ref[Toolkit]
    group: str
    enable: frozenset[str] | None
    disable: frozenset[str]
    prefix: str | None
    timeout: float | None
    namesake: Namesake
    cold: bool  # defer=True: the tools start the server on their first call
    names: list[str] = field(default_factory=list)  # the names its tools have there now

    @property
    def toolkit(self) -> Toolkit | None:
        """The toolkit (None once it is gone)."""
        return self.toolkit_ref()

    # -- ToolSource ------------------------------------------------------------------
    @property
    def state_key(self) -> str:
        """Saved under ``"mcp_pins"`` in the toolkit's state."""
        return "mcp_pins"

    @property
    def name(self) -> str:
        """The client's name: its pins are saved under it."""
        return self.client.name

    def follow(self, copy: Toolkit) -> Registration:
        """The registration of the same tools in ``copy`` (refreshed with this one)."""
        twin = replace(self, toolkit_ref=weakref.ref(copy), names=list(self.names))
        self.client.registrations.add(twin)
        return twin

    def save_state(self) -> dict[str, str] | None:
        """The client's tool pins (None when it does not pin)."""
        return dict(sorted(self.client.pins.items())) if self.client.pin_tools else None

    def restore_state(self, saved: Mapping[str, str]) -> None:
        """Adopt saved pins (they win: they are what was approved) and check the tools."""
        if not self.client.pin_tools:
            return
        self.client.pins.update(saved)
        toolkit = self.toolkit
        if toolkit is not None:
            check_pins(self.client, toolkit)

    # -- building ----------------------------------------------------------------------
    def select(self, tools: list[mcp_types.Tool]) -> list[mcp_types.Tool]:
        return [
            t
            for t in tools
            if (self.enable is None or t.name in self.enable) and t.name not in self.disable
        ]

    def build(self, client: MCPClient, tool: mcp_types.Tool) -> MCPTool:
        name = toolkit_name(tool.name, self.prefix)
        kind = ColdMCPTool if self.cold else MCPTool
        built = kind(
            client, tool, name=name, group=self.group, timeout=self.timeout, toolkit=self.toolkit
        )
        pinned = client.pins.setdefault(tool.name, built.pin) if client.pin_tools else None
        if pinned is not None and pinned != built.pin:  # changed since first registered
            built.changed = _change(client, tool, pinned, built.pin)
            withhold(built)  # the approved text is not at hand: show the model neither
            client.events.report_tool_change(built.changed)
        return built


class Registrations:
    """The registrations of an MCP client's tools (``MCPClient.registrations``), weakly.

    The toolkits hold their registrations; the client only finds them, in registration
    order, to refresh them. One lock serializes the first calls of a cold server's tools,
    so concurrent ones start it once.
    """

    def __init__(self) -> None:
        self._refs: list[weakref.ref[Registration]] = []
        self.starting = anyio.Lock()

    def add(self, reg: Registration) -> None:
        """Refer to ``reg``."""
        self._refs.append(weakref.ref(reg))

    def discard(self, reg: Registration) -> None:
        """Forget ``reg`` (and any gone)."""
        self._refs = [r for r in self._refs if r() not in (None, reg)]

    def __iter__(self) -> Iterator[Registration]:
        """The live registrations whose toolkit still exists, in registration order."""
        live = [reg for r in self._refs if (reg := r()) is not None and reg.toolkit is not None]
        if len(live) != len(self._refs):
            self._refs = [weakref.ref(reg) for reg in live]
        return iter(live)

    def __bool__(self) -> bool:
        return any(True for _ in self)

    def remove_changed(self, mcp_names: Sequence[str] | None) -> None:
        """Remove the changed (disabled) tools named (all: None) from every toolkit.

        ``MCPClient.accept_tool_changes`` calls it before refreshing: the accepted
        definitions are registered anew.
        """
        for reg in self:
            toolkit = reg.toolkit
            if toolkit is None:
                continue
            held = [toolkit.get_tool(name) for name in reg.names]
            toolkit.remove_tools(
                tool.name
                for tool in held
                if isinstance(tool, MCPTool)
                and tool.changed is not None
                and (mcp_names is None or tool.mcp_name in mcp_names)
            )


def _check_selection(client: MCPClient, reg: Registration, tools: list[mcp_types.Tool]) -> None:
    available = {t.name for t in tools}
    for label, names in (
        ("enable_funcs", reg.enable or frozenset()),
        ("disable_funcs", reg.disable),
    ):
        unknown = sorted(names - available)
        if unknown:
            raise ToolRegistrationError(
                f"{label} names tools that MCP server {client.name!r} does not have: {unknown}"
            )


def _check_collisions(client: MCPClient, reg: Registration, tools: list[MCPTool]) -> None:
    seen: dict[str, str] = {}
    for tool in tools:
        if tool.name in seen:
            raise ToolRegistrationError(
                f"MCP tools {seen[tool.name]!r} and {tool.mcp_name!r} of {client.name!r} both "
                f"map to {tool.name!r} (provider-safe names allow only letters, digits, _ and -); "
                f"pass disable_funcs=[{tool.mcp_name!r}] to register_mcp_client to skip one"
            )
        seen[tool.name] = tool.mcp_name
    if reg.namesake != "raise":
        return
    toolkit = reg.toolkit
    taken = sorted(t.name for t in tools if toolkit and toolkit.get_tool(t.name) is not None)
    if taken:
        raise ToolRegistrationError(
            f"MCP server {client.name!r} has tools whose names are already registered: {taken}; "
            "pass prefix=... to register_mcp_client to keep both"
        )


async def register_mcp_client(
    toolkit: Toolkit,
    client: MCPClient,
    *,
    group: str = "basic",
    enable_funcs: Iterable[str] | None = None,
    disable_funcs: Iterable[str] | None = None,
    prefix: str | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 (the tools' timeout, not this call's)
    namesake: Namesake = "raise",
    defer: bool = False,
) -> list[Tool]:
    """Register the tools of ``client`` in ``toolkit`` (connecting the client if needed).

    The toolkit holds the registration as a tool source (``Toolkit.tool_sources``): its
    copies keep following the server's tool list, and its state saves the tools' pins.
    Registering the same client again replaces its tools.

    Args:
        toolkit: The Toolkit.
        client: The MCP client (connected now if it was not).
        group: Tool group of the registered tools.
        enable_funcs: Only these server tools (server-side names).
        disable_funcs: All but these server tools.
        prefix: Registered names become ``{prefix}_{name}``, to keep two servers' tools apart.
        timeout: Per-call timeout (seconds) enforced by the Toolkit.
        namesake: What the Toolkit does on a name clash; ``"raise"`` checks every name
            first, so a clash registers nothing.
        defer: A cold server: register the tools of its cached manifest and start the
            server only on the first call of one of them. Without a cached manifest the
            server is started once to list its tools, then stopped.

    Returns:
        The registered tools.

    Raises:
        ToolRegistrationError: a name clash, or enable/disable lists naming unknown tools.
        MCPConnectionError: the server cannot be reached.
    """
    _refuse_override(namesake)
    listed = await _listed(client, defer)
    reg = Registration(
        client,
        weakref.ref(toolkit),
        group=group,
        enable=frozenset(enable_funcs) if enable_funcs is not None else None,
        disable=frozenset(disable_funcs or ()),
        prefix=prefix,
        timeout=timeout,
        namesake=namesake,
        cold=defer,
    )
    _check_selection(client, reg, listed)
    _forget(client, toolkit)  # registering the same client again replaces its tools
    registered = _install(toolkit, client, reg, listed)
    client.registrations.add(reg)
    client.events.on_tools_changed(_refresh)
    if defer:
        client.events.on_tools_changed(_recache)
    return registered


async def _listed(client: MCPClient, defer: bool) -> list[mcp_types.Tool]:
    """The server's tools: its cached manifest when deferred, else the live list."""
    if defer:
        return await _manifest_tools(client)
    if not client.is_connected:
        await client.connect()
    return await client.list_tools()


def _install(
    toolkit: Toolkit, client: MCPClient, reg: Registration, listed: list[mcp_types.Tool]
) -> list[Tool]:
    """Add ``reg`` as a tool source and register its tools; on a failure, neither stays."""
    toolkit.add_tool_source(reg)  # adopts the pins of a loaded session (before building)
    try:
        tools = [reg.build(client, t) for t in reg.select(listed)]
        _check_collisions(client, reg, tools)
        registered = [toolkit.register_tool(t, namesake=reg.namesake) for t in tools]
    except BaseException:
        toolkit.remove_tool_source(reg)
        raise
    reg.names = [t.name for t in registered]
    return registered


# -- cold servers ----------------------------------------------------------------------------


async def _stop(client: MCPClient) -> None:
    with anyio.CancelScope(shield=True):  # an interrupted start leaves no process behind
        await client.close()


async def _manifest_tools(client: MCPClient) -> list[mcp_types.Tool]:
    """The tools of a deferred client: the cached manifest, else listed once (then stopped)."""
    if client.is_connected:  # already running: its live list is the better manifest
        listed = await client.list_tools()
        _save(client, listed)
        return listed
    manifest = load_manifest(client.server)
    if manifest is not None:
        return manifest.tools
    try:
        await client.connect()
        listed = await client.list_tools(refresh=True)
        _save(client, listed)
    finally:
        await _stop(client)
    return listed


def _save(client: MCPClient, listed: list[mcp_types.Tool]) -> None:
    info = client.server_info
    version = info.version if info is not None else None
    cached = load_manifest(client.server)
    if cached is None or cached.server_version != version or not cached.same_tools(listed):
        save_manifest(client.server, Manifest(version, listed))


async def _recache(client: MCPClient) -> None:
    """``list_changed`` of a deferred client's server: keep the cached manifest current."""
    _save(client, await client.list_tools())


def _up(client: MCPClient) -> bool:
    return client.is_connected


async def _start_cold(client: MCPClient) -> str | None:
    """Start a deferred client's server for its first call. None, or why it cannot run."""
    if client.is_connected:
        return None
    async with client.registrations.starting:  # concurrent first calls start it once
        if _up(client):  # another first call started it while this one waited
            return None
        try:
            await client.connect()  # bounded by the client's connect_timeout
            listed = await client.list_tools(refresh=True)
        except MCPError as exc:
            await _stop(client)
            return f"MCP server {client.name!r} could not be started for this call: {exc}"
        except BaseException:
            await _stop(client)
            raise
        _save(client, listed)  # a new server version or tool list: the next cold start uses it
        for reg in list(client.registrations):  # changed definitions meet the pins here
            _apply(client, reg, listed)
    return None


class ColdMCPTool(MCPTool):
    """A tool of a deferred (cold) server: its first call starts the server."""

    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Start the server if it is cold, then call the tool."""
        return self._cold_call(arguments, None)

    def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Start the server if it is cold, then call the tool (see ``MCPTool``)."""
        return self._cold_call(arguments, context)

    async def _cold_call(
        self, arguments: dict[str, object], context: ToolContext | None
    ) -> AsyncIterator[ToolResponse]:
        meta = {"mcp_server": self.client.name, "error": "mcp_start"}
        problem = await _start_cold(self.client)
        if problem is not None:
            yield ToolResponse.error(problem, metadata=meta)
            return
        # The start may have replaced this tool (a changed, unpinned definition) or removed
        # it; the call goes to what the toolkit holds under this name now.
        toolkit: Any = context.toolkit if context is not None and context.toolkit else None
        current = toolkit.get_tool(self.name) if toolkit is not None else self
        if not isinstance(current, MCPTool) or current.client is not self.client:
            yield ToolResponse.error(
                f"MCP server {self.client.name!r} no longer offers the tool {self.mcp_name!r}",
                metadata=meta,
            )
            return
        calls = (
            MCPTool.invoke_with_context(current, arguments, context)
            if context is not None
            else MCPTool.invoke(current, arguments)
        )
        async for chunk in calls:
            yield chunk


def _refuse_override(namesake: object) -> None:
    """A server could shadow a local tool: its tools never override registered ones."""
    if namesake == "override":
        raise ToolRegistrationError(
            "an MCP server's tools may not override registered tools (a server could shadow a "
            "local tool); pass prefix=... to keep both"
        )


def _registrations(toolkit: Toolkit) -> list[Registration]:
    return [s for s in toolkit.tool_sources if isinstance(s, Registration)]


def _forget(client: MCPClient, toolkit: Toolkit) -> None:
    """Remove ``client``'s earlier registration in ``toolkit`` (tools and record)."""
    for reg in _registrations(toolkit):
        if reg.client is client:
            toolkit.remove_tools([n for n in reg.names if _owned(toolkit, n, client)])
            _drop(toolkit, reg)


def _drop(toolkit: Toolkit, reg: Registration) -> None:
    toolkit.remove_tool_source(reg)
    reg.client.registrations.discard(reg)


def _owned(toolkit: Toolkit, name: str, client: MCPClient) -> bool:
    tool = toolkit.get_tool(name)
    return isinstance(tool, MCPTool) and tool.client is client


async def remove_mcp_clients(toolkit: Toolkit, clients_or_names: Iterable[MCPClient | str]) -> None:
    """Remove every tool that came from the given clients (objects or client names).

    Their registrations go too (copies made before keep theirs). The clients are not
    closed: they may serve other toolkits.
    """
    wanted = list(clients_or_names)
    names = {c for c in wanted if isinstance(c, str)}
    objects = [c for c in wanted if not isinstance(c, str)]
    doomed: list[str] = []
    clients: list[MCPClient] = list(objects)
    for name, tool in toolkit.tools.items():
        if isinstance(tool, MCPTool) and (tool.client in objects or tool.client.name in names):
            doomed.append(name)
            if tool.client not in clients:
                clients.append(tool.client)
    if doomed:
        toolkit.remove_tools(doomed)
    for reg in _registrations(toolkit):
        if reg.client in clients or reg.client.name in names:
            _drop(toolkit, reg)


async def _refresh(client: MCPClient) -> None:
    """Bring every toolkit that registered ``client`` in line with its current tool list."""
    if not client.registrations:
        return
    listed = await client.list_tools(refresh=True)
    for reg in list(client.registrations):
        _apply(client, reg, listed)


def _change(client: MCPClient, tool: mcp_types.Tool, old: str, new: str) -> ToolChange:
    change = ToolChange(client.name, tool.name, old, new, tool.description or "")
    client.logger.warning(
        "MCP server %r changed tool %r after it was registered: disabled until accepted "
        "(client.accept_tool_changes())",
        client.name,
        tool.name,
    )
    return change


def _hold_changed(
    client: MCPClient, reg: Registration, toolkit: Toolkit, wanted: dict[str, mcp_types.Tool]
) -> list[str]:
    """Pinned tools whose new definition differs: keep the old one, disabled. Their names."""
    held = []
    for name, definition in wanted.items():
        tool = toolkit.get_tool(name)
        if not (client.pin_tools and isinstance(tool, MCPTool) and tool.client is client):
            continue
        new = tool_hash(definition)
        if new == client.pins.get(definition.name, new):
            continue
        held.append(name)
        if tool.changed is None or tool.changed.new_hash != new:
            tool.changed = _change(client, definition, client.pins[definition.name], new)
            client.events.report_tool_change(tool.changed)
    return held


def _apply(client: MCPClient, reg: Registration, listed: list[mcp_types.Tool]) -> None:
    """Bring ``reg``'s toolkit's tools of ``client`` in line with ``listed``."""
    toolkit = reg.toolkit
    if toolkit is None:
        return
    registered = reg.names
    wanted = {toolkit_name(t.name, reg.prefix): t for t in reg.select(listed)}
    current = [n for n in registered if _owned(toolkit, n, client)]
    held = _hold_changed(client, reg, toolkit, wanted)
    stale = [
        n
        for n in current
        if n not in held and (n not in wanted or not _same(toolkit.get_tool(n), wanted[n]))
    ]
    if stale:
        toolkit.remove_tools(stale)
    names = [n for n in current if n not in stale]
    for name, definition in wanted.items():
        if name in names:
            continue
        if toolkit.get_tool(name) is not None:
            client.logger.warning(
                "new MCP tool %r of %r clashes with a registered tool; not registered",
                name,
                client.name,
            )
            continue
        names.append(toolkit.register_tool(reg.build(client, definition), namesake="raise").name)
    client.logger.debug("tools of %r refreshed: %s", client.name, names)
    reg.names = names


def _same(tool: Tool | None, definition: mcp_types.Tool) -> bool:
    return isinstance(tool, MCPTool) and tool.same_definition(definition)


class _ResourceTool(Tool):
    """Reads one of an MCP server's resources by URI."""

    def __init__(self, client: MCPClient, name: str, description: str, group: str) -> None:
        params: dict[str, object] = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource URI."}},
            "required": ["uri"],
        }
        super().__init__(name, description, params, group=group)
        self.client = client

    async def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        blocks = await self.client.read_resource(str(arguments["uri"]))
        yield ToolResponse(content=blocks, metadata={"mcp_server": self.client.name})


async def create_resource_tool(
    client: MCPClient,
    name: str | None = None,
    group: str = "basic",
    max_listed: int = 50,
) -> Tool:
    """A tool that reads ``client``'s resources, listing them in its description.

    Register it with ``toolkit.register_tool(tool)``.

    Args:
        client: A connected MCP client.
        name: Tool name (default ``read_<client name>_resource``).
        group: Tool group.
        max_listed: How many resources and templates the description names at most.
    """
    resources = await client.list_resources()
    templates = await client.list_resource_templates()
    lines = [f"- {r.uri}: {r.description or r.name}" for r in resources]
    lines += [f"- {t.uri_template} (template): {t.description or t.name}" for t in templates]
    shown = "\n".join(lines[:max_listed])
    more = f"\n(and {len(lines) - max_listed} more)" if len(lines) > max_listed else ""
    description = (
        f"Read a resource of the {client.name!r} MCP server by URI. Known resources:\n"
        f"{shown or '(none listed)'}{more}"
    )
    tool_name = name or toolkit_name(f"read_{client.name}_resource", None)
    return _ResourceTool(client, tool_name, description, group)

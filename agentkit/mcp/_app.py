"""``MCPApp``: a Toolkit plus resources, prompts and completions, served as one MCP server.

Example:
    >>> from agentkit.mcp._app import MCPApp
    >>> from agentkit.tools import Toolkit
    >>> app = MCPApp(Toolkit(), name="notes")
    >>> @app.resource("notes://{day}", mime_type="text/markdown")
    ... def notes(day: str) -> str:
    ...     '''The notes of one day.'''
    ...     return f"# {day}"
    >>> @app.prompt()
    ... def review(topic: str) -> str:
    ...     '''Ask for a review.'''
    ...     return f"Review {topic}"

Serve it with ``await app.serve("stdio")`` (or ``"streamable_http"``), or mount
``app.http_app()``. Resources are static (``"test://static"``) or templated
(``"notes://{day}"``: the function takes the template's variables); a function returns
``str`` (text) or ``bytes`` (a blob). A prompt function's parameters become its arguments
(required unless they have a default); it returns ``str``, an agentkit ``Msg``, a content
block, :class:`EmbeddedResource`, or a list of those.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agentkit.mcp._app_handlers import build
from agentkit.mcp._served_items import (
    EmbeddedResource,
    ServedPrompt,
    ServedResource,
    summary,
    template_pattern,
    tool_result,
)
from agentkit.mcp._served_tools import Approval, ServedTools
from agentkit.mcp._tasks import TaskSupport

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession

    from agentkit.tools import Toolkit

__all__ = ["EmbeddedResource", "MCPApp", "tool_result"]

F = TypeVar("F", bound=Callable[..., Any])
CompletionFn = Callable[[str, str, str, str, dict[str, str]], Awaitable[list[str]] | list[str]]
"""``(ref_kind "prompt"|"resource", ref name or URI template, argument, value, context)``."""


class MCPApp:
    """One MCP server: a Toolkit's tools plus resources, prompts and completions.

    Args:
        toolkit: The tools to serve (a new empty Toolkit if None).
        name: Server name reported to clients.
        version: The served server's version (``serverInfo.version``; default ``"0.0.0"``:
            it is your server's version, not agentkit's).
        instructions: Instructions for the client's model.
        icons: The server's icons (``{"src", "mimeType"?, "sizes"?, "theme"?}`` dicts), for
            clients' UIs.
        website_url: The server's website (``serverInfo.websiteUrl``).
        tool_icons: Icons per tool name, listed with the tool in ``tools/list``.
        approval: Tools registered with ``requires_approval``: ``"refuse"`` (default: not
            listed, calls refused) or ``"client"`` (served; the client's host asks its user).
    """

    def __init__(
        self,
        toolkit: Toolkit | None = None,
        *,
        name: str = "agentkit",
        version: str | None = None,
        instructions: str | None = None,
        approval: Approval = "refuse",
        icons: Sequence[Mapping[str, object]] | None = None,
        website_url: str | None = None,
        tool_icons: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
    ) -> None:
        from agentkit.tools import Toolkit

        self.toolkit = toolkit if toolkit is not None else Toolkit()
        self.name = name
        self.version = version or "0.0.0"
        self.instructions = instructions
        self.icons = [dict(i) for i in icons or []]
        self.website_url = website_url
        self.tools = ServedTools(self.toolkit, approval, tool_icons)
        self.resources_by_uri: dict[str, ServedResource] = {}
        self.prompts_by_name: dict[str, ServedPrompt] = {}
        self.completion_fn: CompletionFn | None = None
        self.connections: dict[
            str, ServerSession
        ] = {}  # connection key -> its latest ServerSession
        self.bus: Any = None  # 2026-07-28 subscriptions/listen fan-out, made by build_server
        self.subscribers: dict[str, set[str]] = {}  # uri -> connection keys

    # -- registration -------------------------------------------------------------------
    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        task: bool | TaskSupport = False,
    ) -> Callable[[F], F]:
        """Register a tool on the app's toolkit.

        Args:
            name: The tool's name (default: the function's).
            description: Its description (default: the docstring's summary).
            task: Serve it as an MCP task (SEP-1686, 2025-11-25): ``True`` or
                ``"required"`` (clients must call it as a task), ``"optional"`` (either way),
                ``"after_input"`` (required; on 2026-07-28 its first round asks its questions
                synchronously, and the call becomes a task once they are answered).
                A task-augmented call returns at once; the tool runs on until it completes,
                fails or the client sends ``tasks/cancel``.
        """

        def register(fn: F) -> F:
            tool = self.toolkit.register_tool_function(fn, name=name, description=description)
            if task:
                self.tools.task_support[tool.name] = "required" if task is True else task
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource (``{var}`` in ``uri`` makes it a template)."""

        def register(fn: F) -> F:
            pattern = template_pattern(uri) if "{" in uri else None
            self.resources_by_uri[uri] = ServedResource(
                uri, fn, name or fn.__name__, title, description or summary(fn), mime_type, pattern
            )
            return fn

        return register

    def prompt(
        self, name: str | None = None, *, title: str | None = None, description: str | None = None
    ) -> Callable[[F], F]:
        """Register a prompt; the function's parameters are its arguments."""

        def register(fn: F) -> F:
            key = name or fn.__name__
            self.prompts_by_name[key] = ServedPrompt(key, fn, title, description or summary(fn))
            return fn

        return register

    def completion(self) -> Callable[[F], F]:
        """Register the completion function (see :data:`CompletionFn`)."""

        def register(fn: F) -> F:
            self.completion_fn = fn
            return fn

        return register

    # -- notifications ------------------------------------------------------------------
    async def notify_resource_updated(self, uri: str) -> None:
        """Tell every connection subscribed to ``uri`` that it changed (both eras)."""
        from mcp.shared.subscriptions import ResourceUpdated

        for key in sorted(self.subscribers.get(uri, ())):
            session = self.connections.get(key)
            if session is not None and session in self._handshake_sessions():
                await session.send_resource_updated(uri)
        if self.bus is not None:  # 2026-07-28 listen streams
            await self.bus.publish(ResourceUpdated(uri=uri))

    async def notify_list_changed(self, what: str = "tools") -> None:
        """Send ``notifications/{what}/list_changed`` (tools, resources, prompts) to all.

        Handshake-era connections get the notification; 2026-07-28 clients get the event
        on their ``subscriptions/listen`` stream.
        """
        from mcp.shared import subscriptions as events

        for session in self._handshake_sessions():
            await getattr(session, f"send_{what.rstrip('s')}_list_changed")()
        event = {
            "tools": events.ToolsListChanged,
            "prompts": events.PromptsListChanged,
            "resources": events.ResourcesListChanged,
        }[what]
        if self.bus is not None:
            await self.bus.publish(event())

    def _handshake_sessions(self) -> list[ServerSession]:
        """Sessions that take unsolicited notifications (not 2026-07-28 ones)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        return [
            s
            for s in self.connections.values()
            if getattr(s, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS
        ]

    def remember(self, ctx: ServerRequestContext) -> str:
        """Note the connection behind ``ctx`` (for later notifications); return its key."""
        request = ctx.request
        headers = getattr(request, "headers", None)
        key = str(headers.get("mcp-session-id", "")) if headers is not None else "stdio"
        self.connections[key] = ctx.session
        return key

    # -- the server ---------------------------------------------------------------------
    def build_server(self) -> Server:
        """A lowlevel ``mcp`` Server with this app's handlers."""
        return build(self)

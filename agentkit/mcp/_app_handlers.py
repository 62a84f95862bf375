"""The request handlers of an :class:`~agentkit.mcp._app.MCPApp` on the SDK's lowlevel Server."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from agentkit.exceptions import MCPError as AgentkitMCPError
from agentkit.mcp._context import MCPContext, handshake_era_api
from agentkit.mcp._input_rounds import InputRounds
from agentkit.mcp._served_items import (
    EmbeddedResource,
    ServedPrompt,
    ServedResource,
    block_to_wire,
    call_maybe_async,
)
from agentkit.mcp._served_tools import round_end
from agentkit.mcp._tasks import TASKS_EXTENSION, TaskRunner
from agentkit.messages import Msg

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from agentkit.mcp._app import MCPApp

__all__ = ["build"]

_RESOURCE_NOT_FOUND = -32602  # resources/read of an unknown URI (SEP-2164), data.uri names it


def _server_class(tasks: bool) -> type[Server]:
    from mcp import types
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    class AppServer(Server):
        """Announces ``listChanged`` for tools, resources and prompts (we send them).

        With task tools it also announces tasks: the ``tasks`` capability (SEP-1686: list,
        cancel, task-augmented ``tools/call``) on the handshake-era versions, the
        ``io.modelcontextprotocol/tasks`` extension (SEP-2663) on 2026-07-28.
        """

        def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
            caps = super().get_capabilities(*args, **kwargs)
            if tasks and kwargs.get("protocol_version") in MODERN_PROTOCOL_VERSIONS:
                caps.extensions = {**(caps.extensions or {}), TASKS_EXTENSION: {}}
            elif tasks:
                caps.tasks = types.ServerTasksCapability(
                    list=types.TasksListCapability(),
                    cancel=types.TasksCancelCapability(),
                    requests=types.ServerTasksRequestsCapability(
                        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
                    ),
                )
            return caps

        def create_initialization_options(self, *args: Any, **kwargs: Any) -> Any:
            if not args and "notification_options" not in kwargs:
                kwargs["notification_options"] = NotificationOptions(
                    prompts_changed=True, resources_changed=True, tools_changed=True
                )
            return super().create_initialization_options(*args, **kwargs)

    return AppServer


def build(app: MCPApp) -> Server:
    """The lowlevel ``mcp`` Server for ``app``."""
    from mcp import types
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

    handlers = _Handlers(app)
    app.bus = InMemorySubscriptionBus()
    kwargs: dict[str, Any] = {
        "on_list_tools": handlers.list_tools,
        "on_call_tool": handlers.call_tool,
        "on_set_logging_level": handlers.set_level,
        "on_subscriptions_listen": ListenHandler(app.bus),  # 2026-07-28 change events
    }
    if app.resources_by_uri:
        kwargs.update(
            on_list_resources=handlers.list_resources,
            on_list_resource_templates=handlers.list_templates,
            on_read_resource=handlers.read_resource,
            on_subscribe_resource=handlers.subscribe,
            on_unsubscribe_resource=handlers.unsubscribe,
        )
    if app.prompts_by_name:
        kwargs.update(on_list_prompts=handlers.list_prompts, on_get_prompt=handlers.get_prompt)
    if app.completion_fn is not None:
        kwargs["on_completion"] = handlers.complete
    runner = TaskRunner(handlers.run_task) if app.tools.task_support else None
    if runner is not None:
        kwargs["lifespan"] = runner.lifespan  # the task group that tasks outlive requests in
    with handshake_era_api():  # logging/setLevel: deprecated in 2026-07-28 only
        server = _server_class(runner is not None)(
            app.name,
            version=app.version,
            instructions=app.instructions,
            website_url=app.website_url,
            icons=[types.Icon.model_validate(i) for i in app.icons] or None,
            **kwargs,
        )
    # Seals the requestState of input-required rounds (served tools that elicit, 2026-07-28):
    # the client cannot read or forge it, nor replay it into another call.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=app.name)
    )
    if runner is not None:
        runner.install(server, app.tools.task_support.get)
    return server


class _Handlers:
    def __init__(self, app: MCPApp) -> None:
        self.app = app

    # -- tools and logging --------------------------------------------------------------
    async def list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.app.remember(ctx)
        return self.app.tools.listing()

    async def call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        from mcp import MCPError

        if self.app.tools.wire_task_support(params.name) == "required":
            # SEP-1686: a tool that requires tasks is called only as one.
            raise MCPError(code=-32601, message=f"Tool {params.name!r} must be called as a task")
        key = self.app.remember(ctx)
        result = await self.app.tools.call(ctx, params, level_key=key)
        if self.app.tools.changed_since_listing():  # e.g. the call switched tool groups
            self.app.tools.listed = None
            await self.app.notify_list_changed("tools")
        return result

    async def run_task(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Run one round of a call that is a task (for the TaskRunner).

        An ``InputRequiredResult`` parks the task in ``input_required`` (2026-07-28) until
        the client answers with ``tasks/update``; the round then runs again.
        """
        key = self.app.remember(ctx)
        return await self.app.tools.call(ctx, params, level_key=key)

    async def set_level(
        self, ctx: ServerRequestContext, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        from mcp import types

        self.app.tools.levels[self.app.remember(ctx)] = params.level
        return types.EmptyResult()

    # -- resources ----------------------------------------------------------------------
    async def list_resources(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        from mcp import types

        items = [types.Resource(uri=r.uri, **_described(r)) for r in self._served(templates=False)]
        return types.ListResourcesResult(resources=items)

    async def list_templates(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        from mcp import types

        items = [
            types.ResourceTemplate(uri_template=r.uri, **_described(r))
            for r in self._served(templates=True)
        ]
        return types.ListResourceTemplatesResult(resource_templates=items)

    def _served(self, *, templates: bool) -> list[ServedResource]:
        """The app's resource templates, or its plain resources, in registration order."""
        return [
            r for r in self.app.resources_by_uri.values() if (r.pattern is not None) == templates
        ]

    def _find(self, uri: str) -> tuple[ServedResource, dict[str, str]] | None:
        exact = self.app.resources_by_uri.get(uri)
        if exact is not None and exact.pattern is None:
            return exact, {}
        for resource in self.app.resources_by_uri.values():
            match = resource.pattern.match(uri) if resource.pattern else None
            if match:
                return resource, match.groupdict()
        return None

    async def read_resource(
        self, ctx: ServerRequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        from mcp import MCPError

        found = self._find(str(params.uri))
        if found is None:
            raise MCPError(
                code=_RESOURCE_NOT_FOUND,
                message=f"Resource not found: {params.uri}",
                data={"uri": str(params.uri)},
            )
        resource, variables = found
        return await resource.read(str(params.uri), variables)

    async def subscribe(
        self, ctx: ServerRequestContext, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        from mcp import types

        key = self.app.remember(ctx)
        self.app.subscribers.setdefault(str(params.uri), set()).add(key)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        from mcp import types

        key = self.app.remember(ctx)
        self.app.subscribers.get(str(params.uri), set()).discard(key)
        return types.EmptyResult()

    # -- prompts and completions --------------------------------------------------------
    async def list_prompts(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        from mcp import types

        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=p.name,
                    title=p.title,
                    description=p.description,
                    arguments=_prompt_arguments(p),
                )
                for p in self.app.prompts_by_name.values()
            ]
        )

    async def get_prompt(
        self, ctx: ServerRequestContext, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        from mcp import MCPError, types

        prompt = self.app.prompts_by_name.get(params.name)
        if prompt is None:
            raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
        arguments = dict(params.arguments or {})
        missing = [
            a.name for a in _prompt_arguments(prompt) if a.required and a.name not in arguments
        ]
        if missing:
            raise MCPError(code=-32602, message=f"Missing prompt arguments: {missing}")
        # A prompt function may ask the client (MCPContext.of() inside it): in 2026-07-28 an
        # unanswered question ends prompts/get with an input-required round, as for tools.
        mcp = MCPContext(ctx, None, InputRounds.from_params(params))
        with mcp.activate():
            try:
                value = await call_maybe_async(prompt.fn, **arguments)
            except AgentkitMCPError:
                if not mcp.rounds.pending and mcp.missing_capability is None:
                    raise  # a failure of its own, not a question
                value = None
        unfinished = round_end(mcp)
        if unfinished is not None:
            return unfinished
        return types.GetPromptResult(description=prompt.description, messages=_messages(value))

    async def complete(
        self, ctx: ServerRequestContext, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        from mcp import types

        ref = params.ref
        kind, target = (
            ("prompt", ref.name) if ref.type == "ref/prompt" else ("resource", str(ref.uri))
        )
        context = dict((params.context.arguments or {}) if params.context else {})
        assert self.app.completion_fn is not None
        values = list(
            await call_maybe_async(
                self.app.completion_fn,
                kind,
                target,
                params.argument.name,
                params.argument.value,
                context,
            )
        )
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:100], total=len(values), has_more=len(values) > 100
            )
        )


class _Description(TypedDict):
    """What ``resources/list`` and ``resources/templates/list`` say about a resource."""

    name: str
    title: str | None
    description: str | None
    mime_type: str | None


def _described(resource: ServedResource) -> _Description:
    return {
        "name": resource.name,
        "title": resource.title,
        "description": resource.description,
        "mime_type": resource.mime_type,
    }


def _prompt_arguments(prompt: ServedPrompt) -> list[types.PromptArgument]:
    from mcp import types

    out = []
    for param in inspect.signature(prompt.fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        out.append(types.PromptArgument(name=param.name, required=param.default is param.empty))
    return out


def _messages(value: Any) -> list[types.PromptMessage]:
    """A prompt function's return value as MCP prompt messages (one content each)."""
    from mcp import types
    from pydantic import TypeAdapter

    items = value if isinstance(value, list) else [value]
    content: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)
    out: list[types.PromptMessage] = []
    for item in items:
        role: Literal["user", "assistant"] = "user"
        if isinstance(item, Msg):
            role = "assistant" if item.role == "assistant" else "user"
            blocks: list[Any] = item.content if isinstance(item.content, list) else [item.content]
        else:
            blocks = [item]
        for block in blocks:
            if isinstance(block, str):
                wire: dict[str, object] = {"type": "text", "text": block}
            elif isinstance(block, EmbeddedResource):
                wire = block.to_mcp()
            else:
                wire = block_to_wire(block)
            out.append(types.PromptMessage(role=role, content=content.validate_python(wire)))
    return out

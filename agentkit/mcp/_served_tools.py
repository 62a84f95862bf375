"""The ``tools/list`` and ``tools/call`` side of a served Toolkit.

- Listing: the toolkit's *active* tools, their JSON schemas unchanged, a title and hints from
  :func:`agentkit.tools.annotate`, and an ``outputSchema`` when the function's
  return annotation is a pydantic model, a TypedDict or a dataclass.
- Calling: through ``Toolkit.call_tool_function`` (one validation path); progress chunks
  become ``notifications/progress`` (a first value of 0 stays 0); the final result carries
  ``structuredContent`` for tools with an output schema; a tool that returned
  :func:`agentkit.mcp.tool_result` content (embedded resources...) gets it verbatim.
- An unknown, inactive or hidden tool (one needing approval) is the same JSON-RPC error,
  naming only the tool asked for: hidden tools are indistinguishable from missing ones.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import is_typeddict  # also knows typing_extensions.TypedDict

import agentkit._seams as _obs
from agentkit._ids import new_id
from agentkit.mcp._context import MCPContext
from agentkit.mcp._input_rounds import InputRounds
from agentkit.messages import ToolUseBlock
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.context import ServerRequestContext

    from agentkit.mcp._tasks import TaskSupport
    from agentkit.models import ToolDefinition
    from agentkit.tools import Toolkit

__all__ = ["Approval", "ServedTools"]

Approval = Literal["refuse", "client"]
MCP_CONTENT_KEY = "mcp_content"  # ToolResponse.metadata key holding verbatim MCP content


def output_schema(fn: object) -> dict[str, object] | None:
    """The JSON schema of ``fn``'s return annotation when it is a structured type."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: no schema rather than a crash
        return None
    ann: Any = hints.get("return")
    if getattr(ann, "__module__", "") == "agentkit.messages":  # content blocks, not data
        return None
    structured = isinstance(ann, type) and (
        dataclasses.is_dataclass(ann)
        or is_typeddict(ann)
        or any(c.__name__ == "BaseModel" for c in ann.__mro__[1:])
    )
    if not structured:
        return None
    from pydantic import TypeAdapter

    try:
        schema: dict[str, object] = TypeAdapter(ann).json_schema()
    except Exception:  # e.g. a typing.TypedDict on Python < 3.12 (pydantic refuses it)
        return None
    return schema if schema.get("type") == "object" else None


class ServedTools:
    """Lists and runs a toolkit's tools for MCP clients.

    Args:
        toolkit: The tools.
        approval: Tools needing approval: ``"refuse"`` (hidden, calls refused) or
            ``"client"`` (served; the client's host asks its user).
    """

    def __init__(
        self,
        toolkit: Toolkit,
        approval: Approval = "refuse",
        icons: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
    ) -> None:
        self.toolkit = toolkit
        self.approval = approval
        self.icons = {name: [dict(i) for i in items] for name, items in (icons or {}).items()}
        self.levels: dict[str, str] = {}  # logging/setLevel per connection key
        self.listed: frozenset[str] | None = None  # names in the last tools/list answer
        self.task_support: dict[str, TaskSupport] = {}  # tool name -> how it runs as a task

    def visible(self) -> list[ToolDefinition]:
        """The tools a client may see and call."""
        out = []
        for definition in self.toolkit.get_tool_definitions():
            tool = self.toolkit.get_tool(definition.name)
            if self.approval == "client" or tool is None or not tool.requires_approval:
                out.append(definition)
        return out

    def listing(self) -> types.ListToolsResult:
        """The ``tools/list`` answer."""
        from mcp import types

        tools = [self._mcp_tool(d) for d in self.visible()]
        self.listed = frozenset(t.name for t in tools)
        return types.ListToolsResult(tools=tools)

    def _mcp_tool(self, definition: ToolDefinition) -> types.Tool:
        from mcp import types

        tool = self.toolkit.get_tool(definition.name)
        notes = tool.annotations if tool is not None else None
        schema = output_schema(getattr(tool, "fn", None)) if tool is not None else None
        return types.Tool(
            name=definition.name,
            title=notes.title if notes else None,
            description=definition.description or None,
            input_schema=dict(definition.parameters) or {"type": "object", "properties": {}},
            output_schema=schema,
            annotations=types.ToolAnnotations.model_validate(notes.to_mcp()) if notes else None,
            icons=[types.Icon.model_validate(i) for i in self.icons.get(definition.name, ())]
            or None,
            execution=types.ToolExecution(task_support=support)
            if (support := self.wire_task_support(definition.name))
            else None,
        )

    def wire_task_support(self, name: str) -> Literal["optional", "required"] | None:
        """The tool's ``execution.taskSupport`` (an ``"after_input"`` tool requires tasks)."""
        support = self.task_support.get(name)
        return "required" if support == "after_input" else support

    def changed_since_listing(self) -> bool:
        """Whether the visible tools differ from the last ``tools/list`` answer."""
        if self.listed is None:
            return False
        return frozenset(d.name for d in self.visible()) != self.listed

    async def call(
        self,
        ctx: ServerRequestContext,
        params: types.CallToolRequestParams,
        *,
        level_key: str = "",
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Answer ``tools/call`` (``level_key``: the connection, for its log level).

        In 2026-07-28, a tool that asked its client a question not yet answered ends the
        round with an ``InputRequiredResult`` (the client retries with the answer).
        """
        from mcp import MCPError, types

        if params.name not in {d.name for d in self.visible()}:
            # -32602 per the spec, for a tool that does not exist, is inactive or is hidden
            # (it needs approval) alike: the answer names only what was asked, so a client
            # cannot tell a hidden tool from a missing one.
            raise MCPError(code=-32602, message=f"Unknown tool: {params.name}")
        mcp = MCPContext(ctx, self.levels.get(level_key), InputRounds.from_params(params))
        with mcp.activate():
            final = await self._run(ctx, mcp, params.name, dict(params.arguments or {}))
        unfinished = round_end(mcp)
        if unfinished is not None:  # the tool stopped at a question (however it surfaced)
            return unfinished
        tool = self.toolkit.get_tool(params.name)
        structured = None
        if not final.is_error and output_schema(getattr(tool, "fn", None)) is not None:
            structured = _json_object(final.get_text())
        verbatim = (final.metadata or {}).get(MCP_CONTENT_KEY)
        content = (
            [_content_item(c) for c in verbatim]
            if isinstance(verbatim, list)
            else mcp_content(final)
        )
        return types.CallToolResult(
            content=content, structured_content=structured, is_error=final.is_error
        )

    async def _run(
        self,
        ctx: ServerRequestContext,
        mcp: MCPContext,
        name: str,
        args: dict[str, object],
    ) -> ToolResponse:
        block = ToolUseBlock(type="tool_use", id=new_id("mcp-"), name=name, input=args)
        final: ToolResponse | None = None
        step: float | None = None
        # observability seam: continue the caller's trace (traceparent in the request's _meta)
        with _obs.server_tool_span(name, block["id"], ctx.meta):
            async with aclosing(self.toolkit.call_tool_function(block, context=mcp)) as chunks:
                async for chunk in chunks:
                    if chunk.is_last:
                        final = chunk
                        continue
                    step, total = progress_step(chunk, step)
                    # A no-op unless the client sent a progress token with this call.
                    await ctx.session.report_progress(step, total, chunk.get_text() or None)
        return final or ToolResponse.error(f"tool {name!r} produced no result")


def round_end(mcp: MCPContext) -> types.InputRequiredResult | None:
    """How a served request that asked the client a question ends, if it did (2026-07-28).

    Returns:
        The ``InputRequiredResult`` with the unanswered questions, or None (complete).

    Raises:
        mcp.MCPError: ``-32021`` when a question needed a capability the client did not
            declare (a protocol error, not a tool error: SEP-2575).
    """
    from mcp import MCPError
    from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY

    if mcp.missing_capability is not None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"Missing required client capability: {sorted(mcp.missing_capability)}",
            data={"requiredCapabilities": mcp.missing_capability},
        )
    return mcp.rounds.result() if mcp.rounds.pending else None


def progress_step(chunk: ToolResponse, previous: float | None) -> tuple[float, float | None]:
    """The chunk's own progress value if it increases, else one more than the last.

    MCP requires progress to increase with every notification; a first value of 0 is 0.
    """
    meta = chunk.metadata or {}
    value, total = meta.get("progress"), meta.get("total")
    if isinstance(value, int | float) and (previous is None or value > previous):
        step = float(value)
    else:
        step = (previous if previous is not None else 0.0) + 1
    return step, float(total) if isinstance(total, int | float) else None


def _json_object(text: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _content_item(item: dict[str, object]) -> types.ContentBlock:
    from mcp import types
    from pydantic import TypeAdapter

    adapter: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)
    return adapter.validate_python(item)


def mcp_content(response: ToolResponse) -> list[types.ContentBlock]:
    """A response's blocks as MCP content (media by URL become a text link)."""
    from mcp import types

    out: list[types.ContentBlock] = []
    for block in response.content:
        if block["type"] == "text":
            out.append(types.TextContent(type="text", text=block["text"]))
            continue
        source = block["source"]
        if source["type"] == "url":  # MCP carries media inline only: pass the link as text
            out.append(types.TextContent(type="text", text=f"[{block['type']}: {source['url']}]"))
        elif block["type"] == "image":
            data, mime = source["data"], source["media_type"]
            out.append(types.ImageContent(type="image", data=data, mime_type=mime))
        else:
            data, mime = source["data"], source["media_type"]
            out.append(types.AudioContent(type="audio", data=data, mime_type=mime))
    return out

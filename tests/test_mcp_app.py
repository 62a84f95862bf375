"""MCPApp and served-tool features (issue 15, server side), through the real mcp SDK client.

In memory (``mcp.Client(server)``) in both protocol eras where the feature exists in both,
plus one stdio round trip for log notifications and resource subscriptions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentkit.mcp._app import EmbeddedResource, MCPApp, tool_result
from agentkit.mcp._context import MCPContext
from agentkit.tools import ToolContext, Toolkit, ToolResponse
from agentkit.tools._annotations import annotate

pytestmark = pytest.mark.anyio


class Weather(BaseModel):
    city: str
    degrees: float


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: int
    height: int


def build() -> MCPApp:
    tk = Toolkit()

    @tk.tool
    def weather(city: str) -> Weather:
        """Weather in a city."""
        return Weather(city=city, degrees=21.5)

    @tk.tool
    def point() -> Point:
        """A point."""
        return {"x": 1, "y": 2}

    @tk.tool
    def box() -> Box:
        """A box."""
        return Box(3, 4)

    @tk.tool
    async def steps(ctx: ToolContext) -> str:
        """Progress from 0."""
        for value in (0, 1, 2):
            await ctx.report_progress(f"at {value}", progress=value, total=2)
        return "ok"

    @tk.tool
    async def chatty(ctx: ToolContext) -> str:
        """Logs at two levels."""
        mcp = MCPContext.of(ctx)
        assert mcp is not None
        await mcp.log("debug", "noise")
        await mcp.log("warning", "careful")
        return "logged"

    @tk.tool
    def open_admin() -> str:
        """Turn the admin group on."""
        tk.update_tool_groups(["admin"], active=True)
        return "on"

    @tk.tool
    def doc() -> ToolResponse:
        """An embedded resource."""
        return tool_result(
            "see:", EmbeddedResource("doc://1", text="hello", mime_type="text/plain")
        )

    tk.create_tool_group("admin", "secret admin tools", active=False)

    @tk.tool(group="admin")
    def secret_admin_tool() -> str:
        """Hidden until admin is on."""
        return "root"

    annotate(tk, "weather", title="Weather", read_only=True, open_world=True)
    app = MCPApp(tk, name="t")

    @app.resource("mem://{key}", mime_type="text/plain")
    def memory(key: str) -> str:
        """A value by key."""
        return f"value of {key}"

    @app.prompt()
    def greet(name: str, style: str = "warm") -> str:
        """Greet someone."""
        return f"Greet {name} in a {style} way"

    @app.completion()
    def complete(kind: str, target: str, arg: str, value: str, ctx: dict[str, str]) -> list[str]:
        return [n for n in ("alice", "albert", "bob") if n.startswith(value)]

    return app


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_output_schema_and_structured_content(mode: str) -> None:
    async with Client(build().build_server(), mode=mode, cache=None) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["weather"].output_schema["properties"]["degrees"]["type"] == "number"
        assert set(tools["point"].output_schema["properties"]) == {"x", "y"}
        assert set(tools["box"].output_schema["properties"]) == {"width", "height"}
        assert tools["steps"].output_schema is None
        result = await client.call_tool("weather", {"city": "Oslo"})
        assert result.structured_content == {"city": "Oslo", "degrees": 21.5}
        assert (await client.call_tool("box", {})).structured_content == {"width": 3, "height": 4}


async def test_annotations_and_title() -> None:
    async with Client(build().build_server(), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    weather = tools["weather"]
    assert weather.title == "Weather"
    assert weather.annotations is not None and weather.annotations.read_only_hint is True
    assert weather.annotations.open_world_hint is True
    assert tools["point"].annotations is None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_starts_at_zero(mode: str) -> None:
    seen: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with Client(build().build_server(), mode=mode) as client:
        await client.call_tool("steps", {}, progress_callback=on_progress)
    assert seen == [0.0, 1.0, 2.0]  # before: the first 0 was sent as 1


async def test_unknown_tool_error_does_not_leak_hidden_tools() -> None:
    async with Client(build().build_server(), mode="legacy") as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("secret_admin_tool", {})
        assert info.value.code == -32602
        assert info.value.message == "Unknown tool: secret_admin_tool"
        with pytest.raises(MCPError) as other:
            await client.call_tool("nope", {})
        assert "secret" not in other.value.message and "admin" not in other.value.message


async def test_tools_list_changed_when_a_call_switches_groups() -> None:
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(type(message).__name__)

    app = build()
    async with Client(app.build_server(), mode="legacy", message_handler=handler) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        assert "secret_admin_tool" not in before
        await client.call_tool("open_admin", {})
        with anyio.fail_after(10):
            while "ToolListChangedNotification" not in notes:
                await anyio.sleep(0.01)
        after = {t.name for t in (await client.list_tools()).tools}
    assert "secret_admin_tool" in after


async def test_embedded_resource_result() -> None:
    async with Client(build().build_server(), mode="legacy") as client:
        result = await client.call_tool("doc", {})
    kinds = [c.type for c in result.content]
    assert kinds == ["text", "resource"]
    assert result.content[1].resource.text == "hello"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_prompts_completions(mode: str) -> None:
    from mcp_types import PromptReference

    async with Client(build().build_server(), mode=mode) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["mem://{key}"]
        read = await client.read_resource("mem://abc")
        assert read.contents[0].text == "value of abc"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as missing:
            await client.read_resource("nothing://here")
        assert missing.value.code == -32602  # SEP-2164: invalid params, data.uri names it
        prompts = (await client.list_prompts()).prompts
        args = {a.name: a.required for a in prompts[0].arguments or []}
        assert args == {"name": True, "style": False}
        got = await client.get_prompt("greet", {"name": "Ann"})
        assert got.messages[0].content.text == "Greet Ann in a warm way"  # type: ignore[union-attr]
        done = await client.complete(PromptReference(name="greet"), {"name": "name", "value": "al"})
        assert done.completion.values == ["alice", "albert"]


async def test_log_level_filters_tool_logs() -> None:
    logs: list[tuple[str, Any]] = []

    async def on_log(params: Any) -> None:
        logs.append((params.level, params.data))

    async with Client(build().build_server(), mode="legacy", logging_callback=on_log) as client:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.session.set_logging_level("warning")
        await client.call_tool("chatty", {})
    assert logs == [("warning", "careful")]


async def test_every_served_toolkit_tool_is_annotated(tmp_path: Any) -> None:
    from toolkits import filesystem, python, shell, web

    tk = filesystem.toolkit(tmp_path)
    python.toolkit(into=tk, group="py")
    shell.toolkit(tmp_path, into=tk, group="sh")
    web.toolkit(into=tk, group="web")
    tk.update_tool_groups(["py", "sh", "web"], active=True)
    app = MCPApp(tk, approval="client")
    async with Client(app.build_server(), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert len(tools) == 9
    for tool in tools.values():
        assert tool.title and tool.annotations is not None, tool.name
    for name in ("write_file", "edit_file", "run_command", "run_python"):
        assert tools[name].annotations.destructive_hint is True  # type: ignore[union-attr]
        assert tools[name].annotations.read_only_hint is False  # type: ignore[union-attr]
    for name in ("read_file", "list_directory", "glob", "grep", "fetch_url"):
        assert tools[name].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["fetch_url"].annotations.open_world_hint is True  # type: ignore[union-attr]


async def test_tools_list_changed_on_the_2026_listen_stream() -> None:
    from mcp.client.subscriptions import ToolsListChanged

    app = build()
    async with Client(app.build_server(), mode="auto", cache=None) as client:
        assert client.protocol_version == "2026-07-28"
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as events:
            await client.call_tool("open_admin", {})
            with anyio.fail_after(20):
                async for event in events:
                    assert isinstance(event, ToolsListChanged)
                    break
        names = {t.name for t in (await client.list_tools()).tools}
    assert "secret_admin_tool" in names

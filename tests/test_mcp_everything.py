"""MCPClient against the reference TypeScript server ``server-everything`` over stdio.

It negotiates the handshake era (2025-11-25): server-to-client requests arrive mid-call and
change events as unsolicited notifications.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from agentkit.mcp import MCPClient, create_resource_tool
from agentkit.testing import ScriptedModel
from tests._mcp_helpers import EVERYTHING, children, everything_stdio, wait_no_new_children

pytestmark = pytest.mark.skipif(not EVERYTHING.exists(), reason="server-everything not installed")


@pytest.fixture(autouse=True)
async def no_leaks() -> AsyncIterator[None]:
    before = children()
    yield
    assert wait_no_new_children(before) == set()


@pytest.fixture
async def everything() -> AsyncIterator[MCPClient]:
    async with MCPClient("everything", everything_stdio()) as c:
        assert c.protocol_version == "2025-11-25"
        yield c


async def test_list_and_call_echo_and_sum(everything: MCPClient) -> None:
    names = {t.name for t in await everything.list_tools()}
    assert {"echo", "get-sum", "trigger-long-running-operation"} <= names
    assert (await everything.call_tool("echo", {"message": "hi"})).get_text() == "Echo: hi"
    result = await everything.call_tool("get-sum", {"a": 2, "b": 3})
    assert result.get_text() == "The sum of 2 and 3 is 5."


async def test_long_running_operation_progress(everything: MCPClient) -> None:
    chunks = [
        c
        async for c in everything.call_tool_stream(
            "trigger-long-running-operation", {"duration": 1, "steps": 4}
        )
    ]
    progress = [c for c in chunks if not c.is_last]
    assert [c.metadata["progress"] for c in progress if c.metadata] == [1, 2, 3, 4]
    assert chunks[-1].is_last and "completed" in chunks[-1].get_text().lower()


async def test_structured_content(everything: MCPClient) -> None:
    result = await everything.call_tool("get-structured-content", {"location": "New York"})
    assert result.metadata is not None
    structured = result.metadata["structured_content"]
    assert set(structured) == {"temperature", "conditions", "humidity"}


async def test_annotations(everything: MCPClient) -> None:
    from agentkit.mcp import MCPTool

    tool = next(t for t in await everything.list_tools() if t.name == "echo")
    assert MCPTool(everything, tool).annotations.read_only is True  # type: ignore[union-attr]
    result = await everything.call_tool(
        "get-annotated-message", {"messageType": "error", "includeImage": True}
    )
    assert [b["type"] for b in result.content] == ["text", "image"]
    assert result.metadata is not None
    notes = result.metadata["content_annotations"]
    assert notes[0]["priority"] == 1.0 and notes[0]["audience"] == ["user", "assistant"]


async def test_embedded_and_linked_resources(everything: MCPClient) -> None:
    reference = await everything.call_tool("get-resource-reference", {})
    assert any(
        "[resource demo://resource/dynamic/text/1]" in b.get("text", "") for b in reference.content
    )
    links = await everything.call_tool("get-resource-links", {"count": 2})
    assert sum("[resource link" in b.get("text", "") for b in links.content) == 2


async def test_image(everything: MCPClient) -> None:
    result = await everything.call_tool("get-tiny-image", {})
    images = [b for b in result.content if b["type"] == "image"]
    assert images and images[0]["source"]["media_type"] == "image/png"  # type: ignore[typeddict-item]


async def test_resources_and_prompts(everything: MCPClient) -> None:
    resources = await everything.list_resources()
    assert len(resources) >= 7
    templates = await everything.list_resource_templates()
    assert {t.uri_template for t in templates} >= {"demo://resource/dynamic/text/{resourceId}"}
    text = await everything.read_resource(str(resources[0].uri))
    assert text and text[0]["type"] == "text"
    prompts = {p.name for p in await everything.list_prompts()}
    assert {"simple-prompt", "args-prompt"} <= prompts
    msgs = await everything.get_prompt("args-prompt", {"city": "Paris"})
    assert "Paris" in msgs[0].get_text()


async def test_resource_tool(everything: MCPClient) -> None:
    tool = await create_resource_tool(everything)
    assert tool.name == "read_everything_resource"
    assert "demo://resource/static/document/" in tool.description
    chunks = [c async for c in tool.invoke({"uri": "demo://resource/dynamic/text/1"})]
    assert "Resource 1" in chunks[-1].get_text()


async def test_sampling_with_scripted_model() -> None:
    model = ScriptedModel(["canned answer"])
    async with MCPClient("everything", everything_stdio(), sampling_model=model) as c:
        result = await c.call_tool(
            "trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 20}
        )
    assert "canned answer" in result.get_text()
    assert model.requests[0].messages[-1].get_text().endswith("Say hi")


async def test_elicitation_with_defaults_filled() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def answer(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        asked.append((message, schema))
        return {"name": "Ada", "check": True}

    async with MCPClient("everything", everything_stdio(), elicitation_callback=answer) as c:
        result = await c.call_tool("trigger-elicitation-request", {})
    text = result.get_text()
    assert '"action": "accept"' in text and "Ada" in text
    assert "It was a dark and stormy night." in text  # a schema default we filled in
    assert "name" in asked[0][1]["properties"]


async def test_roots() -> None:
    async with MCPClient("everything", everything_stdio(), roots=["/tmp"]) as c:
        text = ""
        for _ in range(50):
            text = (await c.call_tool("get-roots-list", {})).get_text()
            if "file:///tmp" in text:
                break
            await anyio.sleep(0.1)
    assert "file:///tmp" in text


async def test_list_changed_notifications_refresh() -> None:
    # Capability-dependent tools are registered after initialization, each with a
    # notifications/tools/list_changed.
    changed = anyio.Event()

    async def on_change(_: MCPClient) -> None:
        changed.set()

    client = MCPClient("everything", everything_stdio(), sampling_model=ScriptedModel([]))
    client.events.on_tools_changed(on_change)
    async with client:
        await client.list_tools()
        with anyio.fail_after(10):
            await changed.wait()
        names = {t.name for t in await client.list_tools()}
    assert "trigger-sampling-request" in names


async def test_logging_notifications(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentkit.mcp.everything")
    async with MCPClient("everything", everything_stdio(), log_level="debug") as c:
        await c.call_tool("toggle-simulated-logging", {})
        for _ in range(100):
            if any(
                r.name == "agentkit.mcp.everything" and "stderr" not in r.getMessage()
                for r in caplog.records
            ):
                break
            await anyio.sleep(0.05)
    assert any(
        r.name == "agentkit.mcp.everything" and "stderr" not in r.getMessage()
        for r in caplog.records
    )


async def test_url_elicitation() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def answer(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        asked.append((message, schema))
        return {}

    async with MCPClient("everything", everything_stdio(), elicitation_callback=answer) as c:
        result = await c.call_tool("trigger-url-elicitation", {"url": "https://example.com/x"})
        assert not result.is_error and '"action": "accept"' in result.get_text()
        assert asked[0][1]["x-url"] == "https://example.com/x"
        assert "https://example.com/x" in asked[0][0]
        # The error path: -32042 with the URL to open, surfaced in the error result.
        failed = await c.call_tool(
            "trigger-url-elicitation", {"url": "https://example.com/y", "errorPath": True}
        )
    assert failed.is_error and "-32042" in failed.get_text()
    assert failed.metadata is not None
    urls = failed.metadata.get("elicitation_urls")
    assert urls and all(u.startswith("https://") for u in urls)
    assert urls[0] in failed.get_text()

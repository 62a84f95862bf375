"""Sampling requests that offer tools and model preferences (issue 15, client side).

A real mcp 2.x server (``tests/mcp_servers/sampling_tools_server.py``, over stdio) asks
agentkit's ``MCPClient`` to sample with a ``get_weather`` tool and ``modelPreferences``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from agentkit.mcp import MCPClient, StdioServer
from agentkit.testing import ScriptedModel, tool_use

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).parent / "mcp_servers" / "sampling_tools_server.py")


def _client(models: Any, protocol: Literal["auto", "legacy"]) -> MCPClient:
    server = StdioServer(sys.executable, [SERVER], stderr="devnull")
    return MCPClient("st", server, protocol=protocol, sampling_model=models, timeout=30)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_the_model_gets_the_servers_tools_and_its_call_goes_back(
    protocol: Literal["auto", "legacy"],
) -> None:
    big = ScriptedModel(["unused"], model_name="big-model")
    small = ScriptedModel([[tool_use("get_weather", "call-1", city="Oslo")]], model_name="s-1")
    async with _client({"big": big, "small": small}, protocol) as client:
        # auto: an input-required round; legacy: a mid-call request
        assert client.protocol_version == ("2026-07-28" if protocol == "auto" else "2025-11-25")
        result = await client.call_tool("choose", {})
    assert not result.is_error, result.get_text()
    answer = json.loads(result.get_text())
    # The second hint ("small") picked the model; the first matched nothing.
    assert big.requests == [] and len(small.requests) == 1
    request = small.requests[0]
    assert request.tool_names == ["get_weather"]
    assert request.tools[0].parameters["properties"] == {"city": {"type": "string"}}
    assert request.settings.get("tool_choice") == "required"
    assert answer["model"] == "s-1"
    assert answer["stop_reason"] == "toolUse"
    assert answer["content"] == [
        {"type": "tool_use", "id": "call-1", "name": "get_weather", "input": {"city": "Oslo"}}
    ]


async def test_the_tool_loop_sends_the_result_back_to_the_model() -> None:
    model = ScriptedModel(
        [[tool_use("get_weather", "call-7", city="Oslo")], "It is 21 degrees in Oslo."],
        model_name="only",
    )
    async with _client(model, "legacy") as client:  # one model: preferences are advisory
        result = await client.call_tool("weather_agent", {})
    assert not result.is_error, result.get_text()
    answer = json.loads(result.get_text())
    assert answer["first"]["stop_reason"] == "toolUse"
    assert answer["second"] == {
        "model": "only",
        "stop_reason": "endTurn",
        "content": [{"type": "text", "text": "It is 21 degrees in Oslo."}],
    }
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user"]
    assert second[1].content[0]["type"] == "tool_use"  # type: ignore[index]
    result_block = second[2].content[0]
    assert result_block["type"] == "tool_result"
    assert result_block["id"] == "call-7" and result_block["name"] == "get_weather"


def test_pick_model_follows_hints_in_order_and_falls_back_to_the_first() -> None:
    from mcp_types import ModelHint, ModelPreferences

    from agentkit.mcp._callbacks import pick_model

    a = ScriptedModel([], model_name="claude-sonnet")
    b = ScriptedModel([], model_name="gpt-mini")
    models = {"main": a, "cheap": b}

    def prefs(*names: str) -> ModelPreferences:
        return ModelPreferences(hints=[ModelHint(name=n) for n in names])

    assert pick_model(models, prefs("MINI", "sonnet")) is b  # by model name, case-insensitive
    assert pick_model(models, prefs("cheap")) is b  # by mapping key
    assert pick_model(models, prefs("nothing")) is a
    assert pick_model(models, None) is a
    assert pick_model(a, prefs("mini")) is a  # one model answers everything
    with pytest.raises(ValueError, match="empty"):
        pick_model({}, None)

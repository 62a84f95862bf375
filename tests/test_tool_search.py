"""``ToolSearch`` offers a search over the tools instead of their definitions: with 10 MCP
servers x 20 tools the tool definitions per request shrink by more than 80%, the search
finds the expected tool in its first five for at least 90% of a checked-in query set, a
found tool is callable and stays loaded for the conversation, a tool no search loaded is
refused, and loading a tool leaves every request's cached prefix byte-identical."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import Msg, ReActAgent, Tool, Toolkit, ToolResponse, ToolSearch
from agentkit.agent._compaction import estimate_tokens
from agentkit.agent._tool_search import ToolIndex
from agentkit.exceptions import UsageError
from agentkit.models import ModelRequest, ToolDefinition
from agentkit.models._anthropic_format import format_messages as anthropic_messages
from agentkit.models._anthropic_format import format_tools as anthropic_tools
from agentkit.models._openai_format import format_messages as openai_messages
from agentkit.testing import ScriptedModel, tool_use

FIXTURES = Path(__file__).parent / "fixtures"
MANIFESTS = json.loads((FIXTURES / "mcp_manifests.json").read_text())["servers"]
QUERIES = json.loads((FIXTURES / "tool_search_queries.json").read_text())["queries"]


class ManifestTool(Tool):
    """A tool described by a manifest entry; a call answers with its name and arguments."""

    def __init__(self, server: str, entry: dict[str, Any], calls: list[str]) -> None:
        super().__init__(f"{server}_{entry['name']}", entry["description"], entry["inputSchema"])
        self.calls = calls

    async def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        self.calls.append(self.name)
        yield ToolResponse.text(f"{self.name} ran with {json.dumps(arguments, sort_keys=True)}")


def big_toolkit(calls: list[str] | None = None) -> Toolkit:
    toolkit = Toolkit()
    for server, entries in MANIFESTS.items():
        for entry in entries:
            toolkit.register_tool(ManifestTool(server, entry, calls if calls is not None else []))
    return toolkit


def definition_tokens(tools: list[ToolDefinition]) -> int:
    """Tokens of a request's tool definitions, by the Compactor's estimator."""
    schemas = json.dumps([t.to_openai() for t in tools])
    return estimate_tokens(Msg("tools", schemas, "system"))


def test_the_fixture_is_ten_servers_of_twenty_tools() -> None:
    assert len(MANIFESTS) == 10
    assert {len(tools) for tools in MANIFESTS.values()} == {20}
    assert len(big_toolkit().tools) == 200


def test_tool_definitions_per_request_drop_by_more_than_80_percent() -> None:
    all_tools = big_toolkit().get_tool_definitions()
    offered = ToolSearch().offered(all_tools)
    full, searched = definition_tokens(all_tools), definition_tokens(offered)
    assert [t.name for t in offered] == ["search_tools"]
    assert 1 - searched / full >= 0.8
    assert full > 10_000 and searched < 200  # the numbers docs/mcp.md quotes, roughly


def test_recall_at_5_on_the_query_set_is_at_least_90_percent() -> None:
    index = ToolIndex(big_toolkit().get_tool_definitions())
    assert len(QUERIES) >= 30
    hits = [expected in [d.name for d in index.search(q, 5)] for q, expected in QUERIES]
    missed = [q for (q, _), hit in zip(QUERIES, hits, strict=True) if not hit]
    assert sum(hits) / len(hits) >= 0.9, missed


def test_a_query_without_a_known_word_finds_nothing() -> None:
    index = ToolIndex(big_toolkit().get_tool_definitions())
    assert index.search("zzzqx", 5) == []
    assert index.search("the and of", 5) == []  # stop words only


def wire(request: ModelRequest) -> tuple[str, str, str]:
    """The request as two providers serialize it: Anthropic tools and messages, OpenAI's."""
    system, turns = anthropic_messages(request.messages)
    return (
        json.dumps(anthropic_tools(request.tools, request.builtin_tools), sort_keys=True)
        + json.dumps(system, sort_keys=True),
        json.dumps(turns, sort_keys=True),
        json.dumps(openai_messages(request.messages), sort_keys=True),
    )


def _prefix_kept(before: ModelRequest, after: ModelRequest) -> None:
    head_a, turns_a, openai_a = wire(before)
    head_b, turns_b, openai_b = wire(after)
    assert head_a == head_b  # tools and system: byte-identical
    # The conversation so far is the start of the next request's, byte for byte.
    assert turns_b.startswith(turns_a[:-1]) and openai_b.startswith(openai_a[:-1])


async def test_a_found_tool_is_called_and_the_requests_keep_their_prefix() -> None:
    calls: list[str] = []
    model = ScriptedModel(
        [
            tool_use("search_tools", "c1", query="open a github issue"),
            tool_use("github_create_issue", "c2", owner="o", repo="r", title="Bug"),
            "Filed.",
        ]
    )
    agent = ReActAgent("a", "sys", model, big_toolkit(calls), capabilities=[ToolSearch()])
    result = await agent.run("File a bug")
    assert result.stop_reason == "final"
    assert calls == ["github_create_issue"]
    assert [r.tool_names for r in model.requests] == [["search_tools"]] * 3
    searched = model.requests[1].messages[-1].get_blocks("tool_result")[0]
    found = json.loads(str(searched["output"]))
    loaded = [t["name"] for t in found["loaded_tools"]]
    assert "github_create_issue" in loaded and len(loaded) <= 5
    assert (
        "title"
        in found["loaded_tools"][loaded.index("github_create_issue")]["parameters"]["properties"]
    )
    _prefix_kept(model.requests[0], model.requests[1])  # across the load
    _prefix_kept(model.requests[1], model.requests[2])


async def test_a_tool_no_search_loaded_is_refused_and_not_run() -> None:
    calls: list[str] = []
    model = ScriptedModel([tool_use("slack_slack_post_message", "c1", channel_id="C"), "ok"])
    agent = ReActAgent("a", "sys", model, big_toolkit(calls), capabilities=[ToolSearch()])
    await agent.run("post")
    result = model.requests[1].messages[-1].get_blocks("tool_result")[0]
    assert result.get("is_error") is True and "search_tools" in str(result["output"])
    assert calls == []


async def test_loaded_tools_stay_loaded_in_the_next_run_of_the_conversation() -> None:
    calls: list[str] = []
    model = ScriptedModel(
        [
            tool_use("search_tools", "c1", query="current time in a timezone"),
            "Loaded.",
            tool_use("time_get_current_time", "c2", timezone="Asia/Tokyo"),
            "It is noon.",
        ]
    )
    agent = ReActAgent("a", "sys", model, big_toolkit(calls), capabilities=[ToolSearch()])
    await agent.run("find a clock")
    await agent.run("what time is it in Tokyo?")
    assert calls == ["time_get_current_time"]
    assert model.requests[-1].tool_names == ["search_tools"]


async def test_always_on_tools_are_offered_on_every_request_in_a_stable_order() -> None:
    model = ScriptedModel(["hi"])
    always = ["time_get_current_time", "filesystem_read_text_file"]
    agent = ReActAgent(
        "a", "sys", model, big_toolkit(), capabilities=[ToolSearch(always=always, max_results=3)]
    )
    await agent.run("hello")
    names = model.requests[0].tool_names
    assert names == ["search_tools", "filesystem_read_text_file", "time_get_current_time"]


async def test_an_empty_query_is_a_tool_error() -> None:
    model = ScriptedModel([tool_use("search_tools", "c1", query="  "), "ok"])
    agent = ReActAgent("a", "sys", model, big_toolkit(), capabilities=[ToolSearch()])
    await agent.run("x")
    result = model.requests[1].messages[-1].get_blocks("tool_result")[0]
    assert result.get("is_error") is True


def test_max_results_must_be_positive() -> None:
    with pytest.raises(UsageError, match="max_results"):
        ToolSearch(max_results=0)

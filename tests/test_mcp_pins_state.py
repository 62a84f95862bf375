"""Tool pins survive a restart: saved with the agent's session, checked when restored (issue 15).

A rug pull can happen while the process is down: the server's ``greet`` is rewritten between
two sessions (``raw_server.py --pulled``). The restored session must not adopt the new
definition as if it had been approved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentkit.agent import ReActAgent
from agentkit.exceptions import StateError
from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.mcp._defenses import ToolChange
from agentkit.mcp._tool import MCPTool
from agentkit.session import JSONSession
from agentkit.testing import ScriptedModel
from agentkit.tools import Toolkit
from tests._mcp_helpers import ROOT
from tests._toolkits_helpers import call

RAW = str(ROOT / "tests" / "mcp_servers" / "raw_server.py")
pytestmark = pytest.mark.anyio


def raw(*flags: str, **kwargs: Any) -> MCPClient:
    return MCPClient("raw", StdioServer(sys.executable, [RAW, *flags]), **kwargs)


def agent(toolkit: Toolkit) -> ReActAgent:
    return ReActAgent("bot", "Be brief.", ScriptedModel([]), toolkit, print_hint=False)


async def first_session(store: JSONSession) -> dict[str, Any]:
    """Approve the tools of the honest server, save the session. Returns the state."""
    async with raw() as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        assert (await call(tk, "greet")).get_text() == "hello"
        await store.save("s1", agent(tk))
    saved: dict[str, Any] = json.loads(next(Path(store.directory).glob("*.json")).read_text())
    return saved


def disabled(tk: Toolkit) -> MCPTool:
    greet = tk.get_tool("greet")
    assert isinstance(greet, MCPTool) and greet.changed is not None
    assert "id_rsa" not in greet.description and "id_rsa" not in json.dumps(
        greet.tool_definition.to_openai()
    )
    return greet


async def test_pins_are_saved_with_the_session(tmp_path: Path) -> None:
    saved = await first_session(JSONSession(tmp_path))
    pins = json.dumps(saved)
    assert '"mcp_pins"' in pins and '"greet"' in pins


async def test_a_tool_changed_while_down_is_disabled_after_load(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    await first_session(store)
    changes: list[ToolChange] = []
    async with raw("--pulled", on_tool_change=changes.append) as client:  # restarted
        tk = Toolkit()
        await register_mcp_client(tk, client)  # the new process sees the rewritten greet
        assert await store.load("s1", agent(tk))
        disabled(tk)
        assert [(c.server, c.tool) for c in changes] == [("raw", "greet")]
        assert "id_rsa" in changes[0].new_description  # the human gets to see it
        refused = await call(tk, "greet")
        assert refused.is_error and "changed the definition" in refused.get_text()
        assert (await call(tk, "ok")).get_text() == "fine"  # unchanged tools still work
        conversation = tk.copy()  # a copy made meanwhile holds the disabled tool too
        assert (await call(conversation, "greet")).is_error

        await client.accept_tool_changes(["greet"])
        assert (await call(tk, "greet")).get_text() == "hello"
        assert (await call(conversation, "greet")).get_text() == "hello"  # accepted there too
        bot = agent(tk)
        await store.save("s1", bot)
    # The accepted definition is what the session approves from now on.
    async with raw("--pulled", on_tool_change=changes.append) as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        assert await store.load("s1", agent(tk))
        assert (await call(tk, "greet")).get_text() == "hello"
        assert len(changes) == 1


async def test_loading_before_the_server_registers_works_too(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    await first_session(store)
    tk = Toolkit()
    bot = agent(tk)
    assert await store.load("s1", bot)  # no MCP client yet: the pins wait for "raw"
    assert "mcp_pins" in bot.state_dict()["toolkit"]  # a save in between keeps them
    changes: list[ToolChange] = []
    async with raw("--pulled", on_tool_change=changes.append) as client:
        await register_mcp_client(tk, client)
        disabled(tk)
        assert [c.tool for c in changes] == ["greet"]
        assert (await call(tk, "greet")).is_error


async def test_an_unchanged_server_is_not_flagged_after_load(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    await first_session(store)
    changes: list[ToolChange] = []
    async with raw(on_tool_change=changes.append) as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        assert await store.load("s1", agent(tk))
        assert (await call(tk, "greet")).get_text() == "hello"
    assert changes == []


async def test_malformed_pins_are_refused_before_anything_changes() -> None:
    tk = Toolkit()
    state = tk.state_dict()
    with pytest.raises(StateError, match="mcp_pins"):
        tk.load_state_dict({**state, "mcp_pins": {"raw": {"greet": 3}}})

"""QA of the MCP client against misbehaving servers: startup failures, odd tool lists, nesting.

Each test pins a bug found by adversarial probing (see the module docstrings of the fixes).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from agentkit.agent import ReActAgent
from agentkit.events import ToolResult
from agentkit.exceptions import (
    MCPConnectionError,
    MCPError,
    MCPProtocolError,
    ToolRegistrationError,
)
from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.mcp._tool import toolkit_name
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._mcp_helpers import children, py_stdio, stats_with, wait_no_new_children
from tests._toolkits_helpers import call
from tests._waiting import eventually

ODD = str(Path(__file__).with_name("_mcp_odd_server.py"))
PY = sys.executable


def odd(*flags: str) -> StdioServer:
    return StdioServer(PY, [ODD, *flags])


def script(code: str) -> StdioServer:
    return StdioServer(PY, ["-c", code])


# -- servers that fail at startup ----------------------------------------------------------


async def test_server_exiting_at_startup_quotes_its_stderr() -> None:
    before = children()
    code = "import sys; print('fatal: GITHUB_TOKEN is not set', file=sys.stderr); sys.exit(3)"
    client = MCPClient("dies", script(code), connect_timeout=20)
    started = time.monotonic()
    with pytest.raises(MCPConnectionError) as info:
        await client.connect()
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "exited" in message
    assert "fatal: GITHUB_TOKEN is not set" in message  # why it died, not just "closed"
    await client.close()
    assert not wait_no_new_children(before)


async def test_stdout_garbage_then_exit_is_named_in_the_error() -> None:
    client = MCPClient("noisy", script("print('Server listening on port 3000')"))
    with pytest.raises(MCPConnectionError, match=r"not JSON-RPC.*Server listening on port 3000"):
        await client.connect()


async def test_stdout_garbage_forever_is_bounded_and_explained() -> None:
    before = children()
    code = "import time\nwhile True:\n    print('hello', flush=True)\n    time.sleep(0.2)"
    client = MCPClient("chatty", script(code), connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(MCPConnectionError, match=r"did not start within 2s(.|\n)*'hello'"):
        await client.connect()
    assert time.monotonic() - started < 15
    assert not wait_no_new_children(before)


# -- lifecycle -----------------------------------------------------------------------------


async def test_nested_async_with_keeps_the_connection_for_the_outer_block() -> None:
    client = MCPClient("py", py_stdio())
    async with client:
        async with client:  # e.g. a helper that also enters the client
            assert (await client.call_tool("echo", {"text": "in"})).get_text() == "in"
        assert client.is_connected
        assert (await client.call_tool("echo", {"text": "out"})).get_text() == "out"
    assert not client.is_connected
    with pytest.raises(MCPConnectionError):
        await client.call_tool("echo", {"text": "closed"})


async def test_close_inside_async_with_closes_at_once_and_exit_is_quiet() -> None:
    client = MCPClient("py", py_stdio())
    async with client, client:
        await client.close()
        assert not client.is_connected
    await client.close()  # double close
    async with client:  # and the client can be used again
        assert (await client.call_tool("echo", {"text": "again"})).get_text() == "again"


# -- odd tool lists ------------------------------------------------------------------------


async def test_invalid_tool_definitions_are_an_mcp_error_not_a_pydantic_one() -> None:
    async with MCPClient("odd", odd("--untyped")) as client:
        with pytest.raises(
            MCPProtocolError, match=r"invalid answer to tools/list.*inputSchema\.type"
        ):
            await client.list_tools()
        with pytest.raises(MCPError):
            await register_mcp_client(Toolkit(), client)


async def test_provider_invalid_names_and_ref_schemas_register_and_call() -> None:
    tk = Toolkit()
    async with MCPClient("odd", odd()) as client:
        tools = await register_mcp_client(tk, client)
        names = {t.name for t in tools}
        assert {"fs_read", "get_weather", "with_ref"} <= names
        assert all(len(n) <= 64 for n in names)
        (long,) = [n for n in names if n.startswith("xxx")]
        for definition in tk.get_tool_definitions():
            assert definition.parameters["type"] == "object"
        result = await call(tk, "fs_read", path="/x")
        assert json.loads(result.get_text()) == {"tool": "fs.read", "args": {"path": "/x"}}
        result = await call(tk, "get_weather", city="Oslo")
        assert json.loads(result.get_text())["tool"] == "get weather"
        result = await call(tk, long)
        assert json.loads(result.get_text())["tool"] == "x" * 70
        ok = await call(tk, "with_ref", person={"name": "Ada"})
        assert not ok.is_error
        bad = await call(tk, "with_ref", person={"nom": "Ada"})
        assert bad.is_error and "'name' is a required property" in bad.get_text()


def test_long_names_sharing_a_start_stay_distinct() -> None:
    a, b = toolkit_name("t" * 70 + "_a", None), toolkit_name("t" * 70 + "_b", None)
    assert a != b and len(a) == len(b) == 64
    assert a.startswith("t" * 55)
    # The same in every process (a hash of the name, not Python's salted hash()): tool pins
    # and saved states refer to tools by these names across restarts.
    assert toolkit_name("t" * 70, None) == "t" * 55 + "_a75c6749"
    assert toolkit_name("a.b" * 30, None) != toolkit_name("a_b" * 30, None)
    assert toolkit_name("ok_name", "srv") == "srv_ok_name"
    assert toolkit_name("...", None) == "___"


async def test_names_colliding_after_sanitising_explain_the_fix() -> None:
    async with MCPClient("odd", odd("--colliding")) as client:
        tk = Toolkit()
        with pytest.raises(ToolRegistrationError, match=r"disable_funcs=\['a_b'\]"):
            await register_mcp_client(tk, client)
        assert not tk.tools
        await register_mcp_client(tk, client, disable_funcs=["a_b"])
        assert json.loads((await call(tk, "a_b")).get_text())["tool"] == "a.b"


async def test_a_huge_tool_list_registers_quickly() -> None:
    async with MCPClient("odd", odd("3000")) as client:
        tk = Toolkit()
        started = time.monotonic()
        tools = await register_mcp_client(tk, client)
        assert len(tools) == 3004
        assert len(tk.get_tool_definitions()) == 3004
        assert time.monotonic() - started < 20
        assert json.loads((await call(tk, "bulk_2999")).get_text())["tool"] == "bulk_2999"


# -- concurrency and crashes (regression guards: these already behaved) --------------------


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_fifty_calls_half_cancelled(protocol: str) -> None:
    async with MCPClient("py", py_stdio(), protocol=protocol) as client:  # type: ignore[arg-type]
        results: list[str] = []
        scopes: list[anyio.CancelScope] = []
        quick_ones_done = anyio.Event()

        async def one(i: int) -> None:
            with anyio.CancelScope() as scope:
                if i % 2:
                    scopes.append(scope)
                arguments = {"seconds": 30 if i % 2 else 0.3}
                chunks = [c async for c in client.call_tool_stream("slow", arguments)]
                results.append(chunks[-1].get_text())
                if len(results) == 25:
                    quick_ones_done.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(50):
                    tg.start_soon(one, i)
                await quick_ones_done.wait()
                for scope in scopes:
                    scope.cancel()
        assert results == ["slept 0.3"] * 25
        stats = await eventually(
            lambda: stats_with(client, "cancelled=25"), "the server to see every cancellation"
        )
        assert stats == "started=50 cancelled=25 finished=25"


async def test_sigkill_mid_parallel_agent_turn() -> None:
    before = children()
    tk = Toolkit()

    local_running, killed = anyio.Event(), anyio.Event()

    async def local(x: int) -> str:
        """A local tool running next to the MCP calls.

        Args:
            x: A number.
        """
        local_running.set()
        await killed.wait()  # still running when the server dies
        return f"local {x}"

    tk.register_tool_function(local)
    client = MCPClient("py", py_stdio())
    await register_mcp_client(tk, client)
    pid = int((await client.call_tool("pid")).get_text())
    model = ScriptedModel(
        [
            [tool_use("slow", seconds=30), tool_use("local", x=1), tool_use("echo", text="hi")],
            "after the crash",
            [tool_use("echo", text="again")],
            "done",
        ]
    )
    agent = ReActAgent("a", "sys", model, tk, print_hint=False)
    echoed = anyio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, ToolResult) and event.result.get("name") == "echo":
            echoed.set()

    agent.add_event_listener(on_event)

    async def kill_soon() -> None:
        # Kill mid-turn: the local tool runs, the server has the slow call and has answered
        # the quick one.
        await local_running.wait()
        await eventually(lambda: stats_with(client, "started=1"), "the slow call on the server")
        with anyio.fail_after(10):
            await echoed.wait()
        os.kill(pid, signal.SIGKILL)
        killed.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_soon)
            await agent(Msg("user", "go", "user"))
        results = {b["name"]: b for b in agent.memory.messages[-2].get_blocks("tool_result")}
        assert "connection was lost" in str(results["slow"]["output"])
        assert str(results["local"]["output"]).endswith("local 1")
        assert str(results["echo"]["output"]).endswith("hi")
        await agent(Msg("user", "again", "user"))
    check_memory_invariant(agent.memory.messages)
    last = agent.memory.messages[-2].get_blocks("tool_result")
    assert len(last) == 1 and str(last[0]["output"]).endswith("again")
    assert client.reconnects == 1
    await client.close()
    assert not wait_no_new_children(before)

"""MCP tools in a real Toolkit: registration, parallel calls next to local functions,
timeouts, interrupts, progress, list_changed refresh and removal."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import anyio
import pytest

from agentkit.exceptions import ToolRegistrationError
from agentkit.mcp import MCPClient, MCPTool, StdioServer, register_mcp_client, remove_mcp_clients
from agentkit.testing import tool_use
from agentkit.tools import Toolkit, ToolResponse
from tests._mcp_helpers import (
    PYTHON,
    ROOT,
    TIME_SERVER,
    children,
    py_stdio,
    stats_with,
    wait_no_new_children,
)
from tests._waiting import eventually

PAGED_SERVER = ROOT / "tests" / "mcp_servers" / "paged_server.py"


@pytest.fixture(autouse=True)
async def no_leaks() -> AsyncIterator[None]:
    before = children()
    yield
    assert wait_no_new_children(before) == set()


async def run(toolkit: Toolkit, name: str, /, **arguments: object) -> list[ToolResponse]:
    block = tool_use(name, **arguments)
    async with contextlib.aclosing(toolkit.call_tool_function(block)) as chunks:
        return [c async for c in chunks]


async def final(toolkit: Toolkit, name: str, /, **arguments: object) -> ToolResponse:
    return (await run(toolkit, name, **arguments))[-1]


@pytest.fixture(params=["auto", "legacy"])
async def py(request: pytest.FixtureRequest) -> AsyncIterator[MCPClient]:
    async with MCPClient("py", py_stdio(), protocol=request.param) as client:
        yield client


@pytest.mark.skipif(not TIME_SERVER.exists(), reason="mcp-server-time not installed")
async def test_time_server_next_to_local_functions_in_parallel() -> None:
    toolkit = Toolkit()

    @toolkit.tool
    async def wait_and_add(a: int, b: int) -> int:
        """Wait a little, then add two integers."""
        await anyio.sleep(0.3)
        return a + b

    async with MCPClient("time", StdioServer(str(TIME_SERVER), ["--local-timezone", "UTC"])) as c:
        assert c.protocol_version == "2026-07-28"
        tools = await register_mcp_client(toolkit, c)
        assert {t.name for t in tools} == {"get_current_time", "convert_time"}
        assert {d.name for d in toolkit.get_tool_definitions()} == {
            "wait_and_add",
            "get_current_time",
            "convert_time",
        }
        results: dict[str, ToolResponse] = {}

        async def one(key: str, name: str, **arguments: object) -> None:
            results[key] = await final(toolkit, name, **arguments)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: one("local", "wait_and_add", a=1, b=2))
            tg.start_soon(lambda: one("now", "get_current_time", timezone="Europe/Paris"))
            tg.start_soon(
                lambda: one(
                    "convert",
                    "convert_time",
                    source_timezone="UTC",
                    time="12:00",
                    target_timezone="Asia/Tokyo",
                )
            )
        assert time.monotonic() - started < 5
        assert results["local"].get_text() == "3"
        assert "Europe/Paris" in results["now"].get_text()
        assert "21:00" in results["convert"].get_text()
        assert not any(r.is_error for r in results.values())


async def test_register_call_and_validate(py: MCPClient) -> None:
    toolkit = Toolkit()
    tools = await register_mcp_client(toolkit, py, enable_funcs=["add", "progress", "slow"])
    assert sorted(t.name for t in tools) == ["add", "progress", "slow"]
    assert all(isinstance(t, MCPTool) for t in tools)
    assert (await final(toolkit, "add", a=20, b=22)).get_text() == "42"
    # Validation happens in the Toolkit, before the server is asked.
    bad = await final(toolkit, "add", a="x", b=1)
    assert bad.is_error and bad.metadata and bad.metadata.get("error") == "invalid_arguments"


async def test_progress_chunks_through_toolkit(py: MCPClient) -> None:
    toolkit = Toolkit()
    await register_mcp_client(toolkit, py, enable_funcs=["progress"])
    chunks = await run(toolkit, "progress", steps=3)
    assert [c.is_last for c in chunks] == [False, False, False, True]
    assert chunks[-1].get_text() == "done 3"


async def test_execution_timeout_cancels_on_server(py: MCPClient) -> None:
    toolkit = Toolkit()
    await register_mcp_client(toolkit, py, enable_funcs=["slow", "stats"], timeout=0.4)
    started = time.monotonic()
    result = await final(toolkit, "slow", seconds=20)
    assert result.is_error and time.monotonic() - started < 3
    stats = await eventually(lambda: stats_with(py, "cancelled=1"), "the server's cancel")
    assert stats == "started=1 cancelled=1 finished=0"


async def test_interrupt_cancels_quickly(py: MCPClient) -> None:
    toolkit = Toolkit()
    await register_mcp_client(toolkit, py, enable_funcs=["slow", "stats"])
    with anyio.CancelScope() as scope:

        async def interrupt() -> None:
            # Interrupt once the server runs the call, so that there is a call to cancel.
            await eventually(lambda: stats_with(py, "started=1"), "the call to reach the server")
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(interrupt)
            await final(toolkit, "slow", seconds=20)
            pytest.fail("not interrupted")
    # The interrupted call is cancelled on the server, within a short time.
    started = time.monotonic()
    stats = await eventually(lambda: stats_with(py, "cancelled=1"), "the server's cancel")
    assert stats == "started=1 cancelled=1 finished=0"
    assert time.monotonic() - started < 5


async def test_crash_gives_error_then_next_call_works(py: MCPClient) -> None:
    toolkit = Toolkit()
    await register_mcp_client(toolkit, py, enable_funcs=["crash", "echo"])
    crashed = await final(toolkit, "crash")
    assert crashed.is_error
    assert (await final(toolkit, "echo", text="alive")).get_text() == "alive"


async def test_name_collisions_need_a_prefix() -> None:
    toolkit = Toolkit()
    async with MCPClient("a", py_stdio()) as a, MCPClient("b", py_stdio()) as b:
        await register_mcp_client(toolkit, a, enable_funcs=["echo", "add"])
        with pytest.raises(ToolRegistrationError, match="prefix"):
            await register_mcp_client(toolkit, b, enable_funcs=["echo", "pid"])
        assert "pid" not in toolkit.tools  # nothing registered on a clash
        tools = await register_mcp_client(toolkit, b, enable_funcs=["echo", "pid"], prefix="b")
        assert sorted(t.name for t in tools) == ["b_echo", "b_pid"]
        assert (await final(toolkit, "b_echo", text="from b")).get_text() == "from b"
        # remove by name, then by object
        await remove_mcp_clients(toolkit, ["b"])
        assert set(toolkit.tools) == {"echo", "add"}
        await remove_mcp_clients(toolkit, [a])
        assert dict(toolkit.tools) == {}


async def test_enable_disable_and_unknown_names(py: MCPClient) -> None:
    toolkit = Toolkit()
    with pytest.raises(ToolRegistrationError, match="does not have"):
        await register_mcp_client(toolkit, py, enable_funcs=["nope"])
    tools = await register_mcp_client(toolkit, py, disable_funcs=["crash", "slow"], group="basic")
    names = {t.name for t in tools}
    assert "crash" not in names and "slow" not in names and "echo" in names


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_pagination_of_tools_list(protocol: str) -> None:
    server = StdioServer(PYTHON, [str(PAGED_SERVER)])
    toolkit = Toolkit()
    async with MCPClient("paged", server, protocol=protocol) as c:  # type: ignore[arg-type]
        tools = await register_mcp_client(toolkit, c)
        assert [t.name for t in tools] == [f"tool_{i:02d}" for i in range(25)]
        assert (await final(toolkit, "tool_24", x=7)).get_text() == "tool_24:7"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_list_changed_refreshes_registered_tools(protocol: str) -> None:
    toolkit = Toolkit()
    async with MCPClient("py", py_stdio(), protocol=protocol) as c:  # type: ignore[arg-type]
        await register_mcp_client(toolkit, c, prefix="py")
        assert "py_tripler" not in toolkit.tools
        await final(toolkit, "py_add_tool", name="tripler")
        await eventually(lambda: "py_tripler" in toolkit.tools, "the refreshed tool list")
        assert (await final(toolkit, "py_tripler", x=4)).get_text() == "8"


async def test_registration_connects_a_fresh_client() -> None:
    toolkit = Toolkit()
    client = MCPClient("py", py_stdio())
    try:
        await register_mcp_client(toolkit, client, enable_funcs=["echo"])
        assert client.is_connected
        assert (await final(toolkit, "echo", text="hi")).get_text() == "hi"
    finally:
        await client.close()


async def test_everything_through_toolkit_with_progress_and_structured_content() -> None:
    from tests._mcp_helpers import EVERYTHING, everything_stdio

    if not EVERYTHING.exists():
        pytest.skip("server-everything not installed")
    toolkit = Toolkit()
    async with MCPClient("everything", everything_stdio()) as c:
        await register_mcp_client(toolkit, c, prefix="ev")
        chunks = await run(toolkit, "ev_trigger-long-running-operation", duration=1, steps=3)
        assert [c.is_last for c in chunks] == [False, False, False, True]
        assert not chunks[-1].is_error
        weather = await final(toolkit, "ev_get-structured-content", location="Chicago")
        assert weather.metadata is not None
        assert set(weather.metadata["structured_content"]) == {
            "temperature",
            "conditions",
            "humidity",
        }
        # Validation against the server's schema happens in the Toolkit.
        bad = await final(toolkit, "ev_get-sum", a="two", b=3)
        assert bad.is_error

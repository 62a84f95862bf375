"""QA of serving a Toolkit over MCP and of ``agentkit mcp`` against failing servers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from agentkit.mcp._server import build_server
from agentkit.tools import Toolkit, ToolResponse

ROOT = Path(__file__).resolve().parent.parent


def build() -> Toolkit:
    tk = Toolkit()

    @tk.tool
    async def gen(n: int) -> Any:
        """Yield progress, then the result.

        Args:
            n: How many parts.
        """
        for i in range(n):
            yield ToolResponse.text(f"part {i}", is_last=False)
        yield ToolResponse.text(f"all {n}")

    @tk.tool(requires_approval=True)
    def delete_everything() -> str:
        """Needs a human's approval."""
        return "deleted everything"

    @tk.tool
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    @tk.tool
    async def sleepy(seconds: float) -> str:
        """Sleep.

        Args:
            seconds: How long.
        """
        await anyio.sleep(seconds)
        return "woke"

    return tk


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_approval_tools_are_not_served_by_default(mode: str) -> None:
    async with Client(build_server(build()), mode=mode, cache=None) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["gen", "boom", "sleepy"]
        with pytest.raises(MCPError) as refused:  # hidden: as unknown as a missing tool
            await client.call_tool("delete_everything", {})
        assert (refused.value.code, refused.value.message) == (
            -32602,
            "Unknown tool: delete_everything",
        )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_approval_tools_served_when_the_client_asks_its_user(mode: str) -> None:
    server = build_server(build(), approval="client")
    async with Client(server, mode=mode, cache=None) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "delete_everything" in names
        result = await client.call_tool("delete_everything", {})
        assert not result.is_error and text(result) == "deleted everything"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_generator_failing_and_cancelled_tools(mode: str) -> None:
    async with Client(build_server(build()), mode=mode) as client:
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        result = await client.call_tool("gen", {"n": 3}, progress_callback=on_progress)
        assert text(result) == "all 3" and not result.is_error
        assert progress == [(1.0, "part 0"), (2.0, "part 1"), (3.0, "part 2")]
        failed = await client.call_tool("boom", {})
        assert failed.is_error and "kaboom" in text(failed)
        tasks = len(asyncio.all_tasks())
        with anyio.move_on_after(0.3):
            await client.call_tool("sleepy", {"seconds": 30})
        with anyio.fail_after(5):
            while len(asyncio.all_tasks()) > tasks:  # the cancelled tool's task is gone
                await anyio.sleep(0.02)
        assert text(await client.call_tool("gen", {"n": 1})) == "all 1"


# -- agentkit mcp against failing servers --------------------------------------------------


def agentkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_cli_server_dying_at_startup_shows_why() -> None:
    code = "import sys; print('fatal: missing --repository', file=sys.stderr); sys.exit(2)"
    out = agentkit("mcp", "tools", "--stdio", f'{sys.executable} -c "{code}"')
    assert out.returncode == 1
    assert "fatal: missing --repository" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_server_printing_garbage_is_a_clean_error() -> None:
    out = agentkit("mcp", "tools", "--stdio", f"{sys.executable} -c \"print('banner v1.0')\"")
    assert out.returncode == 1
    assert "not JSON-RPC" in out.stderr and "banner v1.0" in out.stderr
    assert "Traceback" not in out.stderr  # the SDK's per-line tracebacks are kept off the tty


async def test_streamed_output_of_a_served_tool_is_not_decorated(tmp_path: Path) -> None:
    from agentkit.mcp import MCPClient, StdioServer

    server = StdioServer(
        sys.executable,
        ["-m", "toolkits.shell", "--root", str(tmp_path), "--allow-shell"],
        cwd=str(ROOT),
    )
    async with MCPClient("sh", server) as client:
        chunks = [c async for c in client.call_tool_stream("run_command", {"command": "echo hi"})]
    assert chunks[0].get_text() == "hi\n"  # not "hi\n (1)": the counter is in metadata
    assert chunks[0].metadata["progress"] == 1
    assert chunks[-1].get_text().startswith("hi")

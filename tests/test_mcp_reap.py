"""A stdio MCP server's detached descendants do not outlive ``close()`` (Linux, /proc)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from agentkit.mcp import MCPClient, StdioServer
from agentkit.mcp._reap import MARKER_VAR, server_tree

SPAWNING = Path(__file__).with_name("mcp_servers") / "spawning_server.py"

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self"), reason="reaping detached descendants needs /proc (Linux)"
)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a reaped-by-init zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def wait_for_file(path: Path) -> int:
    for _ in range(1000):  # bounded; the test's own timeout is the real limit
        if path.exists() and path.read_text():
            return int(path.read_text())
        await anyio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


async def gone(pid: int) -> bool:
    for _ in range(1000):
        if not alive(pid):
            return True
        await anyio.sleep(0.01)
    return False


@pytest.mark.parametrize("mode", ["setsid", "daemon"])
async def test_a_detached_descendant_is_reaped_on_close(mode: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "descendant.pid"
    server = StdioServer(sys.executable, [str(SPAWNING), mode, str(pidfile)])
    async with MCPClient("spawning", server) as client:
        assert (await client.call_tool("echo", {"text": "x"})).get_text() == "x"
        pid = await wait_for_file(pidfile)
        assert alive(pid)
        assert os.getpgid(pid) != os.getpgid(os.getpid())  # it left every group we know
    try:
        assert await gone(pid), f"the {mode} descendant {pid} outlived close()"
    finally:
        if alive(pid):
            os.kill(pid, 9)


async def test_the_tree_never_includes_unrelated_processes(tmp_path: Path) -> None:
    sleeper = await anyio.open_process([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tree = server_tree(os.getpid(), {MARKER_VAR: "not-a-real-marker"})
        assert sleeper.pid in tree  # our own child, by parent chain
        other = server_tree(sleeper.pid, {MARKER_VAR: "not-a-real-marker"})
        assert other == {}  # no descendants, and nobody carries that marker
    finally:
        sleeper.kill()
        await sleeper.wait()

"""Shared helpers for the MCP tests: server configs, HTTP server processes, leak checks."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from agentkit.mcp import HttpServer, MCPClient, StdioServer

ROOT = Path(__file__).resolve().parent.parent
PY_SERVER = ROOT / "tests" / "mcp_servers" / "py_server.py"
EVERYTHING = (
    ROOT / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
TIME_SERVER = ROOT / ".venv" / "bin" / "mcp-server-time"
PYTHON = sys.executable


def py_stdio(**kwargs: object) -> StdioServer:
    return StdioServer(PYTHON, [str(PY_SERVER), "stdio"], **kwargs)  # type: ignore[arg-type]


async def stats_with(client: MCPClient, part: str) -> str | None:
    """py_server's ``slow`` counters, or None while they do not show ``part`` yet.

    For :func:`tests._waiting.eventually`: ``part`` is e.g. ``"cancelled=1"``.
    """
    stats = (await client.call_tool("stats")).get_text()
    return stats if part in stats else None


def everything_stdio() -> StdioServer:
    return StdioServer("node", [str(EVERYTHING), "stdio"])


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def wait_no_new_children(before: set[int], timeout: float = 10.0) -> set[int]:
    """Children started since ``before`` that are still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        alive = set()
        for pid in children() - before:
            with contextlib.suppress(psutil.NoSuchProcess):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(mode: str) -> Iterator[tuple[HttpServer, subprocess.Popen[bytes]]]:
    """Run py_server over ``mode`` ("http" or "sse") on a free 127.0.0.1 port."""
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, str(PY_SERVER), mode, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{mode} test server did not start")
            time.sleep(0.05)
        if mode == "http":
            config = HttpServer(f"http://127.0.0.1:{port}/mcp")
        else:
            config = HttpServer(f"http://127.0.0.1:{port}/sse", transport="sse")
        yield config, proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

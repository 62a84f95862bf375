"""``agentkit mcp list|tools|call`` against real servers (server-everything, our own over HTTP)."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVERYTHING = (
    ROOT / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
STDIO = f"node {EVERYTHING} stdio"

needs_everything = pytest.mark.skipif(
    not EVERYTHING.exists(), reason="npm server-everything not installed"
)


def agentkit(*args: str, timeout: float = 45) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@needs_everything
def test_tools_lists_names_and_schemas() -> None:
    out = agentkit("mcp", "tools", "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    assert "get-sum: " in out.stdout
    assert '"a": {' in out.stdout  # the input schema is shown
    assert "13 tools" in out.stdout or "17 tools" in out.stdout


@needs_everything
def test_tools_json() -> None:
    out = agentkit("mcp", "tools", "--json", "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    tools = {t["name"]: t for t in json.loads(out.stdout)}
    assert tools["get-sum"]["inputSchema"]["required"] == ["a", "b"]


@needs_everything
def test_call_prints_the_result() -> None:
    out = agentkit("mcp", "call", "get-sum", '{"a": 2, "b": 3}', "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "The sum of 2 and 3 is 5."


@needs_everything
def test_call_shows_progress_and_structured_content() -> None:
    args = '{"duration": 1, "steps": 2}'
    out = agentkit("mcp", "call", "trigger-long-running-operation", args, "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    assert "progress 1/2" in out.stderr and "progress 2/2" in out.stderr
    assert out.stderr.count("1/2") == 1  # each progress line printed once (issue 13, item 26)
    out = agentkit(
        "mcp",
        "call",
        "get-structured-content",
        '{"location": "New York"}',
        "--json",
        "--stdio",
        STDIO,
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["metadata"]["structured_content"]["temperature"] == 33


@needs_everything
def test_call_errors_exit_non_zero() -> None:
    out = agentkit("mcp", "call", "no-such-tool", "--stdio", STDIO)
    assert out.returncode == 1
    assert "no-such-tool" in out.stdout
    out = agentkit("mcp", "call", "get-sum", "[1, 2]", "--stdio", STDIO)
    assert out.returncode == 2
    assert "JSON object" in out.stderr


@needs_everything
def test_list_shows_server_info_resources_and_prompts() -> None:
    out = agentkit("mcp", "list", "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "server: mcp-servers/everything" in text
    assert "capabilities: " in text and "tools" in text
    assert "demo://resource/static/document/architecture.md" in text
    assert "demo://resource/dynamic/text/{resourceId}" in text
    assert "args-prompt(city, state?)" in text


def test_unreachable_server_is_a_clean_error() -> None:
    out = agentkit("mcp", "tools", "--stdio", "definitely-not-a-command-xyz")
    assert out.returncode == 1
    assert "error:" in out.stderr
    assert "Traceback" not in out.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: pathlib.Path) -> Iterator[str]:
    (tmp_path / "hello.txt").write_text("hello over HTTP\n")
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolkits.filesystem",
            "--root",
            str(tmp_path),
            "--read-only",
            "--transport",
            "streamable_http",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the HTTP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_http_tools_and_call(http_server: str) -> None:
    out = agentkit("mcp", "tools", "--http", http_server)
    assert out.returncode == 0, out.stderr
    assert "read_file: " in out.stdout and "4 tools" in out.stdout
    out = agentkit("mcp", "call", "read_file", '{"path": "hello.txt"}', "--http", http_server)
    assert out.returncode == 0, out.stderr
    assert "hello over HTTP" in out.stdout
    out = agentkit("mcp", "list", "--json", "--http", http_server)
    assert out.returncode == 0, out.stderr
    details = json.loads(out.stdout)
    assert details["server"]["name"] == "agentkit-filesystem"
    assert "read_file" in details["tools"] and details["resources"] == []


@needs_everything
def test_call_marks_images_and_passes_env() -> None:
    out = agentkit("mcp", "call", "get-tiny-image", "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    assert "[image image/png]" in out.stdout
    out = agentkit("mcp", "call", "get-env", "--env", "AGENTKIT_TEST=yes-1", "--stdio", STDIO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["AGENTKIT_TEST"] == "yes-1"


# -- issue 13, item 26: CLI polish --------------------------------------------------------
def test_help_is_plain_text_not_rest() -> None:
    for command in (["mcp", "--help"], ["chat", "--help"]):
        out = agentkit(*command)
        assert out.returncode == 0, out.stderr
        assert "``" not in out.stdout and "::" not in out.stdout


def test_errors_name_the_server_by_its_command() -> None:
    out = agentkit("mcp", "tools", "--stdio", "definitely-not-a-command-xyz --flag")
    assert out.returncode == 1
    assert "definitely-not-a-command-xyz" in out.stderr  # named by its command
    assert "'cli'" not in out.stderr


def test_sse_url_without_the_flag_gets_a_hint() -> None:
    port = _free_port()
    server = ROOT / "tests/mcp_servers/py_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(server), "sse", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/sse"
        out = agentkit("mcp", "tools", "--http", url)
        assert out.returncode == 1
        assert "this looks like an SSE endpoint: add --sse" in out.stderr
        assert url in out.stderr  # the error names the server by its URL
        out = agentkit("mcp", "tools", "--http", url, "--sse")
        assert out.returncode == 0, out.stderr
        assert "echo: " in out.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=15)

"""The stdio client survives servers that misbehave: invalid UTF-8, huge lines, odd commands.

Real servers over real pipes: ``tests/mcp_servers/raw_server.py`` writes what SDK servers
never do (an invalid UTF-8 byte, a 50 MB line); ``mcp-server-time`` is the README's example.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from agentkit.exceptions import MCPCallInterrupted, MCPConnectionError
from agentkit.mcp import MCPClient, StdioServer
from agentkit.mcp._stdio import Overflow, split_lines, truncated_response
from tests._mcp_helpers import ROOT, TIME_SERVER

RAW = str(ROOT / "tests" / "mcp_servers" / "raw_server.py")
pytestmark = pytest.mark.anyio


def raw(**kwargs: object) -> MCPClient:
    return MCPClient("raw", StdioServer(sys.executable, [RAW]), **kwargs)  # type: ignore[arg-type]


async def test_invalid_utf8_breaks_the_connection_now_and_reconnects() -> None:
    # Before: the SDK's reader died on the byte, the client still said connected, and this
    # call (and every later one) waited out the whole timeout.
    async with raw(timeout=45) as client:
        with pytest.raises(MCPCallInterrupted) as broken:  # it ran; the answer is lost
            await client.call_tool("bad_utf8")
        text = str(broken.value)
        assert "invalid UTF-8" in text and "0xff" in text and "timed out" not in text
        assert not client.is_connected
        again = await client.call_tool("ok")  # reconnected on the next call
        assert not again.is_error and again.get_text() == "fine"
        assert client.reconnects == 1


async def test_fifty_megabyte_result_is_truncated_with_a_note() -> None:
    async with raw(timeout=45, max_result_bytes=1024 * 1024) as client:
        result = await client.call_tool("big", {"mb": 50})
        assert not result.is_error
        text = result.get_text()
        assert text.startswith("yyyy")
        assert "truncated by agentkit" in text and "52,428,8" in text
        assert len(text) < 1024 * 1024 + 500
        assert result.metadata["mcp_meta"]["agentkit/truncated"]["limit"] == 1024 * 1024
        assert (await client.call_tool("ok")).get_text() == "fine"  # the stream is still in sync


def test_line_splitter_is_bounded_and_keeps_message_boundaries() -> None:
    feed = split_lines(8)
    out = feed(b'{"a":1}\n{"id":7,"result"') + feed(b":" + b"x" * 100) + feed(b"}\nnext\n")
    assert out[0] == b'{"a":1}'
    assert isinstance(out[1], Overflow) and out[1].head == b'{"id":7,' and out[1].size == 118
    assert out[2] == b"next"


def test_truncated_response_keeps_the_id_and_text_start() -> None:
    head = b'{"jsonrpc":"2.0","id":"r-1","result":{"content":[{"type":"text","text":"ab\\u00e9c'
    message = truncated_response(Overflow(head, 10_000), 100)
    assert message is not None and message["id"] == "r-1"
    assert message["result"]["content"][0]["text"].startswith("ab\u00e9c\n[truncated")
    assert truncated_response(Overflow(b'{"result": {"id": 3', 10_000), 100) is None


async def test_command_found_next_to_the_interpreter_without_an_activated_venv() -> None:
    assert TIME_SERVER.exists()
    server = StdioServer("mcp-server-time", env={"PATH": "/usr/bin:/bin"})
    async with MCPClient("time", server) as client:
        names = {t.name for t in await client.list_tools()}
    assert "get_current_time" in names


async def test_python_means_the_running_interpreter() -> None:
    server = StdioServer("python", [RAW], env={"PATH": "/nonexistent"})
    async with MCPClient("raw", server) as client:
        assert (await client.call_tool("ok")).get_text() == "fine"


async def test_missing_command_fails_with_one_line_naming_command_path_and_fix() -> None:
    server = StdioServer("no-such-mcp-server-xyz", env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(MCPConnectionError) as info:
        await MCPClient("x", server).connect()
    message = str(info.value)
    assert "\n" not in message
    assert "'no-such-mcp-server-xyz'" in message and "/usr/bin:/bin" in message
    assert "install it" in message and "full path" in message
    assert not isinstance(info.value.__cause__, BaseExceptionGroup)


# -- served over stdio (issue 13 item 22) ---------------------------------------------------

DEMO = str(ROOT / "tests" / "_mcp_serve_demo.py")


def _start_demo() -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, DEMO, "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _ask(proc: subprocess.Popen[bytes], line: bytes) -> dict[str, object]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + b"\n")
    proc.stdin.flush()
    answer: dict[str, object] = json.loads(proc.stdout.readline())
    return answer


def _finish(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


INIT_LINE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
).encode()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stdio_server_stops_on_signal_while_stdin_is_open(sig: signal.Signals) -> None:
    proc = _start_demo()
    try:
        assert "result" in _ask(proc, INIT_LINE)  # serving, stdin still open
        proc.send_signal(sig)
        # Before: the SDK's reader thread sat in readline() until stdin closed: no exit.
        assert proc.wait(timeout=30) is not None
    finally:
        _finish(proc)


def test_stdio_server_answers_unparseable_requests() -> None:
    proc = _start_demo()
    try:
        assert "result" in _ask(proc, INIT_LINE)
        parse = _ask(proc, b"this is not json")
        assert parse["id"] is None and parse["error"]["code"] == -32700  # type: ignore[index]
        invalid = _ask(proc, b'{"jsonrpc": "2.0", "id": 5, "method": 7}')
        assert invalid["id"] == 5 and invalid["error"]["code"] == -32600  # type: ignore[index]
        array = _ask(proc, b"[1, 2]")
        assert array["error"]["code"] == -32600  # type: ignore[index]
        pong = _ask(proc, b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}')
        assert pong == {"jsonrpc": "2.0", "id": 9, "result": {}}
    finally:
        _finish(proc)

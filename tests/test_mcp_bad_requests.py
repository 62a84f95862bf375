"""One bad request gets an error and changes nothing else: agentkit's MCP endpoints keep going.

- A served stdio toolkit (``tests/_mcp_serve_demo.py`` in a real process, raw JSON-RPC lines
  on its pipes): deeply nested JSON and request ids that are not strings or integers each
  get a JSON-RPC error, and the next request is served.
- The OAuth loopback redirect listener (a real socket): a forged or malformed redirect gets
  an error page and the listener waits for the real one.
- A tool the server hides (it needs approval) is as unknown as a tool that does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from mcp import Client, MCPError

from agentkit.mcp._app import MCPApp
from agentkit.mcp._loopback import wait_for_redirect
from agentkit.tools import Toolkit
from tests._mcp_helpers import ROOT, free_port

DEMO = str(ROOT / "tests" / "_mcp_serve_demo.py")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


class Wire:
    """Raw JSON-RPC lines to and from a served stdio toolkit."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed its output (it died)"
        answer: dict[str, object] = json.loads(line)
        return answer

    def ask(self, line: bytes, then_ping: int | None = None) -> dict[str, object]:
        """Send ``line`` and read the first answer.

        With ``then_ping``, a ping follows at once: a line the server wrongly leaves
        unanswered then shows up as the pong instead of blocking the test; the pong is
        checked after the answer.
        """
        self.send(line)
        if then_ping is not None:
            self.send(_ping(then_ping))
        answer = self.receive()
        if then_ping is not None:
            assert answer.get("id") != then_ping, f"no answer to {line[:80]!r}"
            assert self.receive() == {"jsonrpc": "2.0", "id": then_ping, "result": {}}
        return answer


def _ping(rid: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}).encode()


@pytest.fixture
def wire() -> Iterator[Wire]:
    proc = subprocess.Popen(
        [sys.executable, DEMO, "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        served = Wire(proc)
        assert "result" in served.ask(json.dumps(INIT).encode())
        yield served
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def _nested_call(rid: int, depth: int) -> bytes:
    arguments = '{"a": ' + "[" * depth + "]" * depth + "}"
    return (
        f'{{"jsonrpc": "2.0", "id": {rid}, "method": "tools/call", '
        f'"params": {{"name": "add", "arguments": {arguments}}}}}'
    ).encode()


def _error(answer: dict[str, object]) -> tuple[object, object]:
    error = answer["error"]
    assert isinstance(error, dict)
    return answer["id"], error["code"]


def test_a_line_nested_fifty_thousand_deep_is_refused_and_serving_goes_on(wire: Wire) -> None:
    line = _nested_call(2, 50_000)
    assert 95_000 < len(line) < 110_000  # about 100 KB on one line
    answer = wire.ask(line, then_ping=3)
    assert _error(answer) == (None, -32600)
    assert "nested" in str(answer["error"])
    shallow = wire.ask(_nested_call(4, 40), then_ping=5)  # ordinary nesting reaches the tool
    assert shallow["id"] == 4 and "result" in shallow


def test_a_request_id_that_is_not_a_string_or_integer_is_an_invalid_request(
    wire: Wire,
) -> None:
    for n, rid in enumerate(['{"a": 1}', "[1]", "true", "null", "1.5"]):
        line = f'{{"jsonrpc": "2.0", "id": {rid}, "method": "ping"}}'.encode()
        answer = wire.ask(line, then_ping=10 + n)
        assert answer["jsonrpc"] == "2.0" and _error(answer) == (None, -32600), rid
    assert wire.ask(b'{"jsonrpc": "2.0", "id": "s", "method": "ping"}')["id"] == "s"
    # JSON-RPC's own exception: an error about a request that could not be read has id null.
    # It is taken, not answered (two peers must not answer each other's errors forever).
    wire.send(b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "?"}}')
    assert wire.ask(_ping(20)) == {"jsonrpc": "2.0", "id": 20, "result": {}}


# -- the OAuth loopback listener -------------------------------------------------------


async def test_forged_redirects_get_an_error_page_and_the_login_goes_on() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    statuses: list[int] = []

    async def browser() -> None:
        async with httpx2.AsyncClient() as http:
            for path in (
                "/callback?code=stolen&state=%C3%A9",  # a non-ASCII state
                "/callback?code=stolen&state=%FF%FE",  # not even UTF-8
                "//[/callback?code=stolen",  # a target urlparse refuses
                "/callback?code=the-code&state=s3cret",
            ):
                statuses.append((await http.get(base + path)).status_code)

    with anyio.fail_after(30):
        result = await wait_for_redirect("127.0.0.1", port, "/callback", "s3cret", browser)
    assert (result.code, result.state) == ("the-code", "s3cret")
    assert statuses == [400, 400, 400, 200]


# -- hidden tools ----------------------------------------------------------------------


async def test_a_tool_hidden_for_needing_approval_is_an_unknown_tool() -> None:
    tk = Toolkit()

    def delete_all() -> str:
        """Delete everything."""
        return "deleted"

    tk.register_tool_function(delete_all, requires_approval=True)
    async with Client(MCPApp(tk).build_server(), mode="legacy") as client:
        assert [t.name for t in (await client.list_tools()).tools] == []
        answers = []
        for name in ("delete_all", "no_such_tool"):
            with pytest.raises(MCPError) as info:
                await client.call_tool(name, {})
            answers.append((info.value.code, info.value.message.replace(name, "NAME")))
    assert answers[0] == answers[1] == (-32602, "Unknown tool: NAME")

"""Served tools that ask the client's user (``MCPContext.elicit``), in both protocol eras.

2026-07-28: the call ends with an ``InputRequiredResult``, the client answers and retries,
the tool runs again with the answer. 2025-11-25: a mid-call ``elicitation/create``. Both
through agentkit's own ``MCPClient`` over real stdio and streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from mcp import Client, MCPError

from agentkit.mcp import HttpServer, MCPClient, StdioServer, serve
from agentkit.mcp._app import MCPApp
from agentkit.mcp._callbacks import make_elicitation_callback
from agentkit.mcp._context import MCPContext
from agentkit.tools import ToolContext, Toolkit
from tests._mcp_elicit_server import build

pytestmark = pytest.mark.anyio

SCRIPT = str(Path(__file__).with_name("_mcp_elicit_server.py"))
MODERN = "2026-07-28"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def _http_url() -> AsyncIterator[str]:
    port = _free_port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(build(), "streamable_http", port=port, name="elicit"))
        with anyio.fail_after(20):
            while True:  # wait until uvicorn listens
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


class Asker:
    """An elicitation callback answering from a script, recording what it was asked."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def __call__(self, message: str, schema: dict[str, object]) -> Any:
        self.asked.append(message)
        return self.answers.pop(0)


async def _check_answers(client_for: Any, protocol: Literal["auto", "legacy"]) -> None:
    era = MODERN if protocol == "auto" else "2025-11-25"
    cases = [
        ({"seats": 3}, f"booked 3 to Oslo at {era}"),
        ({}, f"booked 1 to Oslo at {era}"),  # the schema default filled in by the client
        ("decline", f"not booked (decline) at {era}"),
        (None, f"not booked (decline) at {era}"),
        ("cancel", f"not booked (cancel) at {era}"),
    ]
    for answer, expected in cases:
        asker = Asker(answer)
        async with client_for(asker, protocol) as client:
            assert client.protocol_version == era
            result = await client.call_tool("book", {"city": "Oslo"})
        assert not result.is_error, result.get_text()
        assert result.get_text() == expected
        assert asker.asked == ["How many seats to Oslo?"]  # asked exactly once


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_elicit_over_streamable_http(protocol: Literal["auto", "legacy"]) -> None:
    async with _http_url() as url:

        def client_for(asker: Asker, proto: Literal["auto", "legacy"]) -> MCPClient:
            server = HttpServer(url)
            return MCPClient("e", server, protocol=proto, elicitation_callback=asker, timeout=30)

        await _check_answers(client_for, protocol)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_elicit_over_stdio(protocol: Literal["auto", "legacy"]) -> None:
    def client_for(asker: Asker, proto: Literal["auto", "legacy"]) -> MCPClient:
        server = StdioServer(sys.executable, [SCRIPT], stderr="devnull")
        return MCPClient("e", server, protocol=proto, elicitation_callback=asker, timeout=30)

    await _check_answers(client_for, protocol)


async def test_two_questions_take_two_rounds_and_each_is_asked_once() -> None:
    asker = Asker({"name": "Ada"}, {"seats": 2})
    async with _http_url() as url:
        client = MCPClient("e", HttpServer(url), elicitation_callback=asker, timeout=30)
        async with client:
            assert client.protocol_version == MODERN
            result = await client.call_tool("survey", {})
    assert result.get_text() == "{'name': 'Ada'} then {'seats': 2}"
    assert asker.asked == ["Your name?", "Seats?"]


async def test_the_first_round_is_an_input_required_result_with_sealed_state() -> None:
    server = MCPApp(build(), name="elicit").build_server()
    async with Client(server, mode=MODERN, elicitation_callback=_accept) as client:
        first = await client.session.call_tool("book", {"city": "Oslo"}, allow_input_required=True)
        assert first.result_type == "input_required"
        requests = first.input_requests or {}
        assert [r.method for r in requests.values()] == ["elicitation/create"]
        state = first.request_state or ""
        assert "answers" not in state  # sealed: the client cannot read our state
        # A forged or replayed state is refused, not trusted.
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "book", {"city": "Bergen"}, request_state=state, allow_input_required=True
            )
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "book",
                {"city": "Oslo"},
                request_state='{"v":1,"answers":{}}',
                allow_input_required=True,
            )


async def _accept(context: Any, params: Any) -> Any:
    from mcp_types import ElicitResult

    return ElicitResult(action="accept", content={"seats": 5})


async def test_a_client_without_elicitation_gets_a_clear_error() -> None:
    async with _http_url() as url, MCPClient("e", HttpServer(url), timeout=30) as client:
        assert client.protocol_version == MODERN
        result = await client.call_tool("book", {"city": "Oslo"})
    assert result.is_error
    # SEP-2575: a request needing an undeclared client capability is a -32021 protocol error
    assert "-32021" in result.get_text() and "elicitation" in result.get_text()


async def test_an_answer_counts_only_for_the_question_it_answered() -> None:
    tk = Toolkit()
    runs: list[int] = []

    @tk.tool
    async def reworded(ctx: ToolContext) -> str:
        """Asks a differently worded question after its first run."""
        mcp = MCPContext.of(ctx)
        assert mcp is not None
        runs.append(len(runs))
        wording = "first wording" if len(runs) == 1 else "second wording"
        answer = await mcp.elicit(wording, {"type": "object", "properties": {}})
        return str(answer["content"])

    asker = Asker({"n": 1}, {"n": 2})
    callback = make_elicitation_callback(asker)
    server = MCPApp(tk, name="r").build_server()
    async with Client(server, mode=MODERN, elicitation_callback=callback) as client:
        result = await client.call_tool("reworded", {})
    assert result.content[0].text == "{'n': 2}"  # type: ignore[union-attr]
    assert asker.asked == ["first wording", "second wording"]  # the reworded one re-asked
    assert runs == [0, 1, 2]  # the body runs once per round

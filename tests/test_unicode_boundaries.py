"""Text that is not valid UTF-8 never poisons a conversation (issue 13, item 1).

Lone surrogates reach Python strings from outside: file names with undecodable bytes
(``surrogateescape``), JSON ``\\ud83d`` escapes without a partner (an emoji split across two
stream chunks), tools and MCP servers returning them. Wherever they enter, memory must stay
valid Unicode, so that every later model request and session save succeeds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from _model_calls import ask, request_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import ReActAgent, UserAgent
from agentkit._text import StreamText, clean_json, clean_text
from agentkit.events import ToolProgress, ToolResult
from agentkit.mcp._convert import content_to_blocks, result_to_response
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models import OpenAIChatModel
from agentkit.models._anthropic import AnthropicChatModel
from agentkit.models._http import dumps
from agentkit.models._openai_format import OpenAIStreamState
from agentkit.session import JSONSession, SQLiteSession
from agentkit.testing import ScriptedModel
from agentkit.tools import Toolkit, ToolResponse
from tests._wire_server import Stream, WireServer, sse

BAD = "bad \udce9 half \ud83d lone \udfff end"  # escaped byte, lone high, lone low


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


async def _assert_usable(agent: ReActAgent, tmp: Path) -> None:
    """A model request and a session save both succeed with the agent's memory."""
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    for msg in memory:
        json.dumps(msg.to_dict(), ensure_ascii=False).encode("utf-8")
    body = OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9").format_request(
        request_of(memory)
    )
    dumps(body)  # the exact encoder the OpenAI adapter sends with
    anthropic = AnthropicChatModel("m", api_key="k", base_url="http://127.0.0.1:9")
    dumps(anthropic.format_request(request_of(memory)))
    async with JSONSession(tmp / "json") as store:
        await store.save("s", agent)
    async with SQLiteSession(tmp / "db.sqlite") as store:
        await store.save("s", agent)


def _tool_agent(tool: Any, arguments: dict[str, Any]) -> ReActAgent:
    toolkit = Toolkit()
    toolkit.register_tool_function(tool)
    model = ScriptedModel([[_call("c1", tool.__name__, **arguments)], "done"])
    return ReActAgent("a", "sys", model, toolkit)


# -- the helper -----------------------------------------------------------------------------
def test_clean_text_replaces_visibly_and_keeps_valid_text() -> None:
    assert clean_text("ok 😀 é") == "ok 😀 é"
    assert clean_text("caf\udce9") == "caf\\xe9"  # the escaped byte shows as \xNN
    assert clean_text("\ud83d\ude00") == "😀"  # a pair stored as two code points is joined
    assert clean_text("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    data = {"k\ud800": ["x", {"y": "\udce9"}], "n": 1}
    assert clean_json(data) == {"k\ufffd": ["x", {"y": "\\xe9"}], "n": 1}
    clean = {"a": ["b", {"c": 1}]}
    assert clean_json(clean) is clean


def test_stream_text_never_shows_half_a_pair() -> None:
    text = StreamText()
    text.add("a\ud83d")
    assert text.value() == "a"  # the high half waits for its partner
    text.add("\ude00b")
    assert text.value() == "a😀b"
    text.add("\ud83d")
    assert text.value(final=True) == "a😀b\ufffd"


# -- each boundary ------------------------------------------------------------------------
async def test_tool_output_with_lone_surrogates(tmp_path: Path) -> None:
    def leak() -> str:
        """Return broken text."""
        return BAD

    agent = _tool_agent(leak, {})
    await agent("go")
    await _assert_usable(agent, tmp_path)
    result = (await agent.memory.get_memory())[-2].get_blocks("tool_result")[0]
    assert result["output"] == "bad \\xe9 half \ufffd lone \ufffd end"


async def test_file_name_with_undecodable_byte_in_tool_result(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    try:
        (folder / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    except (UnicodeEncodeError, OSError):
        pytest.skip("the file system refuses undecodable names")

    def list_names() -> list[str]:
        """List the folder."""
        return sorted(os.listdir(folder))  # surrogate-escaped names, as the OS gives them

    agent = _tool_agent(list_names, {})
    await agent("go")
    await _assert_usable(agent, tmp_path)
    result = (await agent.memory.get_memory())[-2].get_blocks("tool_result")[0]
    assert "caf\\xe9.txt" in result["output"]


async def test_tool_arguments_with_lone_surrogates(tmp_path: Path) -> None:
    seen: list[str] = []

    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What to echo.
        """
        seen.append(text)
        return text

    agent = _tool_agent(echo, {"text": BAD})
    await agent("go")
    await _assert_usable(agent, tmp_path)
    assert seen == [clean_text(BAD)]


async def test_generator_tool_progress_with_lone_surrogates(tmp_path: Path) -> None:
    async def stream() -> Any:
        """Stream broken text."""
        yield "one \ud800"
        yield ToolResponse.text(" two \udce9", is_last=False)

    agent = _tool_agent(stream, {})
    events = [event async for event in agent.stream("go")]
    progress = [e.chunk.get_text() for e in events if isinstance(e, ToolProgress)]
    results = [e.result["output"] for e in events if isinstance(e, ToolResult)]
    # Each chunk is made valid where it enters, for the UI (progress) and the model alike.
    assert progress == [clean_text("one \ud800"), clean_text(" two \udce9")]
    assert results == [clean_text("one \ud800 two \udce9")]
    await _assert_usable(agent, tmp_path)


async def test_user_input_with_lone_surrogates(tmp_path: Path) -> None:
    user = UserAgent("me", input_fn=lambda prompt: BAD)
    msg = await user()
    agent = ReActAgent("a", "sys", ScriptedModel(["ok"]))
    await agent(msg)
    assert msg.get_text() == clean_text(BAD)
    await _assert_usable(agent, tmp_path)


def test_mcp_content_with_lone_surrogates() -> None:
    from mcp_types import CallToolResult, TextContent

    blocks = content_to_blocks([TextContent(type="text", text=BAD)])
    assert blocks[0]["text"] == clean_text(BAD)
    result = CallToolResult(
        content=[TextContent(type="text", text=BAD)], structured_content={"k": BAD}
    )
    response = result_to_response(result, "srv", "t")
    json.dumps(response.metadata, ensure_ascii=False).encode("utf-8")
    assert response.get_text() == clean_text(BAD)


def _chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": reason}
    return sse({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [choice]})  # fmt: skip


def _split_stream(pieces: list[str], arguments: list[str]) -> list[bytes]:
    """SSE events whose JSON escapes each piece separately (``json.dumps`` ensures ASCII),
    so an emoji split between two pieces arrives as ``\\ud83d`` then ``\\ude00``."""
    events = [_chunk({"role": "assistant", "content": ""})]
    events += [_chunk({"content": p}) for p in pieces if p]
    events += [_chunk({"reasoning_content": p}) for p in pieces if p]
    if arguments:
        head = {"index": 0, "id": "c1", "type": "function"}
        events.append(
            _chunk({"tool_calls": [{**head, "function": {"name": "t", "arguments": ""}}]})
        )
        events += [
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in arguments
        ]
    events.append(_chunk({}, "tool_calls" if arguments else "stop"))
    return [*events, b"data: [DONE]\n\n"]


async def _stream_through_sdk(pieces: list[str], arguments: list[str]) -> list[Any]:
    async with WireServer() as server:
        server.script(Stream(_split_stream(pieces, arguments)))
        model = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=True)
        snapshots = []
        try:
            async for snapshot in await ask(model, [Msg("u", "hi", "user")]):
                for block in snapshot.content:  # every snapshot is valid, not only the last
                    json.dumps(block, ensure_ascii=False).encode("utf-8")
                snapshots.append(snapshot)
        finally:
            await model.aclose()
        return snapshots


async def test_emoji_split_across_sse_chunks_is_rejoined() -> None:
    snapshots = await _stream_through_sdk(["a\ud83d", "\ude00b", "\ud83d"], [])
    final = snapshots[-1]
    assert final.get_text() == "a😀b\ufffd"
    assert final.content[0] == {"type": "thinking", "thinking": "a😀b\ufffd"}


async def test_stream_tool_arguments_with_surrogate_escapes(tmp_path: Path) -> None:
    arguments = json.dumps({"text": "x\ud83d"})  # '{"text": "x\\ud83d"}': a lone escape
    snapshots = await _stream_through_sdk([], [arguments[:12], arguments[12:]])
    call = snapshots[-1].content[0]
    assert call["input"] == {"text": "x\ufffd"}


# -- the fuzz -------------------------------------------------------------------------------
_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
_any_text = st.lists(st.one_of(st.text(max_size=8), _surrogates), max_size=6).map("".join)
_from_bytes = st.binary(max_size=24).map(lambda b: b.decode("utf-8", "surrogateescape"))
_outside = st.one_of(_any_text, _from_bytes)
_fuzz = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_fuzz
@given(output=_outside, name=_outside, argument=_outside, user=_outside, mcp=_outside)
def test_fuzz_every_boundary_keeps_requests_and_saves_working(
    tmp_path: Path, output: str, name: str, argument: str, user: str, mcp: str
) -> None:
    from mcp_types import TextContent

    def tool(text: str) -> Any:
        """Answer with text, a file name and MCP content from outside.

        Args:
            text: Anything.
        """
        mcp_blocks = content_to_blocks([TextContent(type="text", text=mcp)])
        return [{"type": "text", "text": output + text + name}, *mcp_blocks]

    async def main() -> None:
        agent = _tool_agent(tool, {"text": argument})
        await agent(Msg("user", user, "user"))
        await _assert_usable(agent, tmp_path)

    anyio.run(main)


@settings(max_examples=10, deadline=None)
@given(text=_outside, cut=st.integers(0, 30))
def test_fuzz_model_deltas_through_the_openai_sdk(text: str, cut: int) -> None:
    # Split the escaped text anywhere, even between the two halves of a pair.
    units = text.encode("utf-16-le", "surrogatepass")
    at = min(cut, len(units) // 2) * 2
    pieces = [units[:at].decode("utf-16-le", "surrogatepass"),
              units[at:].decode("utf-16-le", "surrogatepass")]  # fmt: skip

    async def main() -> None:
        snapshots = await _stream_through_sdk(pieces, [json.dumps({"q": text})])
        final = snapshots[-1]
        assert final.get_text() == clean_text(text)
        agent = ReActAgent("a", "sys", ScriptedModel([final, "ok"]))
        agent.toolkit.register_tool_function(lambda q="": q, name="t")
        await agent("go")
        memory = await agent.memory.get_memory()
        dumps(OpenAIChatModel("m", api_key="k").format_request(request_of(memory)))

    anyio.run(main)


def test_state_loads_clean_from_a_session_saved_by_older_code() -> None:
    """A state with lone surrogates (written before this fix) loads as valid text."""
    raw = Msg("u", "x", "user").to_dict()
    raw["content"] = [{"type": "text", "text": BAD}]
    msg = Msg.from_dict(raw)
    assert msg.get_text() == clean_text(BAD)
    parsed = OpenAIStreamState()
    assert parsed.snapshot(final=True).content == []


def test_anthropic_stream_rejoins_a_split_emoji() -> None:
    from agentkit.models._anthropic_format import AnthropicStreamState

    state = AnthropicStreamState()
    state.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
    state.feed({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "a\ud83d"}})  # fmt: skip
    assert state.snapshot(final=False).get_text() == "a"
    state.feed({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "\ude00"}})  # fmt: skip
    assert state.snapshot(final=True).get_text() == "a😀"

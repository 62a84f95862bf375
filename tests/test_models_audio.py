"""Audio output (OpenAI Chat Completions): request, parsing, replay, other providers.

Wire-level: ``OpenAIChatModel`` through both of its transports (the lean ``httpx2`` path and
the real ``openai`` SDK client) against the local wire server.
"""

from __future__ import annotations

import base64
import io
import json
import time
import wave
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _model_calls import request_of
from _wire_server import Reply, Stream, WireServer, openai_completion, sse
from hypothesis import given
from hypothesis import strategies as st

from agentkit import ReActAgent
from agentkit.cli._console import EventRenderer
from agentkit.exceptions import UnsupportedContentError, UsageError
from agentkit.messages import Msg
from agentkit.models import (
    AnthropicChatModel,
    ChatResponse,
    ModelRequest,
    ModelSettings,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
)
from agentkit.models import _anthropic_format as anth
from agentkit.models import _openai_format as oai
from agentkit.models import _responses_format as rsp
from agentkit.models._openai_audio import EXPIRY_MARGIN, sniff_audio_type
from agentkit.serve._convert import to_agui_messages

FAST = RetryPolicy(max_retries=0)
AUDIO_OPTS: dict[str, Any] = {
    "modalities": ["text", "audio"],
    "audio": {"voice": "alloy", "format": "wav"},
}
TRANSCRIPT = "Hello there, traveller."


def _wav(frames: int = 480) -> bytes:
    """A real WAV clip: 24 kHz mono 16-bit, a ramp."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(24000)
        out.writeframes(b"".join((i * 37 % 65536).to_bytes(2, "little") for i in range(frames)))
    return buf.getvalue()


WAV = _wav()
WAV64 = base64.b64encode(WAV).decode()


def _later() -> int:
    return int(time.time()) + 3600


def audio_completion(audio_id: str = "audio_1", expires_at: int | None = None) -> dict[str, Any]:
    """A ``chat.completion`` answering with audio (content null, as OpenAI sends it)."""
    body = openai_completion(text=None)
    body["choices"][0]["message"]["audio"] = {
        "id": audio_id,
        "data": WAV64,
        "expires_at": expires_at if expires_at is not None else _later(),
        "transcript": TRANSCRIPT,
    }
    return body


def audio_chunks(audio_id: str = "audio_s", parts: int = 5) -> tuple[list[bytes], bytes]:
    """SSE events of a streamed audio answer, as OpenAI sends them.

    The first audio delta carries the id, then each one a separately base64-encoded piece of
    raw pcm16 with a transcript piece, and the last only ``expires_at``.
    """

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return sse({"id": "chatcmpl-a", "object": "chat.completion.chunk", "choices": [choice]})

    pcm = bytes(range(256)) * 3  # an odd number of bytes per piece: base64 padding mid-way
    step = -(-len(pcm) // parts)
    words = TRANSCRIPT.split(" ")
    events = [chunk({"role": "assistant", "content": None, "audio": {"id": audio_id}})]
    for n, start in enumerate(range(0, len(pcm), step)):
        piece = base64.b64encode(pcm[start : start + step]).decode()
        text = " ".join(words[n : n + 1]) + (" " if n + 1 < len(words) else "")
        events.append(
            chunk({"audio": {"data": piece, "transcript": text if n < len(words) else ""}})
        )
    events.append(chunk({"audio": {"expires_at": _later()}}))
    events.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 7, "completion_tokens": 30, "total_tokens": 37}
    events.append(
        sse({"id": "chatcmpl-a", "object": "chat.completion.chunk", "choices": [], "usage": usage})
    )
    return [*events, b"data: [DONE]\n\n"], pcm


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


@pytest.fixture(params=["auto", "sdk"])
def transport(request: pytest.FixtureRequest) -> str:
    """Both request paths: the lean one (``auto``) and the openai SDK client."""
    return str(request.param)


def _model(server: WireServer, transport: str, stream: bool = False) -> OpenAIChatModel:
    model = OpenAIChatModel(
        "gpt-4o-audio-preview",
        api_key="sk-test",
        base_url=server.openai_url,
        stream=stream,
        generate_kwargs=AUDIO_OPTS,
        retry=FAST,
        transport=transport,  # type: ignore[arg-type]
    )
    assert (model._lean is not None) == (transport == "auto")  # the path under test
    return model


async def _last(chunks: AsyncIterator[ChatResponse]) -> tuple[list[ChatResponse], ChatResponse]:
    seen = [c async for c in chunks]
    return seen, seen[-1]


# -- requests and non-streamed answers -----------------------------------------------------
async def test_request_body_and_parsed_answer(server: WireServer, transport: str) -> None:
    server.script(Reply(json=audio_completion()))
    model = _model(server, transport)
    try:
        response = await model.request(ModelRequest([Msg("user", "Say hello", "user")]))
    finally:
        await model.aclose()
    assert server.requests[0].json == {
        "model": "gpt-4o-audio-preview",
        "messages": [{"role": "user", "content": "Say hello"}],
        "modalities": ["text", "audio"],
        "audio": {"voice": "alloy", "format": "wav"},
    }
    text, audio = response.content
    assert text == {"type": "text", "text": TRANSCRIPT}
    assert audio["type"] == "audio"
    assert audio["source"] == {"type": "base64", "media_type": "audio/wav", "data": WAV64}
    assert audio["transcript"] == TRANSCRIPT
    assert audio["id"] == "audio_1"
    assert isinstance(audio["expires_at"], int)
    assert response.get_text() == TRANSCRIPT
    source: Any = audio["source"]
    decoded = base64.b64decode(source["data"])
    with wave.open(io.BytesIO(decoded)) as clip:  # the clip is intact
        assert clip.getframerate() == 24000


async def test_typed_settings_ask_per_request(server: WireServer, transport: str) -> None:
    server.script(Reply(json=audio_completion()))
    model = OpenAIChatModel(
        "gpt-4o-audio-preview",
        api_key="sk-test",
        base_url=server.openai_url,
        stream=False,
        retry=FAST,
        transport=transport,  # type: ignore[arg-type]
    )
    settings: ModelSettings = {
        "modalities": ["text", "audio"],
        "audio": {"voice": "coral", "format": "mp3"},
    }
    try:
        await model.request(ModelRequest([Msg("user", "hi", "user")], settings=settings))
    finally:
        await model.aclose()
    body = server.requests[0].json
    assert body["modalities"] == ["text", "audio"]
    assert body["audio"] == {"voice": "coral", "format": "mp3"}


def test_incomplete_audio_request_is_a_usage_error() -> None:
    model = OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9/v1", stream=False)
    with pytest.raises(UsageError, match="audio="):
        model.format_request(request_of([Msg("user", "hi", "user")], modalities=["text", "audio"]))
    with pytest.raises(UsageError, match="modalities"):
        model.format_request(
            request_of([Msg("user", "hi", "user")], audio={"voice": "alloy", "format": "wav"})
        )


# -- streamed answers ------------------------------------------------------------------
async def test_streamed_audio(server: WireServer, transport: str) -> None:
    events, pcm = audio_chunks()
    server.script(Stream(events=events))
    model = _model(server, transport, stream=True)
    try:
        seen, final = await _last(
            model.request_stream(ModelRequest([Msg("user", "Say hello", "user")]))
        )
    finally:
        await model.aclose()
    body = server.requests[0].json
    assert body["stream"] is True and body["modalities"] == ["text", "audio"]
    # The transcript grows as text; the clip comes whole in the last chunk only.
    texts = [c.get_text() for c in seen]
    assert texts == sorted(texts, key=len) and texts[-1] == TRANSCRIPT
    assert all(b["type"] == "text" for c in seen[:-1] for b in c.content)
    text, audio = final.content
    assert text == {"type": "text", "text": TRANSCRIPT}
    assert audio["type"] == "audio" and audio["id"] == "audio_s"
    source: Any = audio["source"]
    assert source["media_type"] == "audio/pcm"  # raw pcm16 has no header
    assert base64.b64decode(source["data"]) == pcm
    assert audio["transcript"] == TRANSCRIPT
    assert audio["expires_at"] > time.time()
    assert final.usage is not None and final.usage.output_tokens == 30


# -- replay ----------------------------------------------------------------------------
async def test_multi_turn_replays_audio_by_id(server: WireServer, transport: str) -> None:
    server.script(
        Reply(json=audio_completion("audio_1")),
        Reply(json=audio_completion("audio_2")),
        Reply(json=openai_completion(text="done")),
    )
    model = _model(server, transport)
    history = [Msg("user", "Say hello", "user")]
    try:
        for follow_up in ("Again", "Thanks"):
            response = await model.request(ModelRequest(history))
            history += [Msg("a", response.content, "assistant"), Msg("user", follow_up, "user")]
        await model.request(ModelRequest(history))
    finally:
        await model.aclose()
    assert server.requests[2].json["messages"] == [
        {"role": "user", "content": "Say hello"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
        {"role": "user", "content": "Again"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_2"}},
        {"role": "user", "content": "Thanks"},
    ]


async def test_expired_audio_is_replayed_as_transcript(server: WireServer, transport: str) -> None:
    server.script(
        Reply(json=audio_completion("old", expires_at=int(time.time()) - 5)),
        Reply(json=openai_completion(text="ok")),
    )
    model = _model(server, transport)
    history = [Msg("user", "Say hello", "user")]
    try:
        response = await model.request(ModelRequest(history))
        history += [Msg("a", response.content, "assistant"), Msg("user", "More", "user")]
        await model.request(ModelRequest(history))
    finally:
        await model.aclose()
    assert server.requests[1].json["messages"][1] == {"role": "assistant", "content": TRANSCRIPT}


def test_cached_wire_form_changes_when_the_id_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    expires = 1_000_000
    content = audio_completion("a1", expires_at=expires)
    response = oai.parse_completion(content, 0.0)
    msg = Msg("a", response.content, "assistant")
    clock = [expires - EXPIRY_MARGIN - 10.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    assert oai.format_messages([msg]) == [
        {"role": "assistant", "content": None, "audio": {"id": "a1"}}
    ]
    clock[0] = expires - EXPIRY_MARGIN + 1.0  # too close to expiry to be replayed
    assert oai.format_messages([msg]) == [{"role": "assistant", "content": TRANSCRIPT}]
    assert oai.format_messages([msg]) == oai.format_messages_uncached([msg])


def test_audio_with_tool_calls_and_extra_text() -> None:
    """A clip replayed by id next to text of its own and a tool call."""
    block = oai.parse_completion(audio_completion("a9"), 0.0).content[1]
    msg = Msg(
        "a",
        [
            {"type": "text", "text": "Note."},
            block,
            {"type": "text", "text": TRANSCRIPT},
            {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
        ],
        "assistant",
    )
    wire = oai.format_messages_uncached([msg])
    assert wire[0]["content"] == "Note."
    assert wire[0]["audio"] == {"id": "a9"}
    assert wire[0]["tool_calls"][0]["id"] == "c1"  # type: ignore[index]


# -- JSON round trip, other providers, agent, serve, console ---------------------------
def test_message_with_audio_round_trips_through_json() -> None:
    response = oai.parse_completion(audio_completion("a1"), 0.0)
    msg = Msg("a", response.content, "assistant")
    again = Msg.from_dict(json.loads(json.dumps(msg.to_dict())))
    assert again.to_dict() == msg.to_dict()
    assert again.content == msg.content
    assert oai.format_messages_uncached([again]) == oai.format_messages_uncached([msg])


def test_sniffed_formats() -> None:
    assert sniff_audio_type(WAV) == "audio/wav"
    assert sniff_audio_type(b"ID3\x04rest") == "audio/mpeg"
    assert sniff_audio_type(b"\xff\xfb\x90\x00") == "audio/mpeg"
    assert sniff_audio_type(b"\xff\xf1\x50\x80") == "audio/aac"
    assert sniff_audio_type(b"fLaC\x00") == "audio/flac"
    assert sniff_audio_type(b"OggS\x00") == "audio/ogg"
    assert sniff_audio_type(b"\x01\x02\x03") == "audio/pcm"


@pytest.mark.parametrize("where", ["generate_kwargs", "settings"])
@pytest.mark.parametrize("cls", [OpenAIResponsesModel, AnthropicChatModel])
async def test_apis_without_audio_output_refuse_it(
    server: WireServer, cls: type[Any], where: str
) -> None:
    url = server.openai_url if cls is OpenAIResponsesModel else server.url
    opts = AUDIO_OPTS if where == "generate_kwargs" else None
    model = cls("m", api_key="k", base_url=url, stream=False, retry=FAST, generate_kwargs=opts)
    settings: ModelSettings = {}
    if where == "settings":
        settings = {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}
    try:
        with pytest.raises(UnsupportedContentError, match="no audio output"):
            await model.request(ModelRequest([Msg("user", "hi", "user")], settings=settings))
    finally:
        await model.aclose()
    assert server.requests == []  # refused before anything was sent


def test_other_providers_replay_the_transcript_only() -> None:
    response = oai.parse_completion(audio_completion("a1"), 0.0)
    history = [Msg("user", "hi", "user"), Msg("a", response.content, "assistant")]
    _, turns = anth.format_messages(history)
    assert turns[1] == {"role": "assistant", "content": [{"type": "text", "text": TRANSCRIPT}]}
    items = rsp.format_input(history)
    assert json.dumps(items[1]).count(TRANSCRIPT) == 1
    assert "audio" not in json.dumps(items[1])


async def test_agent_replays_and_serve_and_console_show_the_transcript(
    server: WireServer, transport: str
) -> None:
    events, _ = audio_chunks()
    server.script(Stream(events=events), Stream(events=audio_chunks("audio_t")[0]))
    model = _model(server, transport, stream=True)
    agent = ReActAgent("voice", "You speak.", model)
    out = io.StringIO()
    agent.add_event_listener(EventRenderer("voice", out))
    try:
        reply = await agent(Msg("user", "Say hello", "user"))
        await agent(Msg("user", "Again", "user"))
    finally:
        await model.aclose()
    # The agent's memory replays the first spoken answer by id.
    assert server.requests[1].json["messages"][2:] == [
        {"role": "assistant", "content": None, "audio": {"id": "audio_s"}},
        {"role": "user", "content": "Again"},
    ]
    assert reply.get_text() == TRANSCRIPT
    assert any(b["type"] == "audio" for b in reply.get_content_blocks())
    assert TRANSCRIPT in out.getvalue()
    assistant = [
        m for m in to_agui_messages(await agent.memory.get_memory()) if m.role == "assistant"
    ]
    assert assistant[-1].content == TRANSCRIPT


@given(
    transcript=st.text(),
    ident=st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    expires=st.one_of(st.none(), st.integers(min_value=0, max_value=2**40)),
    data=st.binary(max_size=64),
)
def test_audio_output_blocks_round_trip(
    transcript: str, ident: str | None, expires: int | None, data: bytes
) -> None:
    audio: dict[str, Any] = {"data": base64.b64encode(data).decode(), "transcript": transcript}
    if ident is not None:
        audio["id"] = ident
    if expires is not None:
        audio["expires_at"] = expires
    body = openai_completion(text=None)
    body["choices"][0]["message"]["audio"] = audio
    msg = Msg("a", oai.parse_completion(body, 0.0).content, "assistant")
    again = Msg.from_dict(json.loads(json.dumps(msg.to_dict())))
    assert again.to_dict() == msg.to_dict()
    assert oai.format_messages_uncached([again]) == oai.format_messages_uncached([msg])

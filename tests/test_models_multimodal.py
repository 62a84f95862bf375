"""Images, audio and documents: blocks, helpers, per-provider mapping, tools that return them."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _model_calls import ask
from _wire_server import (
    Reply,
    WireServer,
    anthropic_message,
    openai_completion,
    responses_body,
    responses_call,
    responses_message,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import ReActAgent, Toolkit
from agentkit.exceptions import MessageValidationError, UnsupportedContentError
from agentkit.mcp._convert import content_to_blocks
from agentkit.messages import (
    Msg,
    audio_block,
    document_block,
    file_block,
    image_block,
    validate_block,
)
from agentkit.models import (
    AnthropicChatModel,
    ChatModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
)
from agentkit.models import _anthropic_format as anth
from agentkit.models import _openai_format as oai
from agentkit.models import _responses_format as rsp
from agentkit.tools import ToolResponse


def _png() -> bytes:
    """A real 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


PNG = _png()
PNG64 = base64.b64encode(PNG).decode()
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PDF64 = base64.b64encode(PDF).decode()
DOC = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
    "title": "Spec",
}
WAV = {"type": "audio", "source": {"type": "base64", "media_type": "audio/wav", "data": "UklG"}}
FAST = RetryPolicy(max_retries=0)


# -- blocks: JSON round trip ---------------------------------------------------------------
sources = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("base64"),
            "media_type": st.sampled_from(["image/png", "audio/wav", "application/pdf"]),
            "data": st.text(),
        }
    ),
    st.fixed_dictionaries({"type": st.just("url"), "url": st.text()}),
)
media = st.fixed_dictionaries(
    {"type": st.sampled_from(["image", "audio", "document"]), "source": sources},
    optional={
        "title": st.text(),
        "filename": st.text(),
        "cache_control": st.just({"type": "ephemeral"}),
    },
)
results = st.fixed_dictionaries(
    {
        "type": st.just("tool_result"),
        "id": st.text(min_size=1, max_size=8),
        "name": st.text(min_size=1, max_size=8),
        "output": st.lists(
            media | st.fixed_dictionaries({"type": st.just("text"), "text": st.text()}), max_size=3
        ),
    }
)


json_leaf = st.none() | st.booleans() | st.integers() | st.text()
json_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)
provider_items = st.fixed_dictionaries(
    {
        "type": st.just("provider_item"),
        "provider": st.sampled_from(["anthropic", "openai-responses"]),
        "item": st.dictionaries(st.text(), json_values, max_size=4),
    }
)
thinking_items = st.fixed_dictionaries(
    {"type": st.just("thinking"), "thinking": st.text()},
    optional={
        "reasoning_id": st.text(min_size=1),
        "encrypted_content": st.text(),
        "summary": st.lists(st.text(), max_size=3),
        "signature": st.text(),
    },
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(media | results | provider_items | thinking_items, min_size=1, max_size=4),
    st.sampled_from(["user", "assistant"]),
)
def test_media_blocks_round_trip_through_json(content: list[Any], role: Any) -> None:
    msg = Msg("n", content, role)
    back = Msg.from_dict(json.loads(json.dumps(msg.to_dict())))
    assert back == msg
    assert back.content == content


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "document"}, "source"),
        ({"type": "document", "source": {"type": "base64", "data": "x"}}, "media_type"),
        ({"type": "document", "source": {"type": "file", "path": "/x"}}, "type"),
    ],
)
def test_malformed_document_blocks_name_the_field(block: dict[str, Any], field: str) -> None:
    with pytest.raises(MessageValidationError, match=field):
        validate_block(block)


# -- helpers -------------------------------------------------------------------------------
def test_file_helpers(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "spec.pdf").write_bytes(PDF)
    (tmp_path / "voice.wav").write_bytes(b"RIFF0000WAVE")
    image = image_block(tmp_path / "shot.png")
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
    }
    assert image_block("https://x.test/a.png") == {
        "type": "image",
        "source": {"type": "url", "url": "https://x.test/a.png"},
    }
    assert image_block(PNG, "image/png") == image
    document = document_block(str(tmp_path / "spec.pdf"), title="The spec")
    assert document == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
        "filename": "spec.pdf",
        "title": "The spec",
    }
    untitled = {k: v for k, v in document.items() if k != "title"}
    assert file_block(tmp_path / "spec.pdf") == untitled
    assert file_block(tmp_path / "voice.wav")["type"] == "audio"
    assert file_block(tmp_path / "shot.png") == image
    assert audio_block(b"RIFF", "audio/wav")["source"]["media_type"] == "audio/wav"  # type: ignore[typeddict-item]
    with pytest.raises(MessageValidationError, match="media_type"):
        image_block(b"raw")
    with pytest.raises(MessageValidationError, match="cannot guess"):
        file_block(tmp_path / "noext")
    Msg("u", [image, document], "user")  # valid message content


# -- per provider mapping ------------------------------------------------------------------
def test_document_in_a_user_message_per_provider() -> None:
    msgs = [Msg("u", [{"type": "text", "text": "Summarize"}, DOC], "user")]  # type: ignore[list-item]
    assert oai.format_messages(msgs)[0]["content"][1] == {
        "type": "file",
        "file": {"filename": "Spec", "file_data": f"data:application/pdf;base64,{PDF64}"},
    }
    assert rsp.format_input(msgs)[0]["content"][1] == {
        "type": "input_file",
        "filename": "Spec",
        "file_data": f"data:application/pdf;base64,{PDF64}",
    }
    _, turns = anth.format_messages(msgs)
    assert turns[0]["content"][1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
        "title": "Spec",
    }
    by_url = [
        Msg(
            "u", [{"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}], "user"
        )
    ]
    assert rsp.format_input(by_url)[0]["content"][0] == {
        "type": "input_file",
        "file_url": "https://x/a.pdf",
    }
    assert anth.format_messages(by_url)[1][0]["content"][0]["source"] == {
        "type": "url",
        "url": "https://x/a.pdf",
    }
    # Sent as a file part with the URL (OpenRouter takes it; OpenAI answers 400 itself).
    assert oai.format_messages(by_url)[0]["content"][0] == {
        "type": "file",
        "file": {"filename": "document.pdf", "file_data": "https://x/a.pdf"},
    }


def test_audio_per_provider() -> None:
    msgs = [Msg("u", [WAV], "user")]  # type: ignore[list-item]
    audio = {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}
    assert oai.format_messages(msgs)[0]["content"] == [audio]
    assert rsp.format_input(msgs)[0]["content"] == [audio]
    with pytest.raises(UnsupportedContentError, match="Anthropic does not accept audio"):
        anth.format_messages(msgs)
    url_audio = [
        Msg("u", [{"type": "audio", "source": {"type": "url", "url": "https://x/a.wav"}}], "user")
    ]
    with pytest.raises(UnsupportedContentError, match="audio by URL"):
        oai.format_messages(url_audio)
    with pytest.raises(UnsupportedContentError, match="audio by URL"):
        rsp.format_input(url_audio)
    in_result = [
        Msg("u", [{"type": "tool_result", "id": "c", "name": "rec", "output": [WAV]}], "user")
    ]
    with pytest.raises(UnsupportedContentError, match="audio blocks in a tool result"):
        rsp.format_input(in_result)
    with pytest.raises(UnsupportedContentError, match="in a tool result"):
        anth.format_messages(in_result)


def test_image_in_an_assistant_turn_is_refused_by_responses() -> None:
    msgs = [
        Msg(
            "a",
            [{"type": "image", "source": {"type": "url", "url": "https://x/i.png"}}],
            "assistant",
        )
    ]
    with pytest.raises(UnsupportedContentError, match="image blocks in an assistant message"):
        rsp.format_input(msgs)


async def test_unsupported_content_is_refused_before_sending() -> None:
    async with WireServer() as server:
        model = AnthropicChatModel("c", api_key="k", base_url=server.anthropic_url, stream=False)
        with pytest.raises(UnsupportedContentError):
            await ask(model, [Msg("u", [WAV], "user")])  # type: ignore[list-item]
        await model.aclose()
        assert server.requests == []


def test_mcp_embedded_pdf_and_image_become_blocks() -> None:
    import mcp_types as t

    pdf = t.EmbeddedResource(
        type="resource",
        resource=t.BlobResourceContents(
            uri="file:///docs/spec.pdf", mime_type="application/pdf", blob=PDF64
        ),
    )
    image = t.ImageContent(type="image", data=PNG64, mime_type="image/png")
    audio = t.AudioContent(type="audio", data="UklG", mime_type="audio/wav")
    blocks = content_to_blocks([pdf, image, audio])
    assert blocks == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
            "filename": "spec.pdf",
        },
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}},
        {"type": "audio", "source": {"type": "base64", "media_type": "audio/wav", "data": "UklG"}},
    ]


# -- a tool returning an image, end to end through each adapter ----------------------------
def _toolkit() -> Toolkit:
    toolkit = Toolkit()

    def screenshot() -> bytes:
        """Take a screenshot of the page."""
        return PNG

    def report() -> ToolResponse:
        """Fetch the report as a PDF, with a caption."""
        return ToolResponse(content=[{"type": "text", "text": "Q3 report"}, DOC])  # type: ignore[list-item]

    toolkit.register_tool_function(screenshot)
    toolkit.register_tool_function(report)
    return toolkit


async def _run(
    make: Callable[[WireServer], ChatModel], first: Reply, last: Reply
) -> dict[str, Any]:
    async with WireServer() as server:
        server.script(first, last)
        model = make(server)
        agent = ReActAgent("bot", "sys", model, _toolkit(), print_hint=False)
        reply = await agent("look")
        await model.aclose()
        assert reply.get_text() == "seen"
        return server.requests[1].json  # type: ignore[no-any-return]


IMAGE_DATA_URL = f"data:image/png;base64,{PNG64}"


async def test_tool_image_reaches_openai_chat_as_a_follow_up_user_message() -> None:
    body = await _run(
        lambda s: OpenAIChatModel(
            "g", api_key="k", base_url=s.openai_url, stream=False, retry=FAST
        ),
        Reply(json=openai_completion(tool_calls=[("c1", "screenshot", "{}")])),
        Reply(json=openai_completion(text="seen")),
    )
    assert body["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images returned by tool 'screenshot' (call c1):"},
                {"type": "image_url", "image_url": {"url": IMAGE_DATA_URL}},
            ],
        },
    ]


async def test_tool_image_reaches_responses_inside_the_function_call_output() -> None:
    body = await _run(
        lambda s: OpenAIResponsesModel(
            "g", api_key="k", base_url=s.openai_url, stream=False, retry=FAST
        ),
        Reply(json=responses_body([responses_call("c1", "screenshot", "{}")])),
        Reply(json=responses_body([responses_message("seen")])),
    )
    assert body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_image", "image_url": IMAGE_DATA_URL, "detail": "auto"}],
    }


async def test_tool_image_reaches_anthropic_inside_the_tool_result() -> None:
    body = await _run(
        lambda s: AnthropicChatModel(
            "c", api_key="k", base_url=s.anthropic_url, stream=False, retry=FAST
        ),
        Reply(
            json=anthropic_message(
                [{"type": "tool_use", "id": "c1", "name": "screenshot", "input": {}}]
            )
        ),
        Reply(json=anthropic_message([{"type": "text", "text": "seen"}])),
    )
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                    }
                ],
            }
        ],
    }


async def test_tool_pdf_reaches_each_provider() -> None:
    chat = await _run(
        lambda s: OpenAIChatModel(
            "g", api_key="k", base_url=s.openai_url, stream=False, retry=FAST
        ),
        Reply(json=openai_completion(tool_calls=[("c1", "report", "{}")])),
        Reply(json=openai_completion(text="seen")),
    )
    assert chat["messages"][-2]["content"] == "Q3 report"
    assert chat["messages"][-1]["content"][1] == {
        "type": "file",
        "file": {"filename": "Spec", "file_data": f"data:application/pdf;base64,{PDF64}"},
    }
    responses = await _run(
        lambda s: OpenAIResponsesModel(
            "g", api_key="k", base_url=s.openai_url, stream=False, retry=FAST
        ),
        Reply(json=responses_body([responses_call("c1", "report", "{}")])),
        Reply(json=responses_body([responses_message("seen")])),
    )
    assert responses["input"][-1]["output"] == [
        {"type": "input_text", "text": "Q3 report"},
        {
            "type": "input_file",
            "filename": "Spec",
            "file_data": f"data:application/pdf;base64,{PDF64}",
        },
    ]
    claude = await _run(
        lambda s: AnthropicChatModel(
            "c", api_key="k", base_url=s.anthropic_url, stream=False, retry=FAST
        ),
        Reply(
            json=anthropic_message(
                [{"type": "tool_use", "id": "c1", "name": "report", "input": {}}]
            )
        ),
        Reply(json=anthropic_message([{"type": "text", "text": "seen"}])),
    )
    assert claude["messages"][-1]["content"][0]["content"] == [
        {"type": "text", "text": "Q3 report"},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
            "title": "Spec",
        },
    ]


def test_image_in_a_user_message_per_provider() -> None:
    url_image = {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}}
    inline = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
    }
    msgs = [Msg("u", [{"type": "text", "text": "What is this?"}, url_image, inline], "user")]  # type: ignore[list-item]
    assert oai.format_messages(msgs)[0]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}},
        {"type": "image_url", "image_url": {"url": IMAGE_DATA_URL}},
    ]
    assert rsp.format_input(msgs)[0]["content"][1:] == [
        {"type": "input_image", "image_url": "https://x.test/i.png", "detail": "auto"},
        {"type": "input_image", "image_url": IMAGE_DATA_URL, "detail": "auto"},
    ]
    assert anth.format_messages(msgs)[1][0]["content"][1:] == [
        {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}},
    ]

"""The Chat Completions wire cache under edits deep inside a message or a request body.

``tests/test_models_wire_cache.py`` covers edits of a message's blocks; these edit values
nested inside the blocks (a tool call's input, a tool result's output list, an image's
source) after the message was encoded, and values nested inside a returned body: every
request must still equal a fresh encoding, and one caller's body edits must never reach a
later request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _model_calls import ask

from agentkit.messages import Msg
from agentkit.models import _openai_format as oai
from agentkit.models._http import dumps
from agentkit.testing import text, tool_use
from tests._wire_server import Reply, WireServer, openai_completion


def conversation() -> list[Msg]:
    img = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    result = {"type": "tool_result", "id": "c1", "name": "step", "output": [text("r1")]}
    return [
        Msg("user", "Hi", "user"),
        Msg("bot", [text("Checking."), tool_use("step", "c1", i=1, opts={"n": 1})], "assistant"),
        Msg("bot", [result], "user"),
        Msg("user", [text("Look:"), img], "user"),
    ]


def _set_input(m: list[Msg]) -> None:
    m[1].content[1]["input"]["i"] = 2


def _set_nested_input(m: list[Msg]) -> None:
    m[1].content[1]["input"]["opts"]["n"] = 2


def _append_output(m: list[Msg]) -> None:
    m[2].content[0]["output"].append(text("r2"))  # type: ignore[index, union-attr]


def _edit_output(m: list[Msg]) -> None:
    m[2].content[0]["output"][0]["text"] = "R1"


def _edit_image(m: list[Msg]) -> None:
    m[3].content[1]["source"]["url"] = "https://example.com/b.png"


EDITS: dict[str, Callable[[list[Msg]], None]] = {
    "tool input value": _set_input,
    "tool input nested value": _set_nested_input,
    "tool result output appended": _append_output,
    "tool result output text": _edit_output,
    "image source": _edit_image,
}


def body(messages: list[Msg], *, cached: bool) -> bytes:
    fmt = oai.format_messages if cached else oai.format_messages_uncached
    request = {"model": "m", "messages": fmt(messages)}
    return oai.encode_body(request) if cached else dumps(request)


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_inside_a_block_after_encoding_is_sent(edit: str) -> None:
    msgs = conversation()
    before = body(msgs, cached=True)  # encoded and its JSON fragments made
    EDITS[edit](msgs)
    after = body(msgs, cached=True)
    assert after == body(msgs, cached=False)
    assert after != before


def test_an_edit_inside_a_returned_body_does_not_reach_later_requests() -> None:
    msgs = conversation()
    fresh = body(msgs, cached=False)
    first = oai.format_messages(msgs)
    oai.encode_body({"model": "m", "messages": first})
    first[1]["tool_calls"][0]["function"]["name"] = "tampered"  # type: ignore[index]
    first[3]["content"][0]["text"] = "tampered"  # type: ignore[index]
    first[3]["content"][1]["image_url"]["url"] = "tampered"  # type: ignore[index]
    assert body(msgs, cached=True) == fresh
    assert oai.format_messages(msgs) == oai.format_messages_uncached(msgs)


def test_an_edit_inside_a_body_is_sent_as_it_is() -> None:
    msgs = conversation()
    oai.encode_body({"model": "m", "messages": oai.format_messages(msgs)})  # fragments made
    request: dict[str, Any] = {"model": "m", "messages": oai.format_messages(msgs)}
    request["messages"][3]["content"][0]["text"] = "redacted"
    request["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{}"
    assert oai.encode_body(request) == dumps(request)


async def test_the_server_receives_the_edited_history() -> None:
    from agentkit.models._openai import OpenAIChatModel

    async with WireServer() as server:
        server.script(Reply(json=openai_completion(text="a")), Reply(json=openai_completion("b")))
        model = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False)
        msgs = conversation()
        await ask(model, msgs)
        _append_output(msgs)
        _set_input(msgs)
        await ask(model, msgs)
        await model.aclose()
        sent: Any = server.requests[1].json
        assert sent["messages"] == oai.format_messages_uncached(msgs)
        assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == (
            '{"i": 2, "opts": {"n": 1}}'
        )

"""The per-message cache of Chat Completions wire forms: same bytes as without it, and a
changed message is encoded again."""

from __future__ import annotations

from typing import Any

from _model_calls import request_of

from agentkit.messages import Msg
from agentkit.models import _openai_format as oai
from agentkit.models._http import dumps
from agentkit.testing import text, thinking, tool_use


def conversation() -> list[Msg]:
    img = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    return [
        Msg("system", "Be brief.", "system"),
        Msg("user", "Hi", "user"),
        Msg("bot", [thinking("hmm"), text("Checking."), tool_use("step", "c1", i=1)], "assistant"),
        Msg("bot", [{"type": "tool_result", "id": "c1", "name": "step", "output": "ok ü"}], "user"),
        Msg("user", [text("Look:"), img], "user"),
        Msg("bot", "", "assistant"),
        Msg("bot", "Done.", "assistant"),
    ]


def body(messages: list[Msg], *, cached: bool, reasoning: bool = False) -> bytes:
    fmt = oai.format_messages if cached else oai.format_messages_uncached
    return dumps({"model": "m", "messages": fmt(messages, reasoning=reasoning)})


def test_bodies_are_byte_identical_with_and_without_the_cache() -> None:
    msgs = conversation()
    for _ in range(3):  # the first call fills the cache, the next ones hit it
        for reasoning in (False, True):
            assert body(msgs, cached=True, reasoning=reasoning) == body(
                msgs, cached=False, reasoning=reasoning
            )
    assert b"reasoning_content" in body(msgs, cached=True, reasoning=True)
    assert b"reasoning_content" not in body(msgs, cached=True)


def test_a_hit_returns_the_cached_form_without_converting_again(monkeypatch: Any) -> None:
    msgs = conversation()
    oai.format_messages(msgs)
    converted: list[str] = []
    original = oai._format_one

    def counting(msg: Msg, reasoning: bool) -> list[dict[str, Any]]:
        converted.append(msg.id)
        return original(msg, reasoning)

    monkeypatch.setattr(oai, "_format_one", counting)
    new = Msg("user", "next", "user")
    oai.format_messages([*msgs, new])
    assert converted == [new.id]  # only the new message


def test_changed_messages_are_encoded_again() -> None:
    msgs = conversation()
    oai.format_messages(msgs)
    msgs[1].content = "Hello"  # content replaced
    msgs[2].content.append(tool_use("step", "c2", i=2))  # a block added in place
    msgs[3].content[0]["output"] = "changed"  # a block's value replaced
    msgs[4].content[0] = text("Watch:")  # a block replaced
    msgs[6].role = "user"  # role changed
    assert body(msgs, cached=True) == body(msgs, cached=False)
    wire = oai.format_messages(msgs)
    assert wire[1]["content"] == "Hello"
    assert [c["id"] for c in wire[2]["tool_calls"]] == ["c1", "c2"]
    assert wire[3]["content"] == "changed"
    assert wire[4]["content"][0]["text"] == "Watch:"


def test_a_copy_with_the_same_id_is_encoded_on_its_own() -> None:
    original = Msg("user", "first", "user")
    oai.format_messages([original])
    copy = Msg("user", "second", "user", id=original.id)
    assert oai.format_messages([copy])[0]["content"] == "second"
    assert oai.format_messages([original])[0]["content"] == "first"


def test_changing_the_returned_dicts_does_not_change_the_cache() -> None:
    msgs = conversation()
    first = oai.format_messages(msgs)
    first[1]["content"] = "tampered"
    first[1]["cache_control"] = {"type": "ephemeral"}
    assert body(msgs, cached=True) == body(msgs, cached=False)


def test_the_cache_is_bounded() -> None:
    cache = oai._WireCache(max_entries=3)
    msgs = [Msg("user", str(i), "user") for i in range(5)]
    for m in msgs:
        cache.put(m, False, [{"role": "user", "content": m.content}])
    assert len(cache.entries) == 3
    assert cache.get(msgs[0], False) is None
    entry = cache.get(msgs[4], False)
    assert entry is not None and entry == [{"role": "user", "content": "4"}]
    assert cache.get(msgs[4], True) is None  # another reasoning setting


def request_body(messages: list[Msg]) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": oai.format_messages(messages),
        "tools": [{"type": "function", "function": {"name": "step", "parameters": {}}}],
        "temperature": 0.5,
    }


def test_encoded_bodies_are_byte_identical_to_dumps() -> None:
    msgs = conversation()
    msgs.append(Msg("user", "text with the placeholder \x00agentkit:messages\x00 in it", "user"))
    for turn in range(3):  # fragments are built on the first encoding, reused after
        body = request_body(msgs)
        assert oai.encode_body(body) == dumps(body)
        msgs.append(Msg("user", f"turn {turn} ü", "user"))
    assert oai.encode_body({"model": "m", "messages": oai.format_messages([])}) == dumps(
        {"model": "m", "messages": []}
    )


def test_a_changed_body_is_encoded_as_it_is() -> None:
    msgs = conversation()
    oai.encode_body(request_body(msgs))  # fill the fragments
    changes = [
        lambda m: m.__setitem__(1, {"role": "user", "content": "replaced"}),
        lambda m: m.append({"role": "user", "content": "added"}),
        lambda m: m.pop(),
        lambda m: m[2].__setitem__("content", "edited"),
        lambda m: m[1].__setitem__("name", "alice"),
    ]
    for change in changes:
        body = request_body(msgs)
        change(body["messages"])
        assert oai.encode_body(body) == dumps(body)
    body = request_body(msgs)
    body["messages"] = list(body["messages"])  # a plain list: encoded in full
    assert oai.encode_body(body) == dumps(body)


async def test_the_model_sends_the_encoded_body() -> None:
    from agentkit.models._openai import OpenAIChatModel

    model = OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    body = model.format_request(request_of(conversation(), None))
    assert model.encode_body(body) == dumps(body)
    await model.aclose()

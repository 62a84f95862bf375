"""Blocks are converted by type wherever they are stored (issue 13, item 12).

AgentScope stores tool results in ``role="system"`` messages; an AgentScope migrant's saved
history holds them. Every adapter must send each block by its type, whatever the role of
the message holding it: a tool call is always answered, text and images are never dropped.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agentkit.messages import Msg, Role
from agentkit.models import _anthropic_format as anth
from agentkit.models import _openai_format as oai

ROLES: tuple[Role, ...] = ("user", "assistant", "system")
IMAGE = {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.png"}}


def _conversation(call_role: Role, result_role: Role) -> list[Msg]:
    return [
        Msg("s", "rules", "system"),
        Msg("u", "question", "user"),
        Msg("a", [{"type": "tool_use", "id": "c1", "name": "t", "input": {"x": 1}}], call_role),
        Msg("t", [{"type": "tool_result", "id": "c1", "name": "t", "output": "42"}], result_role),
        Msg("u", "thanks", "user"),
    ]


def _check_openai_pairing(wire: list[dict[str, Any]]) -> None:
    """Every tool call is answered right after its assistant message, and nothing is empty."""
    for i, message in enumerate(wire):
        assert message.get("content") or message.get("tool_calls"), message
        calls = [c["id"] for c in message.get("tool_calls") or ()]
        if calls:
            assert message["role"] == "assistant"
            answers = [m["tool_call_id"] for m in wire[i + 1 : i + 1 + len(calls)]]
            assert answers == calls, wire
        if message["role"] == "tool":
            previous = [m for m in wire[:i] if m["role"] != "tool"][-1]
            assert message["tool_call_id"] in [c["id"] for c in previous["tool_calls"]]


def _check_anthropic_pairing(turns: list[dict[str, Any]]) -> None:
    for i, turn in enumerate(turns):
        kinds = [b["type"] for b in turn["content"]]
        assert turn["content"], turn
        if turn["role"] == "user":
            assert "tool_use" not in kinds
        else:
            assert "tool_result" not in kinds
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if uses:
            answered = [
                b["tool_use_id"] for b in turns[i + 1]["content"] if b["type"] == "tool_result"
            ]
            assert answered == uses
        if i:
            assert turns[i - 1]["role"] != turn["role"]  # roles alternate


@pytest.mark.parametrize(("call_role", "result_role"), list(itertools.product(ROLES, ROLES)))
def test_openai_answers_every_call_whatever_the_roles(call_role: Role, result_role: Role) -> None:
    wire = oai.format_messages(_conversation(call_role, result_role))
    _check_openai_pairing(wire)
    assert [m["content"] for m in wire if m["role"] == "tool"] == ["42"]
    assert [c["id"] for m in wire for c in m.get("tool_calls") or ()] == ["c1"]


@pytest.mark.parametrize(("call_role", "result_role"), list(itertools.product(ROLES, ROLES)))
def test_anthropic_answers_every_call_whatever_the_roles(
    call_role: Role, result_role: Role
) -> None:
    system, turns = anth.format_messages(_conversation(call_role, result_role))
    assert system == [{"type": "text", "text": "rules"}]
    _check_anthropic_pairing(turns)
    results = [b for t in turns for b in t["content"] if b["type"] == "tool_result"]
    assert [r["content"] for r in results] == ["42"]


def test_agentscope_system_tool_result_is_sent_as_a_tool_message() -> None:
    """The reported case: ``{"role": "system", "content": ""}`` left the call unanswered."""
    wire = oai.format_messages(_conversation("assistant", "system"))
    assert {"role": "tool", "tool_call_id": "c1", "content": "42"} in wire
    assert {"role": "system", "content": ""} not in wire


@pytest.mark.parametrize("role", ROLES)
def test_text_and_images_are_kept_in_every_role(role: Role) -> None:
    msgs = [
        Msg("u", "question", "user"),
        Msg("x", [{"type": "text", "text": "note"}, IMAGE], role),  # type: ignore[list-item]
        Msg("u", "more", "user"),
    ]
    wire = oai.format_messages(msgs)
    _check_openai_pairing(wire)
    texts = [m["content"] for m in wire if isinstance(m["content"], str)]
    parts = [p for m in wire if isinstance(m["content"], list) for p in m["content"]]
    assert "note" in texts or {"type": "text", "text": "note"} in parts
    assert {"type": "image_url", "image_url": {"url": IMAGE["source"]["url"]}} in parts
    assert next(m for m in wire if "note" in str(m["content"]))["role"] == role
    _, turns = anth.format_messages(msgs)
    blocks = [b for t in turns for b in t["content"]]
    assert {"type": "text", "text": "note"} in blocks
    images = [(t["role"], b) for t in turns for b in t["content"] if b["type"] == "image"]
    assert [r for r, _ in images] == ["user"]


@pytest.mark.parametrize("role", ROLES)
def test_thinking_goes_only_where_the_provider_takes_it(role: Role) -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    msgs = [
        Msg("u", "question", "user"),
        Msg("x", [thinking, {"type": "text", "text": "answer"}], role),  # type: ignore[list-item]
        Msg("u", "more", "user"),
    ]
    wire = oai.format_messages(msgs, reasoning=True)
    _check_openai_pairing(wire)
    reasoning = [m.get("reasoning_content") for m in wire if m.get("reasoning_content")]
    assert reasoning == (["hmm"] if role == "assistant" else [])
    _, turns = anth.format_messages(msgs)
    _check_anthropic_pairing(turns)
    sent = [b for t in turns for b in t["content"] if b["type"] == "thinking"]
    assert len(sent) == (1 if role == "assistant" else 0)


@pytest.mark.parametrize("role", ROLES)
def test_a_message_holding_call_and_result_together(role: Role) -> None:
    msgs = [
        Msg("u", "question", "user"),
        Msg(
            "x",
            [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "c1", "name": "t", "input": {}},
                {"type": "tool_result", "id": "c1", "name": "t", "output": "ok"},
            ],
            role,
        ),
        Msg("u", "more", "user"),
    ]
    _check_openai_pairing(oai.format_messages(msgs))
    _, turns = anth.format_messages(msgs)
    _check_anthropic_pairing(turns)

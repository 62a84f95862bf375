"""The per-token fast paths of a streamed answer agree with the general ones.

``OpenAIStreamState.feed`` takes a chunk whose one choice carries nothing but a text piece
without walking it; a delta with one more (null) field goes the general way. Both must give
the same snapshots, whatever comes after the plain text (reasoning, tool calls, a finish).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentkit.events import TextDelta, ThinkingDelta
from agentkit.models import ChatResponse
from agentkit.models._openai_format import OpenAIStreamState
from agentkit.testing import ScriptedModel
from tests._agent_helpers import agent_for


def _chunk(delta: dict[str, Any], **choice: Any) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": delta, **choice}]}


SEQUENCES: list[list[dict[str, Any]]] = [
    [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Hel"}),
     _chunk({"content": "lo"}), _chunk({}, finish_reason="stop")],
    [_chunk({"content": "a"}), _chunk({"reasoning_content": "hmm"}), _chunk({"content": "b"})],
    [_chunk({"content": "see "}), _chunk({"content": ""}),
     _chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f"}}]}),
     _chunk({"content": "more"}, finish_reason="tool_calls")],
    [_chunk({"content": "x"}, index=1), _chunk({"content": "y"}, index=None),
     _chunk({"content": "z"})],
    [_chunk({"content": "\ud83d"}), _chunk({"content": "\ude00 ok"})],
]  # fmt: skip


def _general(chunk: dict[str, Any]) -> dict[str, Any]:
    """The same chunk with a null field more in each delta: never the fast path."""
    choices = [{**c, "delta": {**c["delta"], "refusal": None}} for c in chunk["choices"]]
    return {**chunk, "choices": choices}


@pytest.mark.parametrize("chunks", SEQUENCES)
def test_plain_text_chunks_give_the_snapshots_of_the_general_path(
    chunks: list[dict[str, Any]],
) -> None:
    fast, general = OpenAIStreamState(), OpenAIStreamState()
    for chunk in chunks:
        assert fast.feed(chunk) == general.feed(_general(chunk))
        assert fast.snapshot(final=False).content == general.snapshot(final=False).content
    assert fast.finish_reason == general.finish_reason
    final, expected = fast.snapshot(final=True), general.snapshot(final=True)
    assert (final.content, final.metadata) == (expected.content, expected.metadata)


async def test_thinking_then_text_is_diffed_per_block() -> None:
    answer = ChatResponse(
        content=[
            {"type": "thinking", "thinking": "let me see"},
            {"type": "text", "text": "one two three"},
        ]
    )
    agent = agent_for(ScriptedModel([answer], stream=True))
    async with agent.stream("hi") as events:
        deltas = [e async for e in events if isinstance(e, TextDelta | ThinkingDelta)]
    thinking = "".join(e.delta for e in deltas if isinstance(e, ThinkingDelta))
    text = "".join(e.delta for e in deltas if isinstance(e, TextDelta))
    assert (thinking, text) == ("let me see", "one two three")
    assert isinstance(deltas[0], ThinkingDelta) and isinstance(deltas[-1], TextDelta)
    assert len(deltas) > 2


async def test_plain_text_streams_its_deltas_in_order() -> None:
    agent = agent_for(ScriptedModel(["one two three"], stream=True))
    async with agent.stream("hi") as events:
        deltas = [e.delta async for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == "one two three"
    assert len(deltas) >= 2

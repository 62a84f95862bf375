"""No output a generator tool yields is lost (issue 13, item 13).

``ToolResponse(content=...)`` defaults to ``is_last=True``; a generator yielding several of
them was cut after the first and the rest silently dropped. The rule now: a generator runs
to its end; every item but the last streams as progress; the final result is the last item
when it alone is marked final (the documented "end with your own final ToolResponse"),
otherwise the concatenation of everything yielded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentkit.tools import Tool, Toolkit, ToolResponse


def _block(name: str) -> Any:
    return {"type": "tool_use", "id": "c1", "name": name, "input": {}}


async def _run(toolkit: Toolkit, name: str) -> tuple[list[ToolResponse], ToolResponse]:
    progress: list[ToolResponse] = []
    final = await toolkit.execute(_block(name), on_progress=progress.append)
    assert all(not p.is_last for p in progress)
    return progress, final


def _texts(n: int) -> list[str]:
    return [f"part {i}\n" for i in range(n)]


@pytest.mark.parametrize("n", [1, 3])
async def test_async_generator_of_default_responses_keeps_every_item(n: int) -> None:
    finished: list[bool] = []

    async def stream() -> AsyncIterator[ToolResponse]:
        """Yield responses without marking them."""
        for text in _texts(n):
            yield ToolResponse.text(text)
        finished.append(True)  # the generator ran to its end

    toolkit = Toolkit()
    toolkit.register_tool_function(stream)
    progress, final = await _run(toolkit, "stream")
    assert final.get_text() == "".join(_texts(n))
    assert [p.get_text() for p in progress] == _texts(n)[:-1]
    assert finished == [True]


@pytest.mark.parametrize("n", [1, 3])
async def test_sync_generator_of_default_responses_keeps_every_item(n: int) -> None:
    def stream() -> Iterator[ToolResponse]:
        """Yield responses without marking them."""
        for text in _texts(n):
            yield ToolResponse(content=[{"type": "text", "text": text}])

    toolkit = Toolkit()
    toolkit.register_tool_function(stream)
    progress, final = await _run(toolkit, "stream")
    assert final.get_text() == "".join(_texts(n))
    assert len(progress) == n - 1


@pytest.mark.parametrize("n", [1, 3])
async def test_generator_of_plain_items_concatenates(n: int) -> None:
    async def stream() -> AsyncIterator[str]:
        """Yield strings."""
        for text in _texts(n):
            yield text

    toolkit = Toolkit()
    toolkit.register_tool_function(stream)
    progress, final = await _run(toolkit, "stream")
    assert final.get_text() == "".join(_texts(n))
    assert [p.get_text() for p in progress] == _texts(n)


async def test_progress_then_one_final_keeps_the_final_only() -> None:
    """The documented protocol is unchanged: explicit progress, then its own final."""

    def stream() -> Iterator[ToolResponse]:
        """Report progress, then the result."""
        yield ToolResponse.text("10%", is_last=False)
        yield ToolResponse.text("50%", is_last=False)
        yield ToolResponse.text("the result", metadata={"k": 1})

    toolkit = Toolkit()
    toolkit.register_tool_function(stream)
    progress, final = await _run(toolkit, "stream")
    assert final.get_text() == "the result"
    assert final.metadata == {"k": 1}
    assert [p.get_text() for p in progress] == ["10%", "50%"]


async def test_items_after_a_final_are_not_dropped() -> None:
    async def stream() -> AsyncIterator[Any]:
        """A final too early."""
        yield ToolResponse.text("a")
        yield "b"

    toolkit = Toolkit()
    toolkit.register_tool_function(stream)
    _, final = await _run(toolkit, "stream")
    assert final.get_text() == "ab"


class _TwoFinals(Tool):
    """A ``Tool`` implementation whose ``invoke`` yields two default responses."""

    def __init__(self) -> None:
        super().__init__("two", "Two.", {"type": "object", "properties": {}})

    async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
        yield ToolResponse.text("first ")
        yield ToolResponse.text("second")


async def test_tool_implementation_yielding_two_finals_keeps_both() -> None:
    toolkit = Toolkit()
    toolkit.register_tool(_TwoFinals())
    progress, final = await _run(toolkit, "two")
    assert final.get_text() == "first second"
    assert [p.get_text() for p in progress] == ["first "]

"""A tool result's text is checked once per layer that can change it, never skipped.

``ToolResponse`` cleans its text on construction; the Toolkit's final check
(``validate_block``, which cleans as it checks the shape) covers content replaced after
that, and ``ToolResponse.clean`` is not run a second time on the final chunk.
"""

from __future__ import annotations

import cProfile
import pstats

import pytest

from agentkit.testing import tool_use
from agentkit.tools import Toolkit, ToolResponse
from agentkit.tools import _response as response_module

_LONE = "bad \ud800 text"


async def _final(tk: Toolkit, name: str) -> ToolResponse:
    chunks = [c async for c in tk.call_tool_function(tool_use(name))]
    assert chunks[-1].is_last
    return chunks[-1]


def _cleaned(text: str) -> None:
    text.encode("utf-8")  # strict: no lone surrogate left
    assert text.startswith("bad ") and text.endswith(" text")


def test_constructor_cleans_text_and_copies_the_list() -> None:
    content: list = [{"type": "text", "text": _LONE}, {"type": "text", "text": "ok"}]
    response = ToolResponse(content=content, metadata={"note": _LONE})
    assert response.content is not content
    _cleaned(response.content[0]["text"])  # type: ignore[typeddict-item]
    assert content[0]["text"] == _LONE  # the caller's block is not changed
    assert response.content[1] is content[1]  # a clean block is shared, not copied
    _cleaned(response.metadata["note"])  # type: ignore[index, arg-type]


async def test_content_replaced_after_construction_is_cleaned_at_the_end() -> None:
    def replace(block: object, resp: ToolResponse) -> ToolResponse:
        resp.content = [{"type": "text", "text": _LONE}]  # after the constructor's clean
        resp.metadata = {"note": _LONE}
        return resp

    tk = Toolkit()
    tk.register_tool_function(lambda: "hi", name="t", description="T.", postprocess=replace)
    final = await _final(tk, "t")
    assert not final.is_error
    _cleaned(final.get_text())
    _cleaned(final.metadata["note"])  # type: ignore[index, arg-type]


async def test_malformed_replaced_content_is_still_refused() -> None:
    def replace(block: object, resp: ToolResponse) -> ToolResponse:
        resp.content = [{"type": "tool_use", "id": "x", "name": "n", "input": {}}]  # type: ignore[list-item]
        return resp

    tk = Toolkit()
    tk.register_tool_function(lambda: "hi", name="t", description="T.", postprocess=replace)
    final = await _final(tk, "t")
    assert final.is_error and "not a tool result block" in final.get_text()


@pytest.mark.parametrize("dirty", [False, True])
async def test_the_final_chunk_is_not_cleaned_twice(dirty: bool) -> None:
    tk = Toolkit()
    tk.register_tool_function(lambda: _LONE if dirty else "fine", name="t", description="T.")
    profile = cProfile.Profile()
    profile.enable()
    final = await _final(tk, "t")
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    cleans = sum(
        v[1]
        for (path, _, func), v in stats.items()
        if func == "clean" and path == response_module.__file__
    )
    assert cleans == 1  # the constructor's; the final check is validate_block's
    if dirty:
        _cleaned(final.get_text())

"""A finished reply leaves no garbage that only the cycle collector can free (#34).

A chat service holds thousands of idle conversations; every object a turn leaves in a
reference cycle lives until a collection finds it, and enough of them trigger full
collections, which walk every tracked object of every held conversation. So a reply's
objects must die by reference counting: after ``gc.collect(); reply; del reply`` a
collection finds nothing (its count is exact, no timing involved).
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agentkit.agent import ReActAgent
from agentkit.models._openai import OpenAIChatModel
from agentkit.testing import FunctionModel, ScriptedModel, text, tool_use
from agentkit.tools import Toolkit
from benchmarks.mock_server import MockLLMServer


async def step(i: int) -> str:
    """A step.

    Args:
        i: Step number.
    """
    return f"step {i} ok"


async def broken(i: int) -> str:
    """A tool that fails (its exception and traceback must not stay in a cycle).

    Args:
        i: Call number.
    """
    raise ValueError(f"broken {i}")


def _toolkit() -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_tool_function(step)
    toolkit.register_tool_function(broken)
    return toolkit


def _agent(model: Any) -> ReActAgent:
    return ReActAgent(name="bot", sys_prompt="Be brief.", model=model, toolkit=_toolkit())


@contextmanager
def _collector_off() -> Iterator[None]:
    """No automatic collection in between: it would free a cycle before we count it."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _garbage_of(reply: Callable[[], Awaitable[object]]) -> int:
    """Objects the cycle collector finds after one ``reply()`` whose result is dropped."""
    await reply()  # warm-up: caches, lazy imports, first-time setup
    gc.collect()
    with _collector_off():
        result = await reply()
        del result
        return gc.collect()


def _calls_then_answer(messages: Any, info: Any) -> Any:
    """Two parallel calls (one failing), then an answer once their results are in."""
    if any(m.get_blocks("tool_result") for m in messages[-1:]):
        return "Done."
    return [text("Working."), tool_use("step", None, i=1), tool_use("broken", None, i=2)]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_scripted_reply_with_tool_calls_leaves_no_cyclic_garbage(stream: bool) -> None:
    agent = _agent(FunctionModel(_calls_then_answer, stream=stream))
    assert await _garbage_of(lambda: agent("Go.")) == 0


async def test_text_reply_leaves_no_cyclic_garbage() -> None:
    agent = _agent(ScriptedModel(["Hello."] * 2))
    assert await _garbage_of(lambda: agent("Hi.")) == 0


async def test_failed_reply_leaves_no_cyclic_garbage() -> None:
    """A reply that raises: the exception's traceback holds the loop's frames."""

    def fail(messages: Any, info: Any) -> Any:
        raise RuntimeError("model down")

    agent = _agent(FunctionModel(fail))

    async def reply() -> None:
        with pytest.raises(RuntimeError, match="model down"):
            await agent("Hi.")

    assert await _garbage_of(reply) == 0


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_http_reply_leaves_no_cyclic_garbage(stream: bool) -> None:
    """The same over HTTP (mock OpenAI server on 127.0.0.1), a tool call then an answer."""
    async with MockLLMServer() as server:
        model = OpenAIChatModel("steps-1", api_key="test", base_url=server.base_url, stream=stream)
        try:
            agent = _agent(model)
            agents = iter([agent, agent.copy()])
            assert await _garbage_of(lambda: next(agents)("Go.")) == 0
        finally:
            await model.aclose()

"""The agentkit side of the benchmarks: tools, toolkits, models and agents built on the public
API. Every accessor raises ``NotAvailable`` when the piece is not there (yet), so a scenario
reports "n/a" instead of crashing.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from benchmarks.baselines import PROMPT, SYSTEM
from benchmarks.common import NotAvailable, require


async def step(i: int) -> str:
    """Benchmark step.

    Args:
        i: Step number.
    """
    return f"step {i} ok"


def sync_step(i: int) -> str:
    """Benchmark step.

    Args:
        i: Step number.
    """
    return f"step {i} ok"


async def write(i: int, text: str = "") -> str:
    """Write some text.

    Args:
        i: Call number.
        text: The text to write.
    """
    return f"wrote {len(text)} characters"


async def raw_write(name: str, args: dict[str, Any]) -> str:
    """``write`` for the hand-written loops."""
    return f"wrote {len(args.get('text', ''))} characters"


async def raw_step(name: str, args: dict[str, Any]) -> str:
    """The same tool for the hand-written loops."""
    return f"step {args['i']} ok"


class InFlight:
    """Counts concurrently running tool calls (the peak shows how many really overlap)."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    def enter(self) -> None:
        """A call started."""
        self.now += 1
        self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        """A call finished."""
        self.now -= 1


def sleep_tools(seconds: float, meter: InFlight) -> tuple[Any, Any]:
    """An async and a blocking tool, each sleeping ``seconds`` (same name: ``wait``)."""

    async def wait(i: int) -> str:
        """Wait a moment.

        Args:
            i: Call number.
        """
        meter.enter()
        try:
            await anyio.sleep(seconds)
        finally:
            meter.leave()
        return f"waited {i}"

    def wait_blocking(i: int) -> str:
        """Wait a moment, blocking the thread.

        Args:
            i: Call number.
        """
        meter.enter()
        try:
            time.sleep(seconds)
        finally:
            meter.leave()
        return f"waited {i}"

    return wait, wait_blocking


def toolkit_with(*fns: Any, name: str | None = None) -> Any:
    """A Toolkit holding ``fns`` (the first one registered under ``name`` when given)."""
    try:
        (toolkit_cls,) = require("agentkit.tools", "Toolkit")
    except NotAvailable:
        (toolkit_cls,) = require("agentkit.tools._toolkit", "Toolkit")
    toolkit = toolkit_cls()
    for index, fn in enumerate(fns):
        toolkit.register_tool_function(fn, name=name if index == 0 else None)
    return toolkit


def agent_class() -> Any:
    """``ReActAgent``."""
    try:
        (cls,) = require("agentkit.agent", "ReActAgent")
    except NotAvailable:
        (cls,) = require("agentkit", "ReActAgent")
    return cls


def make_agent(model: Any, toolkit: Any, max_iters: int = 100) -> Any:
    """A quiet ReActAgent for benchmarks."""
    return agent_class()(
        name="bench",
        sys_prompt=SYSTEM,
        model=model,
        toolkit=toolkit,
        max_iters=max_iters,
        print_hint=False,
    )


def openai_model(name: str, base_url: str, *, stream: bool) -> Any:
    """An ``OpenAIChatModel`` pointed at the mock server."""
    (cls,) = require("agentkit.models._openai", "OpenAIChatModel")
    return cls(name, api_key="bench", base_url=base_url, stream=stream)


async def ask(agent: Any, prompt: str = PROMPT) -> str:
    """One reply; return its text."""
    reply = await agent(prompt)
    return str(reply.get_text())


def check_answer(answer: str, tool_results: int) -> None:
    """The mock server's final answer must show that every tool result reached it."""
    expected = f"Done: {tool_results} tool results received."
    if answer.strip() != expected:
        raise AssertionError(f"unexpected final answer {answer!r}, expected {expected!r}")

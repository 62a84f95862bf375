"""Parallel tool calls: one turn, several calls, run concurrently (and how to limit that).

The model asks for five tool calls in one turn. agentkit runs them in an anyio task group,
so five 0.3 s calls take about 0.3 s; ``parallel_tool_calls=False`` runs them one after the
other, ``max_concurrency=2`` allows two at a time, and a tool registered with
``sequential=True`` is a barrier (the calls before it finish, then it runs alone).

Offline it runs on the scripted demo model; set OPENAI_API_KEY / ANTHROPIC_API_KEY /
AGENTKIT_MODEL to use a real one.
"""

from __future__ import annotations

import time

import anyio

from agentkit.agent import ReActAgent
from agentkit.cli import demo_model, describe_model, model_from_env
from agentkit.events import ToolCallStarted, ToolResult
from agentkit.tools import Toolkit

CITIES = "Paris, Tokyo, Lima, Cairo and Oslo"


async def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name.
    """
    await anyio.sleep(0.3)
    return f"{city}: 20 °C"


def build(**options: object) -> ReActAgent:
    model = model_from_env() or demo_model(chunk_delay=0)
    toolkit = Toolkit()
    toolkit.register_tool_function(get_weather)
    return ReActAgent(
        "assistant",
        "Call independent tools in parallel, in one turn. Be brief.",
        model,
        toolkit,
        print_hint=False,
        **options,  # type: ignore[arg-type]
    )


async def timed(label: str, agent: ReActAgent) -> float:
    t0 = time.perf_counter()
    running = peak = 0
    async with agent.stream(f"What's the weather in {CITIES}?") as events:
        async for event in events:
            if isinstance(event, ToolCallStarted):
                running += 1
                peak = max(peak, running)
            elif isinstance(event, ToolResult):
                running -= 1
    took = time.perf_counter() - t0
    print(f"{label:<28} {took:5.2f}s  (at most {peak} calls running at once)")
    return took


async def main() -> None:
    print(f"model: {describe_model(build().model)}")
    fast = await timed("parallel (default)", build())
    slow = await timed("parallel_tool_calls=False", build(parallel_tool_calls=False))
    await timed("max_concurrency=2", build(max_concurrency=2))
    print(f"parallel was {slow / fast:.1f}x faster than sequential")
    # An offline run must show the overlap; a real model may choose fewer calls.
    if model_from_env() is None:
        assert fast < slow * 0.6, (fast, slow)


if __name__ == "__main__":
    anyio.run(main)

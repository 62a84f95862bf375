"""agentkit quickstart: local tools + a real MCP server, parallel calls, interrupt, resume.

Run it with ``python examples/quickstart.py`` (or ``scripts/demo``). With no API key it is
driven by the offline *scripted demo model* (fixed rules, clearly labelled, not an LLM);
with ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` or ``AGENTKIT_MODEL=provider:model`` set,
the very same script runs against the real model.

What it shows:
1. An agent whose tools are a local Python function (schema from its docstring) and the
   tools of a real MCP server (agentkit's filesystem toolkit, spawned over stdio).
2. Three tool calls in one turn, run in parallel (the timings show they overlapped).
3. An interrupt from another task while a slow tool runs: the reply returns at once, the
   memory stays valid (the cut call gets an "interrupted" result).
4. A human follow-up: the agent resumes the task with the new instruction in context.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time

import anyio

from agentkit.agent import ReActAgent
from agentkit.cli import demo_model, describe_model, model_from_env
from agentkit.events import TextDelta, ToolCallStarted, ToolProgress, ToolResult
from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.tools import ToolContext, Toolkit

ROOT = pathlib.Path(__file__).resolve().parent.parent
SYS_PROMPT = (
    "You are a travel assistant. Use the tools; call independent tools in parallel "
    "(in one turn). Be brief. If the user interrupts you, follow their new instruction."
)
WEATHER = {"paris": "sunny, 21 °C", "tokyo": "light rain, 17 °C"}


async def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    await anyio.sleep(1.0)  # a slow API: one second per call
    return f"{city}: {WEATHER.get(city.lower(), 'mild, 20 °C')}"


async def research(topic: str, ctx: ToolContext, quick: bool = False) -> str:
    """Research a topic in depth (slow, about 5 seconds) or quickly.

    Args:
        topic: What to research.
        quick: Only a short overview (under a second).
    """
    steps, pause = (2, 0.2) if quick else (10, 0.5)
    for step in range(1, steps + 1):
        await ctx.report_progress(f"source {step}/{steps}", progress=step, total=steps)
        await anyio.sleep(pause)
    return f"Notes on {topic!r}: Senso-ji at dawn, the Tsukiji outer market, a day in Nikko."


class Timeline:
    """Prints a reply's events with the time since the step started."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.calls: dict[str, tuple[str, float]] = {}
        self.durations: list[tuple[str, float, float]] = []
        self.research_started = anyio.Event()
        self.in_text = False

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def __call__(self, event: object) -> None:
        if isinstance(event, TextDelta):
            if not self.in_text:
                print(f"  [{self.now():5.2f}s] agent says: ", end="")
                self.in_text = True
            print(event.delta, end="", flush=True)
            return
        if self.in_text:
            print()
            self.in_text = False
        if isinstance(event, ToolCallStarted):
            call = event.tool_call
            self.calls[call["id"]] = (call["name"], self.now())
            print(f"  [{self.now():5.2f}s] start {call['name']}({call['input']})")
            if call["name"] == "research":
                self.research_started.set()
        elif isinstance(event, ToolProgress):
            print(f"  [{self.now():5.2f}s]   progress: {event.chunk.get_text()}")
        elif isinstance(event, ToolResult):
            name, started = self.calls.get(event.tool_call_id, (event.result["name"], 0.0))
            self.durations.append((name, started, self.now()))
            output = event.result["output"]
            shown = output if isinstance(output, str) else f"[{len(output)} blocks]"
            state = "error" if event.result.get("is_error") else "done"
            print(f"  [{self.now():5.2f}s] {state} {name}: {' '.join(shown.split())[:90]}")


async def ask(agent: ReActAgent, text: str | None, timeline: Timeline) -> object:
    """One reply, streamed through ``timeline``; returns the reply message."""
    print(f"\nuser: {text}" if text else "\n(resume)")
    async with agent.stream(text) as events:
        async for event in events:
            timeline(event)
    if timeline.in_text:
        print()
        timeline.in_text = False
    return events.reply


def report_overlap(timeline: Timeline) -> None:
    spans = timeline.durations
    if len(spans) < 2:
        print("  (the model did not call several tools at once this time)")
        return
    total = sum(end - start for _, start, end in spans)
    wall = max(end for *_, end in spans) - min(start for _, start, _ in spans)
    if total < 0.05:
        verdict = "too fast to tell"
    elif wall < total * 0.8:
        verdict = "they overlapped (parallel)"
    else:
        verdict = "they did not overlap"
    print(f"  {len(spans)} tool calls: {total:.2f}s of work done in {wall:.2f}s -> {verdict}")


async def main() -> None:
    model = model_from_env() or demo_model(chunk_delay=0.005)
    print(f"model: {describe_model(model)}")
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "trip.md").write_text(
            "# Trip\nParis 3-5 May, then Tokyo 6-12 May. Budget: moderate.\n"
        )
        # A real MCP server, spawned over stdio: agentkit's filesystem toolkit, read-only.
        server = StdioServer(
            sys.executable,
            ["-m", "toolkits.filesystem", "--root", tmp, "--read-only"],
            cwd=ROOT,
        )
        async with MCPClient("files", server) as files:
            toolkit = Toolkit()
            toolkit.register_tool_function(get_weather)  # schema from the docstring
            toolkit.register_tool_function(research)
            await register_mcp_client(toolkit, files, enable_funcs=["read_file", "list_directory"])
            print(f"tools: {', '.join(sorted(toolkit.tools))} (read_file, list_directory: MCP)")
            agent = ReActAgent("assistant", SYS_PROMPT, model, toolkit, print_hint=False)
            await run_story(agent)


async def run_story(agent: ReActAgent) -> None:
    print("\n== 1. Three tool calls in parallel ==")
    timeline = Timeline()
    await ask(agent, "What's the weather in Paris and Tokyo, and what does trip.md say?", timeline)
    report_overlap(timeline)

    print("\n== 2. Interrupt while a slow tool runs ==")
    timeline = Timeline()
    cut: dict[str, float] = {}

    async def interrupter() -> None:
        await timeline.research_started.wait()
        await anyio.sleep(1.2)
        print(f"  [{timeline.now():5.2f}s] another task calls agent.interrupt()")
        cut["at"] = time.perf_counter()
        await agent.interrupt()

    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupter)
        reply = await ask(agent, "Research things to do in Tokyo for my trip.", timeline)
        tg.cancel_scope.cancel()  # no slow tool was called (a real model may answer directly)
    metadata = getattr(reply, "metadata", {})
    if "at" in cut:
        latency_ms = (time.perf_counter() - cut["at"]) * 1000
        print(f"  reply returned, interrupted={metadata.get('interrupted')} ({latency_ms:.0f} ms)")
    else:
        print("  (the model did not call the slow tool this time: nothing to interrupt)")
    memory = await agent.memory.get_memory()
    calls = sum(len(m.get_blocks("tool_use")) for m in memory)
    results = sum(len(m.get_blocks("tool_result")) for m in memory)
    print(f"  memory: {len(memory)} messages, {calls} tool calls, {results} results (valid)")

    print("\n== 3. Resume with the human's follow-up ==")
    await ask(agent, "Just give me the top 3 sights, quickly.", Timeline())
    print("\ndone.")


if __name__ == "__main__":
    anyio.run(main)

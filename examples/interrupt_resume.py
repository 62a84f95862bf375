"""Interrupt and resume in a chat: the pattern behind ``agentkit chat``'s Ctrl-C.

A human chats with an agent (scripted here with ``UserAgent(input_fn=...)``; in a terminal it
would be ``UserAgent()`` reading the console). Three things happen:

1. The agent starts a slow tool; "Ctrl-C" (here a timer calling ``agent.interrupt()``)
   stops it within milliseconds. The reply comes back with ``metadata["interrupted"]``.
2. The human sends nothing new: ``await agent()`` resumes the interrupted task from memory.
3. Interrupted again, the human types a follow-up: ``await agent("...")`` continues with it.

After each interrupt, the memory is valid: every tool call has exactly one result.

Offline it runs on the scripted demo model; set OPENAI_API_KEY / ANTHROPIC_API_KEY /
AGENTKIT_MODEL to use a real one.
"""

from __future__ import annotations

import time

import anyio

from agentkit import UserAgent
from agentkit.agent import ReActAgent
from agentkit.cli import demo_model, describe_model, model_from_env
from agentkit.events import ToolCallStarted, ToolProgress, ToolResult
from agentkit.tools import ToolContext, Toolkit


async def research(topic: str, ctx: ToolContext, quick: bool = False) -> str:
    """Research a topic (slow: about 3 seconds; quick: a fraction of a second).

    Args:
        topic: What to research.
        quick: Only a short overview.
    """
    steps = 2 if quick else 10
    for step in range(1, steps + 1):
        await ctx.report_progress(f"{step}/{steps}")
        await anyio.sleep(0.3 if not quick else 0.1)
    return f"Findings on {topic!r}: three facts, two open questions."


async def reply_with_ctrl_c(agent: ReActAgent, msg: str | None, after: float | None) -> None:
    """Run one reply; "press Ctrl-C" ``after`` seconds into the first tool call."""
    started = anyio.Event()

    async def ctrl_c() -> None:
        await started.wait()
        await anyio.sleep(after or 0)
        print("    ^C  (agent.interrupt())")
        await agent.interrupt()

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        if after is not None:
            tg.start_soon(ctrl_c)
        async with agent.stream(msg) as events:
            async for event in events:
                if isinstance(event, ToolCallStarted):
                    started.set()
                    print(f"    -> {event.tool_call['name']}({event.tool_call['input']})")
                elif isinstance(event, ToolProgress):
                    print(f"       progress {event.chunk.get_text()}")
                elif isinstance(event, ToolResult):
                    print(f"    <- {event.result['output']}")
        tg.cancel_scope.cancel()
    reply = events.reply
    assert reply is not None
    state = "interrupted" if (reply.metadata or {}).get("interrupted") else "answered"
    said = reply.get_text() or "(no answer yet)"
    print(f"  {agent.name} ({state} after {time.perf_counter() - t0:.2f}s): {said}")
    await check_memory(agent)


async def check_memory(agent: ReActAgent) -> None:
    memory = await agent.memory.get_memory()
    calls = {b["id"] for m in memory for b in m.get_blocks("tool_use")}
    results = [b["id"] for m in memory for b in m.get_blocks("tool_result")]
    assert sorted(calls) == sorted(results), "every tool call has exactly one result"


async def main() -> None:
    model = model_from_env() or demo_model(chunk_delay=0)
    print(f"model: {describe_model(model)}")
    toolkit = Toolkit()
    toolkit.register_tool_function(research)
    agent = ReActAgent(
        "assistant", "Use the research tool. Be brief.", model, toolkit, print_hint=False
    )
    # The human's lines, as typed: "" means "just press Enter" (resume as it was).
    lines = iter(["Research the history of tea.", "", "Only the 20th century, quickly."])
    human = UserAgent("human", input_fn=lambda prompt: next(lines), output_fn=lambda _: None)
    ctrl_c_after = [0.7, 0.7, None]  # seconds into the tool call, per turn
    for after in ctrl_c_after:
        said = (await human()).get_text()
        print(f"\nhuman: {said or '(Enter: resume)'}")
        await reply_with_ctrl_c(agent, said or None, after)
    memory = await agent.memory.get_memory()
    print(f"\nmemory: {len(memory)} messages, all tool calls answered")


if __name__ == "__main__":
    anyio.run(main)

"""Multi-agent: a group chat (MsgHub), pipelines, and an agent used as another's tool.

1. ``MsgHub``: alice and bob debate; each hears the other's replies (they are *observed*
   into each other's memory), then a judge who heard everything decides.
2. ``fanout_pipeline``: three reviewers answer the same question concurrently.
   ``sequential_pipeline``: a writer drafts, an editor tightens the draft.
3. ``agent.as_tool()``: a researcher agent becomes a tool of a writer agent; the
   researcher's own tool calls stream out as progress of the writer's tool call.

Offline every agent is played by a tiny scripted model that quotes what it heard; set
OPENAI_API_KEY / ANTHROPIC_API_KEY / AGENTKIT_MODEL and real models play them all.
"""

from __future__ import annotations

import anyio

from agentkit.agent import ReActAgent
from agentkit.cli import describe_model, model_from_env
from agentkit.events import ToolProgress
from agentkit.messages import Msg
from agentkit.models import ChatModel
from agentkit.pipelines import MsgHub, fanout_pipeline, sequential_pipeline
from agentkit.testing import FunctionModel, RequestInfo, ScriptItem, tool_use
from agentkit.tools import Toolkit


def persona(name: str, stance: str) -> ChatModel:
    """A scripted participant: states its stance and answers the last thing it heard."""

    def speak(messages: list[Msg], info: RequestInfo) -> ScriptItem:
        heard = [m for m in messages if m.role != "system" and m.get_text()]
        last = heard[-1] if heard else None
        if last is None:
            return f"{stance}"
        quote = last.get_text().split(" (replying")[0]
        return f'{stance} (replying to {last.name}: "{quote}")'

    return model_from_env() or FunctionModel(speak, model_name=f"persona-{name}")


def agent(name: str, stance: str, toolkit: Toolkit | None = None) -> ReActAgent:
    return ReActAgent(
        name, f"You are {name}. {stance}", persona(name, stance), toolkit, print_hint=False
    )


async def group_chat() -> None:
    print("== 1. MsgHub: a debate ==")
    alice = agent("alice", "A four-day week raises productivity.")
    bob = agent("bob", "A four-day week hurts customer support.")
    judge = agent("judge", "Bob's point about support decides it.")
    topic = Msg("host", "Proposal: a four-day work week.", "user")
    async with MsgHub([alice, bob, judge], announcement=topic):
        for speaker in (alice, bob, alice, bob):
            reply = await speaker()  # no message: each heard everything already
            print(f"{speaker.name}: {reply.get_text()}")
        verdict = await judge()
    print(f"judge: {verdict.get_text()}")
    heard = [m.name for m in await judge.memory.get_memory() if m.role != "system"]
    print(f"(the judge's memory holds: {heard})\n")


async def pipelines() -> None:
    print("== 2. fanout and sequential pipelines ==")
    reviewers = [
        agent("security", "Validate the redirect URL."),
        agent("performance", "Cache the session lookup."),
        agent("style", "Rename `x` to `user_id`."),
    ]
    reviews = await fanout_pipeline(reviewers, "Review: def login(x): ...")
    for reviewer, review in zip(reviewers, reviews, strict=True):
        print(f"{reviewer.name}: {review.get_text()}")
    final = await sequential_pipeline(
        [agent("writer", "Draft: rain on the tin roof."), agent("editor", "Tightened: tin rain.")],
        "Write a one-line poem about rain.",
    )
    print(f"after writer -> editor: {final.get_text() if final else None}\n")


async def agent_as_tool() -> None:
    print("== 3. an agent as a tool ==")

    async def search(query: str) -> str:
        """Search the notes.

        Args:
            query: What to look for.
        """
        return f"3 notes about {query}"

    def research_script(messages: list[Msg], info: RequestInfo) -> ScriptItem:
        if not any(m.has_blocks("tool_result") for m in messages):
            return [tool_use("search", query="otters")]
        return "Otters hold hands while sleeping (3 sources)."

    def writer_script(messages: list[Msg], info: RequestInfo) -> ScriptItem:
        results = [b for m in messages for b in m.get_blocks("tool_result")]
        if not results:
            return [tool_use("researcher", task="Find one surprising fact about otters.")]
        return f"Report: {results[-1]['output']}"

    research_tools = Toolkit()
    research_tools.register_tool_function(search)
    researcher = ReActAgent(
        "researcher",
        "You find facts with search.",
        model_from_env() or FunctionModel(research_script),
        research_tools,
        print_hint=False,
    )
    writer_tools = Toolkit()
    writer_tools.register_tool(researcher.as_tool(description="Finds facts on a topic."))
    writer = ReActAgent(
        "writer",
        "You write reports; delegate research.",
        model_from_env() or FunctionModel(writer_script),
        writer_tools,
        print_hint=False,
    )
    async with writer.stream("Write a one-line report on otters.") as events:
        async for event in events:
            if isinstance(event, ToolProgress):
                print(f"  (researcher, live) {event.chunk.get_text().strip()}")
    assert events.reply is not None
    print(f"writer: {events.reply.get_text()}")


async def main() -> None:
    print(f"models: {describe_model(persona('x', ''))}\n")
    await group_chat()
    await pipelines()
    await agent_as_tool()


if __name__ == "__main__":
    anyio.run(main)

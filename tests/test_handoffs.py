"""Handoffs: the target continues the same conversation and answers in the source's place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2

from agentkit import Handoff, ReActAgent, Toolkit, handoff
from agentkit.agent import _handoffs
from agentkit.events import ReplyFinished, ReplyStarted, TextDelta, ToolCallStarted, ToolResult
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.models import ChatResponse, ChatUsage
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, text, tool_use
from tests._serve_helpers import run_events, run_input, running, user


def agent(name: str, script: list[Any], **kw: Any) -> ReActAgent:
    return ReActAgent(name, f"You are {name}.", ScriptedModel(script), **kw)


def model_of(a: ReActAgent) -> ScriptedModel:
    assert isinstance(a.model, ScriptedModel)
    return a.model


async def valid(a: ReActAgent) -> list[Msg]:
    memory = await a.memory.get_memory()
    check_memory_invariant(memory, [c["id"] for c in a.conversation.pending])
    return memory


async def test_the_target_answers_the_same_conversation_through_the_filter() -> None:
    seen: list[list[Msg]] = []

    def last_two(msgs: list[Msg]) -> list[Msg]:
        seen.append(msgs)
        return msgs[-3:]  # the question, the handoff call, its result

    billing = agent("billing", ["Your invoice is 42 EUR."])
    triage = agent(
        "triage",
        ["Hello.", [tool_use("transfer_to_billing", "h1")], "Anything else?"],
        handoffs=[handoff(billing, input_filter=last_two, description="Invoices.")],
    )
    assert (await triage.run("hi")).last_agent == "triage"  # no handoff: its own name
    result = await triage.run("how much do I owe?")

    assert result.last_agent == "billing"
    assert result.text == "Your invoice is 42 EUR." and result.stop_reason == "final"
    [offered] = [t for t in model_of(triage).requests[0].tools if "transfer" in t.name]
    assert offered.name == "transfer_to_billing" and offered.description == "Invoices."
    # The filter got the whole history; the target saw what it returned (plus its prompt).
    assert [m.get_text() for m in seen[0][:2]] == ["hi", "Hello."]
    [request] = model_of(billing).requests
    prompt = [m for m in request.messages if m.role != "system"]
    assert prompt[0].get_text() == "how much do I owe?" and len(prompt) == 3
    assert prompt[-1].get_content_blocks()[0]["type"] == "tool_result"
    # The source's memory: the call, its result and the target's answer, all valid.
    memory = await valid(triage)
    assert [m.name for m in memory[-2:]] == ["triage", "billing"]
    assert memory[-1].get_text() == "Your invoice is 42 EUR."
    assert result.new_messages[-1] is memory[-1]
    # The template target ran nothing itself (a copy did), and the source goes on coherently.
    assert await billing.memory.get_memory() == []
    follow = await triage.run("thanks")
    assert follow.text == "Anything else?" and follow.last_agent == "triage"
    await valid(triage)


async def test_a_chain_of_two_handoffs_ends_at_the_last_agent() -> None:
    tech = agent("tech", ["Reboot the router."])
    billing = agent("billing", [[tool_use("transfer_to_tech", "h2")]], handoffs=[tech])
    triage = agent("triage", [[tool_use("transfer_to_billing", "h1")]], handoffs=[billing])
    result = await triage.run("my internet is down")
    assert result.last_agent == "tech" and result.text == "Reboot the router."
    memory = await valid(triage)
    assert memory[-1].name == "tech"
    assert result.usage.requests == 3 and result.usage.models == {"scripted": 3}


def answer(*blocks: Any, input_tokens: int, output_tokens: int) -> ChatResponse:
    content = [text(b) if isinstance(b, str) else b for b in blocks]
    return ChatResponse(content=content, usage=ChatUsage(input_tokens, output_tokens))


async def test_usage_of_the_target_is_summed_into_the_run() -> None:
    tools = Toolkit()

    @tools.tool
    def lookup() -> str:
        """Look the invoice up."""
        return "paid on May 2"

    billing = agent(
        "billing",
        [
            answer(tool_use("lookup", "t1"), input_tokens=100, output_tokens=2),
            answer("Paid.", input_tokens=100, output_tokens=2),
        ],
        toolkit=tools,
    )
    triage = agent(
        "triage",
        [answer(tool_use("transfer_to_billing", "h1"), input_tokens=10, output_tokens=1)],
        handoffs=[billing],
    )
    result = await triage.run("did I pay?")
    assert result.text == "Paid."
    # triage: 1 request and the handoff call; billing: 2 requests and its lookup.
    assert result.usage.requests == 3 and result.usage.tool_calls == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (210, 5)
    assert result.reply.metadata is not None
    assert result.reply.metadata["usage"]["input_tokens"] == 210


async def test_handoffs_beyond_the_depth_bound_are_refused() -> None:
    assert _handoffs.MAX_HANDOFF_DEPTH == 5
    # Two agents that hand the conversation back and forth, forever if they could.
    ping = agent("ping", [[tool_use("transfer_to_pong")]] * 3 + ["ping answers"])
    pong = agent("pong", [[tool_use("transfer_to_ping")]] * 3 + ["pong answers"])
    ping.handoffs = [pong]
    pong.handoffs = [ping]
    result = await ping.run("go")
    # ping -> pong -> ping -> pong -> ping -> pong: five handoffs; pong's sixth is refused
    # with an error result, and pong answers itself.
    assert result.last_agent == "pong" and result.text == "pong answers"
    assert result.usage.requests == 7
    last_prompt = model_of(pong).requests[-1].messages
    refusal = last_prompt[-1].get_content_blocks()[0]
    assert refusal["type"] == "tool_result" and refusal.get("is_error")
    assert "refused" in str(refusal["output"])
    memory = await valid(ping)
    assert memory[-1].name == "pong"


async def test_interrupting_during_the_target_interrupts_it_and_keeps_memory_valid() -> None:
    started = anyio.Event()
    tools = Toolkit()

    @tools.tool
    async def crunch() -> str:
        """Crunch for a long time."""
        started.set()
        await anyio.sleep(30)
        return "crunched"

    tech = ReActAgent(
        "tech",
        "You fix things.",
        ScriptedModel([[text("Checking. "), tool_use("crunch", "k1")]]),
        tools,
    )
    triage = agent("triage", [[tool_use("transfer_to_tech", "h1")], "Back."], handoffs=[tech])
    results: list[Any] = []

    async def go() -> None:
        results.append(await triage.run("fix it"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        with anyio.fail_after(5):
            await started.wait()
        assert await triage.interrupt()
    [result] = results
    assert result.stop_reason == "interrupted" and result.last_agent == "tech"
    assert result.text == "Checking. "
    memory = await valid(triage)
    assert memory[-1].name == "tech" and memory[-1].get_text() == "Checking. "
    assert not triage.is_replying and await tech.memory.get_memory() == []
    assert (await triage.run("and now?")).text == "Back."


async def test_events_of_the_target_stream_through_the_source() -> None:
    billing = agent("billing", ["Forty-two."])
    triage = agent("triage", [[tool_use("transfer_to_billing", "h1")]], handoffs=[billing])
    events: list[Any] = []
    async with triage.stream("how much?") as stream:
        async for event in stream:
            events.append(event)
    kinds = [type(e) for e in events]
    assert kinds[0] is ReplyStarted and kinds[-1] is ReplyFinished
    assert kinds.count(ReplyStarted) == 1 and kinds.count(ReplyFinished) == 1
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    assert started.tool_call["name"] == "transfer_to_billing"
    handed = next(i for i, e in enumerate(events) if isinstance(e, ToolResult))
    text = "".join(e.delta for e in events[handed:] if isinstance(e, TextDelta))
    assert text == "Forty-two."
    assert events[-1].reply.name == "billing"


async def test_a_served_thread_streams_the_targets_answer(tmp_path: Path) -> None:
    def factory() -> ReActAgent:
        billing = agent("billing", ["Forty-two euros."])
        return agent("triage", [[tool_use("transfer_to_billing", "h1")]], handoffs=[billing])

    app = create_app(factory, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("t1", user("how much?", "m1")))
        assert events[-1]["outcome"] == {"type": "success"}
        streamed = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert streamed == "Forty-two euros."
        messages = (await c.get("/threads/t1")).json()["messages"]
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == "Forty-two euros."


def test_handoff_builds_a_default_tool_name_and_description() -> None:
    h = handoff(agent("Tech Support", []))
    assert isinstance(h, Handoff) and h.tool_name == "transfer_to_Tech_Support"
    assert "Tech Support" in h.description
    assert handoff(agent("x", []), name="escalate").tool_name == "escalate"


async def test_an_approval_inside_the_target_pauses_the_run_like_a_nested_one() -> None:
    deleted: list[str] = []
    tools = Toolkit()

    @tools.tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    ops = ReActAgent(
        "ops",
        "You delete files.",
        ScriptedModel([[tool_use("delete", "d1", path="/tmp/x")], "Deleted it."]),
        tools,
    )
    triage = agent("triage", [[tool_use("transfer_to_ops", "h1")]], handoffs=[ops])
    paused = await triage.run("remove /tmp/x")
    assert paused.stop_reason == "pending_approval"
    assert [(p.id, p.name) for p in paused.pending] == [("h1/d1", "delete")]
    await valid(triage)
    # The pause survives a JSON round trip of the source's state (a served thread's store).
    restored = agent("triage", [], handoffs=[ops])
    restored.load_state_dict(json.loads(json.dumps(triage.state_dict())))
    done = await restored.run(approvals={"h1/d1": True})
    assert done.stop_reason == "final" and done.last_agent == "ops"
    assert done.text == "Deleted it." and deleted == ["/tmp/x"]
    memory = await valid(restored)
    assert memory[-1].name == "ops"


async def test_denying_the_handoff_call_cancels_the_targets_calls() -> None:
    deleted: list[str] = []
    tools = Toolkit()

    @tools.tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return "deleted"

    ops = ReActAgent(
        "ops", "You delete.", ScriptedModel([[tool_use("delete", "d1", path="/x")]]), tools
    )
    triage = agent("triage", [[tool_use("transfer_to_ops", "h1")], "Not done."], handoffs=[ops])
    assert (await triage.run("remove /x")).stop_reason == "pending_approval"
    result = await triage.run(approvals={"h1": "no handoff"})
    assert result.stop_reason == "final" and result.last_agent == "triage"
    assert result.text == "Not done." and deleted == []
    await valid(triage)


async def test_a_served_thread_continues_after_a_handoff(tmp_path: Path) -> None:
    # One model per agent across the thread's requests (the factory builds fresh agents).
    triage_model = ScriptedModel([[tool_use("transfer_to_billing", "h1")], "Anything else?"])
    billing_model = ScriptedModel(["Forty-two euros."])

    def factory() -> ReActAgent:
        billing = ReActAgent("billing", "You are billing.", billing_model)
        return ReActAgent("triage", "You are triage.", triage_model, handoffs=[billing])

    app = create_app(factory, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        first = user("how much?", "m1")
        await run_events(c, "/agui", run_input("t1", first))
        events = await run_events(c, "/agui", run_input("t1", first, user("thanks", "m2")))
        assert events[-1]["outcome"] == {"type": "success"}
        streamed = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert streamed == "Anything else?"
        messages = (await c.get("/threads/t1")).json()["messages"]
    texts = [m.get("content") for m in messages if m["role"] in ("user", "assistant")]
    assert texts[0] == "how much?" and "Forty-two euros." in texts
    assert texts[-2:] == ["thanks", "Anything else?"]
    # Triage's second request carries the first turn whole: the handoff call, its result
    # and billing's answer (the stored thread is valid, so the provider would take it).
    prompt = triage_model.requests[-1].messages
    check_memory_invariant(prompt[1:])
    assert [m.name for m in prompt if m.role == "assistant"] == ["triage", "billing"]
    assert prompt[-1].get_text() == "thanks"

"""AG-UI conformance of ``POST /agui``: every event validates against the ag-ui-protocol
models (no field outside the schema), pairs are balanced and ordered, and each outcome
(success, interrupt, cancelled, error) ends the stream as the protocol says."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2

from agentkit import ReActAgent
from agentkit.memory import check_memory_invariant
from agentkit.serve import TOOL_PROGRESS_EVENT, create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, text, thinking, tool_use
from agentkit.tools import ToolContext, Toolkit
from tests._serve_agents import make_agent
from tests._serve_helpers import (
    run_events,
    run_input,
    running,
    stream_into,
    types,
    user,
    wait_for,
)

_PAIRS = {
    "TEXT_MESSAGE_START": ("TEXT_MESSAGE_END", "messageId"),
    "REASONING_START": ("REASONING_END", "messageId"),
    "REASONING_MESSAGE_START": ("REASONING_MESSAGE_END", "messageId"),
    "TOOL_CALL_START": ("TOOL_CALL_END", "toolCallId"),
    "STEP_STARTED": ("STEP_FINISHED", "stepName"),
    "SUBAGENT_STARTED": ("SUBAGENT_FINISHED", "subagentRunId"),
}
_ENDS = {end: (start, key) for start, (end, key) in _PAIRS.items()}
_INSIDE = {
    "TEXT_MESSAGE_CONTENT": ("TEXT_MESSAGE_START", "messageId"),
    "REASONING_MESSAGE_CONTENT": ("REASONING_MESSAGE_START", "messageId"),
    "TOOL_CALL_ARGS": ("TOOL_CALL_START", "toolCallId"),
}


def check_sequence(events: list[dict[str, Any]]) -> None:
    """RUN_STARTED first, one terminal event last, every START closed, contents inside."""
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    assert sum(e["type"] in ("RUN_FINISHED", "RUN_ERROR", "RUN_STARTED") for e in events) == 2
    open_: set[tuple[str, str]] = set()
    ended_calls: set[str] = set()
    for event in events:
        kind = event["type"]
        if kind in _PAIRS:
            item = (kind, event[_PAIRS[kind][1]])
            assert item not in open_, f"{item} started twice"
            open_.add(item)
        elif kind in _ENDS:
            start, key = _ENDS[kind]
            assert (start, event[key]) in open_, f"{kind} without {start}"
            open_.discard((start, event[key]))
            if kind == "TOOL_CALL_END":
                ended_calls.add(event["toolCallId"])
        elif kind in _INSIDE:
            start, key = _INSIDE[kind]
            assert (start, event[key]) in open_, f"{kind} outside its message"
    assert not open_, f"left open: {open_}"
    ids = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert len(ids) == len(set(ids))


def app_for(factory: Any, tmp_path: Path, **kw: Any) -> Any:
    return create_app(factory, sessions=SQLiteSession(tmp_path / "t.db"), **kw)


async def test_tool_run_streams_a_valid_balanced_sequence(tmp_path: Path) -> None:
    async with (
        running(app_for(make_agent, tmp_path)) as base,
        httpx2.AsyncClient(base_url=base) as c,
    ):
        events = await run_events(c, "/agui", run_input("t1", user("weather in Paris and Lima")))
    check_sequence(events)
    kinds = types(events)
    assert kinds[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert kinds[-2:] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "success"}
    counts = Counter(kinds)
    assert counts["TOOL_CALL_START"] == counts["TOOL_CALL_RESULT"] == 2
    assert counts["STEP_STARTED"] == 3  # reason 1, act 1, reason 2
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert {e["metadata"]["status"] for e in results} == {"done"}
    # The closing snapshot holds the stored thread: user, assistant+calls, 2 results, answer.
    snapshot = events[-2]["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool", "tool", "assistant"]
    assert {tc["id"] for tc in snapshot[1]["toolCalls"]} == {e["toolCallId"] for e in results}


async def test_reasoning_and_progress_events(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [thinking("The user wants tea facts."), text("Let me look."), tool_use("slow_step")],
            [thinking("Done."), text("Tea is a drink.")],
        ],
        stream=True,
    )
    toolkit = Toolkit()

    @toolkit.tool
    async def slow_step(ctx: ToolContext) -> str:
        """Do a step, reporting progress."""
        await ctx.report_progress("half way", progress=1, total=2)
        return "ok"

    agent = ReActAgent("a", "s", model, toolkit, print_hint=False)
    async with running(app_for(agent, tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("r1", user("tea?")))
    check_sequence(events)
    kinds = types(events)
    for kind in ("REASONING_START", "REASONING_MESSAGE_CONTENT", "REASONING_END"):
        assert kind in kinds
    progress = [e for e in events if e["type"] == "CUSTOM"]
    assert progress[0]["name"] == TOOL_PROGRESS_EVENT
    assert progress[0]["value"]["text"] == "half way"
    assert progress[0]["value"]["progress"] == 1
    assert [m["role"] for m in events[-2]["messages"]][:3] == ["user", "reasoning", "assistant"]


async def test_subagent_tool_is_wrapped_in_subagent_events(tmp_path: Path) -> None:
    inner_model = ScriptedModel(["inner answer"], stream=True)
    inner = ReActAgent("researcher", "r", inner_model, print_hint=False)
    outer_model = ScriptedModel([[tool_use("researcher", task="find")], "outer answer"])
    toolkit = Toolkit()
    toolkit.register_tool(inner.as_tool(name="researcher", description="Researches."))
    outer = ReActAgent("outer", "o", outer_model, toolkit, print_hint=False)
    app = app_for(lambda: outer, tmp_path)
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("s1", user("go")))
    check_sequence(events)
    kinds = types(events)
    assert kinds.index("SUBAGENT_STARTED") < kinds.index("TOOL_CALL_RESULT")
    assert kinds.index("SUBAGENT_FINISHED") > kinds.index("TOOL_CALL_RESULT")
    started = next(e for e in events if e["type"] == "SUBAGENT_STARTED")
    inner_events = [e for e in events if e["type"] == "CUSTOM"]
    assert inner_events, "the inner agent's events are forwarded as progress"
    assert {e.get("subagentRunId") for e in inner_events} == {started["subagentRunId"]}


async def test_interrupt_outcome_then_resume_entries(tmp_path: Path) -> None:
    async with (
        running(app_for(make_agent, tmp_path)) as base,
        httpx2.AsyncClient(base_url=base) as c,
    ):
        first = await run_events(
            c, "/agui", run_input("a1", user('call delete_files {"pattern": "x"}'))
        )
        check_sequence(first)
        outcome = first[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        assert interrupt["toolCallId"] == interrupt["id"]
        assert interrupt["reason"] == "tool_approval"
        assert interrupt["responseSchema"]["required"] == ["approved"]
        # The pending call was announced (START/ARGS/END) but has no result.
        assert "TOOL_CALL_END" in types(first) and "TOOL_CALL_RESULT" not in types(first)
        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        second = await run_events(c, "/agui", run_input("a1", resume=resume))
        check_sequence(second)
        assert second[-1]["outcome"] == {"type": "success"}
        result = next(e for e in second if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == interrupt["id"] and "deleted files" in result["content"]
        # The call was announced in the first run: the resumed run does not start it again.
        assert "TOOL_CALL_START" not in types(second)[: types(second).index("TOOL_CALL_RESULT")]


async def test_cancelled_outcome_when_stopped(tmp_path: Path) -> None:
    async with (
        running(app_for(make_agent, tmp_path)) as base,
        httpx2.AsyncClient(base_url=base) as c,
    ):
        events: list[dict[str, Any]] = []
        body = run_input("c1", user('call slow_task {"topic": "t"}'))
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream_into, c, "/agui", body, events)
            await wait_for(events, "CUSTOM")  # the tool is running and reporting progress
            stopped = await c.post("/threads/c1/interrupt")
            # The endpoint returns once the run stopped: its stream has ended already.
            assert stopped.json()["status"] == "stopped"
            assert events[-1]["type"] == "RUN_FINISHED"
            # Server-Timing: the turn was committed before the stream's end was written.
            timing = {
                part.split(";dur=")[0].strip(): float(part.split(";dur=")[1])
                for part in stopped.headers["server-timing"].split(",")
            }
            assert set(timing) == {"committed", "stream-end"}
            assert 0 <= timing["committed"] <= timing["stream-end"]
        check_sequence(events)
        assert events[-1]["outcome"] == {"type": "cancelled"}
        thread = (await c.get("/threads/c1")).json()
        assert thread["running"] is False
        tool = next(m for m in thread["messages"] if m["role"] == "tool")
        assert tool["metadata"]["status"] == "interrupted"
        # The next message continues the thread (an ordinary new run, as AG-UI says).
        follow = await run_events(c, "/agui", run_input("c1", user("just a quick summary")))
        assert follow[-1]["outcome"] == {"type": "success"}
        assert "You interrupted me" in (await c.get("/threads/c1")).text


async def _failed_run(factory: Any, tmp_path: Path) -> tuple[str, list[str]]:
    """Run one thread that ends in ``RUN_ERROR``; check the events, that the thread is idle
    and that its stored memory is valid. Returns the error message and the stored roles."""
    async with running(app_for(factory, tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("f1", user("hi")))
        check_sequence(events)
        assert events[-1]["type"] == "RUN_ERROR"
        thread = (await c.get("/threads/f1")).json()
        assert thread["running"] is False
    store = SQLiteSession(tmp_path / "t.db")
    (key,) = await store.list_ids()
    agent = factory()
    agent.load_state_dict((await store.load_state(key))["agent"])  # type: ignore[index]
    check_memory_invariant(await agent.memory.get_memory())
    return str(events[-1]["message"]), [m["role"] for m in thread["messages"]]


async def test_a_translation_failure_stops_the_run_with_run_error_and_valid_memory(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    from agentkit.events import ToolResult
    from agentkit.serve._events import Translator

    original = Translator.translate

    def failing(self: Translator, event: Any) -> Any:
        if isinstance(event, ToolResult):
            raise ValueError("cannot translate this")
        return original(self, event)

    monkeypatch.setattr(Translator, "translate", failing)

    def factory() -> ReActAgent:
        model = ScriptedModel([[tool_use("nothing_here")], [text("never asked")]])
        return ReActAgent("a", "s", model, print_hint=False)

    message, roles = await _failed_run(factory, tmp_path)
    assert "cannot translate this" not in message  # the person sees no exception text
    assert "of thread f1 failed: ValueError: cannot translate this" in caplog.text
    # Stopped at its next checkpoint (this scripted model has none): every call answered.
    assert roles[:3] == ["user", "assistant", "tool"]


async def test_agent_error_ends_with_run_error_and_valid_memory(
    tmp_path: Path, caplog: Any
) -> None:
    from agentkit.exceptions import ModelAPIError

    def factory() -> ReActAgent:
        model = ScriptedModel([[tool_use("nothing_here")], ModelAPIError("provider down")])
        return ReActAgent("a", "s", model, print_hint=False)

    message, roles = await _failed_run(factory, tmp_path)
    assert "provider down" not in message and "went wrong" in message
    assert "of thread f1 failed: ModelAPIError: provider down" in caplog.text
    assert roles == ["user", "assistant", "tool"]

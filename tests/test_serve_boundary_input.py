"""What a client sends is checked where it enters the server, over real HTTP: lone
surrogates are made valid (the turn is stored), nesting is bounded (a clear 400), a client
tool's ``pattern`` runs in linear time, a template agent keeps its limits, and an approval
interrupt shows a call's arguments whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from agentkit import ReActAgent, UsageLimits
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._serve_helpers import run_input, running, sse_events, user


def raw(body: Any) -> dict[str, Any]:
    """Request kwargs sending ``body`` as ASCII JSON (so ``\\ud800`` goes out as an escape)."""
    return {
        "content": json.dumps(body).encode(),
        "headers": {"content-type": "application/json"},
    }


async def post_run(client: httpx2.AsyncClient, body: Any) -> tuple[int, list[dict[str, Any]]]:
    async with client.stream("POST", "/agui", **raw(body)) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, [response.json()]
        return 200, [e async for e in sse_events(response)]


def agent(model: ScriptedModel, toolkit: Toolkit | None = None, **kw: Any) -> ReActAgent:
    return ReActAgent("helper", "You help.", model, toolkit or Toolkit(), **kw)


async def stored_messages(db: Path, thread: str) -> list[dict[str, Any]]:
    state = await SQLiteSession(db).load_state(f"serve/local/{thread}")
    assert state is not None
    messages: list[dict[str, Any]] = state["agent"]["memory"]["messages"]
    return messages


async def test_lone_surrogates_in_state_and_tool_specs_are_replaced_and_the_turn_stored(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    model = ScriptedModel(["Noted.", "Again."])
    app = create_app(agent(model), sessions=SQLiteSession(db))
    bad_tool = {
        "name": "pick",
        "description": "Pick one \ud800 thing.",
        "parameters": {"type": "object", "properties": {"k\udc00": {"type": "string"}}},
    }
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        for thread in ("s1", "s2"):  # s2 is new: its first save used to answer 500
            body = run_input(thread, user("hi \ud83d"), state={"note": "x\udfff"}, tools=[bad_tool])
            status, events = await post_run(c, body)
            assert status == 200, events
            assert events[-1]["outcome"] == {"type": "success"}
        shown = await c.get("/threads/s1")
        assert shown.json()["state"] == {"note": "x\ufffd"}
    stored = await stored_messages(db, "s1")
    assert len(stored) == 2
    assert stored[0]["content"] == "hi \ufffd"


async def test_nesting_beyond_the_bound_is_a_clear_400_and_the_thread_keeps_working(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["Fine."])
    app = create_app(agent(model), sessions=SQLiteSession(tmp_path / "t.db"))
    deep_state: Any = "leaf"
    for _ in range(300):
        deep_state = {"d": deep_state}
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        status, (error,) = await post_run(c, run_input("n1", user("hi"), state=deep_state))
        assert status == 400 and error["error"]["code"] == "too_deep", error
        huge = b"[" * 100_000 + b"]" * 100_000
        answer = await c.post("/agui", content=huge, headers={"content-type": "application/json"})
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "too_deep"
        deep_approvals = await c.post("/threads/n1/approvals", content=huge)
        assert deep_approvals.status_code == 400
        status, events = await post_run(c, run_input("n1", user("hi"), state={"ok": 1}))
        assert status == 200 and events[-1]["outcome"] == {"type": "success"}


async def test_a_client_tool_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    # ``^(a+)+$`` on 64 a's and a "!" backtracks for longer than the universe on Python's
    # ``re`` (holding the GIL: every user of the server waits); on RE2 it is instant.
    evil = {
        "name": "lookup",
        "description": "Look a code up.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
            "required": ["code"],
        },
    }
    model = ScriptedModel([[tool_use("lookup", "c1", code="a" * 64 + "!")], "Sorry."])
    app = create_app(agent(model), sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        status, first = await post_run(c, run_input("p1", user("look it up"), tools=[evil]))
        assert status == 200 and first[-1]["outcome"] == {"type": "success"}, first
        # The client ran its tool: the call's arguments are checked as it is answered.
        snapshot = [e for e in first if e["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
        answer = {"id": "r1", "role": "tool", "toolCallId": "c1", "content": "found"}
        body = run_input("p1", *snapshot, answer, tools=[evil])
        status, events = await post_run(c, body)
        assert status == 200, events
        (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert "does not match" in result["content"]
        assert events[-1]["outcome"] == {"type": "success"}
        refused = {
            **evil,
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "pattern": "(a)\\1"}},
            },
        }
        status, (error,) = await post_run(c, run_input("p2", user("x"), tools=[refused]))
        assert status == 400 and error["error"]["code"] == "invalid_tool", error
        assert "RE2" in error["error"]["message"]


async def test_a_template_agent_is_served_with_its_limits(tmp_path: Path) -> None:
    calls: list[int] = []
    toolkit = Toolkit()

    @toolkit.tool
    def ping(n: int) -> str:
        """Ping.

        Args:
            n: Which ping.
        """
        calls.append(n)
        return "pong"

    script: list[Any] = [[tool_use("ping", f"c{i}", n=i)] for i in range(6)]
    model = ScriptedModel([*script, "Done."])
    template = agent(model, toolkit, usage_limits=UsageLimits(max_tool_calls=2))
    app = create_app(template, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        status, events = await post_run(c, run_input("u1", user("ping a lot")))
        assert status == 200, events
    assert calls == [0, 1]


async def test_an_approval_interrupt_shows_the_whole_arguments(tmp_path: Path) -> None:
    toolkit = Toolkit()

    @toolkit.tool(requires_approval=True)
    def send(body: str) -> str:
        """Send a message.

        Args:
            body: The text.
        """
        return "sent"

    long_body = "word " * 400 + "END"
    model = ScriptedModel([[tool_use("send", "s1", body=long_body)]])
    app = create_app(agent(model, toolkit), sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        status, events = await post_run(c, run_input("a1", user("send it")))
        assert status == 200, events
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        assert json.dumps({"body": long_body}) in interrupt["message"]

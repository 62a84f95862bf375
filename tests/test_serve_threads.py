"""Threads on the server: source of truth, one run at a time, disconnects, restarts, deps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
from starlette.requests import Request

from agentkit import ReActAgent
from agentkit.memory import check_memory_invariant
from agentkit.serve import create_app, current_deps
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._serve_agents import make_agent
from tests._serve_helpers import (
    run_events,
    run_input,
    running,
    sse_events,
    stream_into,
    types,
    user,
    wait_for,
)


def app_for(tmp_path: Path, factory: Any = make_agent, **kw: Any) -> Any:
    return create_app(factory, sessions=SQLiteSession(tmp_path / "t.db"), **kw)


async def stored_agent(tmp_path: Path, thread: str, owner: str = "local") -> ReActAgent:
    state = await SQLiteSession(tmp_path / "t.db").load_state(f"serve/{owner}/{thread}")
    assert state is not None
    agent = make_agent()
    agent.load_state_dict(state["agent"])
    check_memory_invariant(
        await agent.memory.get_memory(), [c["id"] for c in agent.pending_tool_calls]
    )
    return agent


async def test_client_history_is_reconciled_not_duplicated(tmp_path: Path) -> None:
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        first = await run_events(c, "/agui", run_input("h1", user("weather in Oslo", "m1")))
        history = first[-2]["messages"]  # what a client holds after the closing snapshot
        # Resending the whole conversation plus one new message adds only that message.
        second = await run_events(c, "/agui", run_input("h1", *history, user("hello", "m2")))
        assert second[-1]["outcome"] == {"type": "success"}
        # Streamed (provisional) ids sent back are recognised too, not refused.
        streamed = [
            {"id": e["messageId"], "role": "assistant", "content": "x"}
            for e in second
            if e["type"] == "TEXT_MESSAGE_START"
        ]
        third = await run_events(c, "/agui", run_input("h1", *streamed))
        assert third[-1]["outcome"] == {"type": "success"}
        messages = (await c.get("/threads/h1")).json()["messages"]
    user_ids = [m["id"] for m in messages if m["role"] == "user"]
    assert user_ids == ["m1", "m2"]  # nothing duplicated, nothing client-written kept
    assert len({m["id"] for m in messages}) == len(messages)


async def test_second_concurrent_run_gets_409_and_stop_keeps_memory_valid(tmp_path: Path) -> None:
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        events: list[dict[str, Any]] = []
        body = run_input("busy", user('call slow_task {"topic": "t"}'))
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream_into, c, "/agui", body, events)
            await wait_for(events, "CUSTOM")
            again = await c.post("/agui", json=run_input("busy", user("me too")))
            assert again.status_code == 409
            assert again.json()["error"]["code"] == "run_in_progress"
            resume = await c.post("/threads/busy/approvals", json={"x": True})
            assert resume.status_code == 409
            assert (await c.get("/threads/busy")).json()["running"] is True
            await c.post("/threads/busy/interrupt")
        assert events[-1]["outcome"] == {"type": "cancelled"}
    agent = await stored_agent(tmp_path, "busy")
    assert "me too" not in str([m.to_dict() for m in await agent.memory.get_memory()])


async def test_client_disconnect_does_not_stop_the_run(tmp_path: Path) -> None:
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        body = run_input("dc", user("weather in Paris and Cairo"))  # tools take 1 s each
        async with c.stream("POST", "/agui", json=body) as response:
            async for event in sse_events(response):
                if event["type"] == "TOOL_CALL_START":
                    break  # the page is closed mid-run
        # Re-attaching replays the run from RUN_STARTED and follows it to the end.
        async with c.stream("GET", "/threads/dc/events") as response:
            assert response.status_code == 200
            replay = [e async for e in sse_events(response)]
        assert types(replay)[0] == "RUN_STARTED"
        assert replay[-1]["outcome"] == {"type": "success"}
        thread = (await c.get("/threads/dc")).json()
        assert "Cairo: clear" in str(thread["messages"])
        assert (await c.get("/threads/dc/events")).status_code == 204  # idle now


async def test_restart_keeps_history_and_pending_approvals(tmp_path: Path) -> None:
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(
            c, "/agui", run_input("p1", user('call delete_files {"pattern": "a"}'))
        )
        call_id = events[-1]["outcome"]["interrupts"][0]["id"]
    # A brand-new app (a restarted server) on the same database.
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        thread = (await c.get("/threads/p1")).json()
        assert [p["toolCallId"] for p in thread["pending"]] == [call_id]
        assert thread["messages"][0]["content"] == 'call delete_files {"pattern": "a"}'
        bad = await c.post("/threads/p1/approvals", json={"call_nope": True})
        assert bad.status_code == 409 and bad.json()["error"]["code"] == "not_pending"
        async with c.stream("POST", "/threads/p1/approvals", json={call_id: "not today"}) as r:
            resumed = [e async for e in sse_events(r)]
        assert resumed[-1]["outcome"] == {"type": "success"}
        thread = (await c.get("/threads/p1")).json()
        assert thread["pending"] == []
        tool = next(m for m in thread["messages"] if m["role"] == "tool")
        assert tool["metadata"]["status"] == "error" and "not today" in tool["content"]
    await stored_agent(tmp_path, "p1")


async def test_thread_endpoints(tmp_path: Path) -> None:
    template = make_agent()  # an agent to copy per conversation works like a factory
    async with running(app_for(tmp_path, template)) as base, httpx2.AsyncClient(base_url=base) as c:
        created = await c.post("/threads")
        assert created.status_code == 201
        thread_id = created.json()["threadId"]
        assert len(thread_id) == 32 and int(thread_id, 16) >= 0  # 128 random bits, hex
        await run_events(c, "/agui", run_input(thread_id, user("weather in Lima")))
        listed = (await c.get("/threads")).json()["threads"]
        assert [t["threadId"] for t in listed] == [thread_id]
        assert listed[0]["title"] == "weather in Lima"
        idle = await c.post(f"/threads/{thread_id}/interrupt")
        assert idle.json()["status"] == "no_run" and idle.json()["worker"] is None
        assert (await c.delete(f"/threads/{thread_id}")).json()["deleted"] is True
        assert (await c.get(f"/threads/{thread_id}")).status_code == 404
        assert (await c.get("/threads")).json()["threads"] == []
        health = (await c.get("/healthz")).json()
        assert health == {"status": "ok", "activeRuns": 0}


async def test_thread_list_is_paged_metadata(tmp_path: Path) -> None:
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        made = [(await c.post("/threads")).json()["threadId"] for _ in range(5)]
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
            body = (await c.get("/threads", params=params)).json()
            assert len(body["threads"]) <= 2
            for t in body["threads"]:
                assert set(t) == {"threadId", "title", "updatedAt"}  # no messages, no state
            seen += [t["threadId"] for t in body["threads"]]
            pages += 1
            cursor = body["nextCursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(made) and pages == 3
        assert seen == list(reversed(made))  # most recently saved first
        bad = await c.get("/threads", params={"limit": "0"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"
        forged = await c.get("/threads", params={"cursor": "not-a-cursor"})
        assert forged.status_code == 400


async def test_deps_are_built_per_request_and_reach_tools(tmp_path: Path) -> None:
    seen: list[Any] = []

    async def who() -> str:
        """Who the run acts for."""
        seen.append(current_deps())
        return f"acting for {current_deps()['user']}"

    def factory() -> ReActAgent:
        toolkit = Toolkit()
        toolkit.register_tool_function(who)
        model = ScriptedModel([[tool_use("who")], "done"])
        return ReActAgent("a", "s", model, toolkit, print_hint=False)

    async def deps(request: Request) -> dict[str, Any]:
        return {"user": request.state.user, "agent": request.headers.get("user-agent")}

    tokens = {"tok-alice": "alice"}
    app = app_for(tmp_path, factory, auth_token=tokens, deps=deps)
    headers = {"Authorization": "Bearer tok-alice"}
    async with running(app) as base, httpx2.AsyncClient(base_url=base, headers=headers) as c:
        events = await run_events(c, "/agui", run_input("d1", user("who am I")))
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "acting for alice"
    assert seen[0]["user"] == "alice"
    assert current_deps() is None  # nothing leaks outside the run


async def test_server_shutdown_mid_run_saves_a_valid_thread(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        body = run_input("down", user('call slow_task {"topic": "t"}'))
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream_into, c, "/agui", body, events)
            await wait_for(events, "CUSTOM")
            tg.cancel_scope.cancel()  # the client goes away; the run goes on...
        assert (await c.get("/threads/down")).json()["running"] is True
    # ...until the server stops: the run is cancelled and its thread saved, shielded.
    agent = await stored_agent(tmp_path, "down")
    results = [b for m in await agent.memory.get_memory() for b in m.get_blocks("tool_result")]
    assert len(results) == 1 and results[0]["is_error"]
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        thread = (await c.get("/threads/down")).json()
        assert thread["running"] is False
        tool = next(m for m in thread["messages"] if m["role"] == "tool")
        assert tool["metadata"]["status"] == "interrupted"
        follow = await run_events(c, "/agui", run_input("down", user("just a quick summary")))
        assert follow[-1]["outcome"] == {"type": "success"}


async def test_new_message_instead_of_resume_denies_pending_calls(tmp_path: Path) -> None:
    async with running(app_for(tmp_path)) as base, httpx2.AsyncClient(base_url=base) as c:
        first = await run_events(
            c, "/agui", run_input("mv", user('call delete_files {"pattern": "b"}'))
        )
        call_id = first[-1]["outcome"]["interrupts"][0]["id"]
        both = run_input(
            "mv",
            user("forget it"),
            resume=[{"interruptId": call_id, "status": "resolved", "payload": True}],
        )
        refused = await c.post("/agui", json=both)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "resume_with_messages"
        moved_on = await run_events(c, "/agui", run_input("mv", user("forget it")))
        assert moved_on[-1]["outcome"] == {"type": "success"}
        result = next(e for e in moved_on if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == call_id
        assert result["metadata"]["status"] == "error" and "new message" in result["content"]
        assert (await c.get("/threads/mv")).json()["pending"] == []
    await stored_agent(tmp_path, "mv")


async def test_events_right_after_a_run_ended_is_204_and_the_thread_holds_the_run(
    tmp_path: Path,
) -> None:
    # RUN_FINISHED goes out only after the turn is committed, so the moment a client sees
    # the end, /events answers as it does a second later (204: no live run, never a replay
    # of the finished run) and the thread read next holds the whole run.
    def factory() -> ReActAgent:
        return ReActAgent("bot", "sys", ScriptedModel(["FINAL-ANSWER-XYZ"]), Toolkit())

    app = create_app(factory, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("t1", user("hi")))
        assert events[-1]["outcome"] == {"type": "success"}
        assert (await c.get("/threads/t1/events")).status_code == 204
        assert "FINAL-ANSWER-XYZ" in str((await c.get("/threads/t1")).json()["messages"])
        assert (await c.get("/threads/t1/events")).status_code == 204

"""Nested approvals: calls waiting inside agents used as tools pause the outer run.

They appear in the outer ``RunResult.pending`` as ``outer/inner`` (at any depth), each
decision reaches the agent holding the call, which runs it exactly once, and denying the
outer call cancels the inner run; the same after a JSON save/load and over AG-UI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentkit import Decision, ReActAgent, Toolkit, UsageError, check_memory_invariant
from agentkit.messages import Msg
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import FunctionModel, RequestInfo, ScriptedModel, tool_use
from tests._serve_helpers import run_events, run_input, sse_events, user

pytestmark = pytest.mark.anyio


def leaf(name: str, script: list[Any], calls: list[tuple[str, str]]) -> ReActAgent:
    """An agent whose ``delete`` tool needs approval and records each run of it."""
    toolkit = Toolkit()

    @toolkit.tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        calls.append((name, path))
        return f"deleted {path}"

    return ReActAgent(name, "You delete files.", ScriptedModel(script), toolkit)


def boss(script: list[Any], *helpers: ReActAgent) -> ReActAgent:
    toolkit = Toolkit()
    for helper in helpers:
        toolkit.register_tool(helper.as_tool())
    return ReActAgent("boss", "You delegate.", ScriptedModel(script), toolkit)


async def valid(*agents: ReActAgent) -> None:
    """Every tool call in each agent's memory has its result (or is pending)."""
    for agent in agents:
        pending = [c["id"] for c in agent.conversation.pending]
        check_memory_invariant(await agent.memory.get_memory(), pending)


async def results(agent: ReActAgent) -> dict[str, Any]:
    blocks = [b for m in await agent.memory.get_memory() for b in m.get_blocks("tool_result")]
    return {b["id"]: b for b in blocks}


async def test_one_level_pauses_the_outer_run_and_resumes_with_the_inner_answer() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="a")], "Deleted a."], calls)
    outer = boss([[tool_use("janitor", "c1", task="clean a")], "All clean."], janitor)

    paused = await outer.run("clean up")
    assert paused.stop_reason == "pending_approval"
    assert [(c.id, c.name, c.input) for c in paused.pending] == [("c1/t1", "delete", {"path": "a"})]
    assert calls == []
    await valid(outer, janitor)

    done = await outer.run(approvals={"c1/t1": True})
    assert done.stop_reason == "final" and done.output == "All clean."
    assert calls == [("janitor", "a")]  # exactly once
    assert (await results(outer))["c1"]["output"] == "Deleted a."
    assert outer.pending_tool_calls == [] and janitor.pending_tool_calls == []
    await valid(outer, janitor)
    with pytest.raises(UsageError, match="not waiting"):
        await outer.run(approvals={"c1/t1": True})


async def test_two_levels_use_the_ids_of_every_level() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="a")], "Deleted a."], calls)
    manager = boss([[tool_use("janitor", "m1", task="clean a")], "Janitor done."], janitor)
    manager.name = "manager"
    outer = boss([[tool_use("manager", "c1", task="get it cleaned")], "Done."], manager)

    paused = await outer.run("go")
    assert [c.id for c in paused.pending] == ["c1/m1/t1"]
    assert manager.pending_tool_calls[0]["id"] == "m1/t1"
    with pytest.raises(UsageError, match="waits on the calls inside it"):
        await outer.run(approvals={"c1/m1": True})  # approve what actually waits
    with pytest.raises(UsageError, match="cannot also have decisions"):
        await outer.run(approvals={"c1/m1": False, "c1/m1/t1": True})
    assert [c["id"] for c in outer.pending_tool_calls] == ["c1/m1/t1"]  # nothing changed

    done = await outer.run(approvals={"c1/m1/t1": True})
    assert done.output == "Done." and calls == [("janitor", "a")]
    assert (await results(outer))["c1"]["output"] == "Janitor done."
    await valid(outer, manager, janitor)


async def test_parallel_calls_of_one_agent_tool_pause_with_unique_ids() -> None:
    calls: list[tuple[str, str]] = []
    # Both delegations get the inner id t1: the outer ids keep them apart.
    janitor = leaf(
        "janitor",
        [
            [tool_use("delete", "t1", path="a")],
            [tool_use("delete", "t1", path="b")],
            "Deleted one.",
            "Deleted the other.",
        ],
        calls,
    )
    outer = boss(
        [[tool_use("janitor", "c1", task="a"), tool_use("janitor", "c2", task="b")], "Both."],
        janitor,
    )
    paused = await outer.run("clean both")
    assert sorted(c.id for c in paused.pending) == ["c1/t1", "c2/t1"]
    assert sorted(c.input["path"] for c in paused.pending) == ["a", "b"]

    done = await outer.run(approvals={"c1/t1": True, "c2/t1": True})
    assert done.output == "Both."
    assert sorted(calls) == [("janitor", "a"), ("janitor", "b")]  # each exactly once
    answers = await results(outer)
    assert {answers["c1"]["output"], answers["c2"]["output"]} == {
        "Deleted one.",
        "Deleted the other.",
    }
    await valid(outer, janitor)


async def test_partial_decisions_leave_the_rest_pending() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf(
        "janitor",
        [[tool_use("delete", "t1", path="a"), tool_use("delete", "t2", path="b")], "Half done."],
        calls,
    )
    archivist = leaf("archivist", [[tool_use("delete", "t1", path="old")], "Archived."], calls)
    outer = boss(
        [[tool_use("janitor", "c1", task="a, b"), tool_use("archivist", "c2", task="old")], "Ok."],
        janitor,
        archivist,
    )
    paused = await outer.run("go")
    assert sorted(c.id for c in paused.pending) == ["c1/t1", "c1/t2", "c2/t1"]

    # One inner call approved: the rest still waits, at both levels.
    step = await outer.run(approvals={"c1/t1": True})
    assert step.stop_reason == "pending_approval"
    assert sorted(c.id for c in step.pending) == ["c1/t2", "c2/t1"]
    assert calls == [("janitor", "a")]
    await valid(outer, janitor, archivist)

    step = await outer.run(approvals={"c1/t2": Decision(False, reason="keep b")})
    assert [c.id for c in step.pending] == ["c2/t1"]
    denied = (await results(janitor))["t2"]
    assert denied["is_error"] and "keep b" in denied["output"]
    assert (await results(outer))["c1"]["output"] == "Half done."

    done = await outer.run(approvals={"c2/t1": True})
    assert done.output == "Ok."
    assert calls == [("janitor", "a"), ("archivist", "old")]
    await valid(outer, janitor, archivist)


async def test_an_approval_with_input_runs_the_call_with_those_arguments() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="/")], "Deleted tmp."], calls)
    outer = boss([[tool_use("janitor", "c1", task="clean")], "Done."], janitor)
    await outer.run("go")
    done = await outer.run(approvals={"c1/t1": Decision(True, input={"path": "/tmp/x"})})
    assert done.output == "Done." and calls == [("janitor", "/tmp/x")]
    assert (await results(janitor))["t1"]["output"] == "deleted /tmp/x"
    await valid(outer, janitor)


async def test_an_own_call_approved_with_input_runs_with_those_arguments() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="/")], "Done."], calls)
    await janitor.run("go")
    await janitor.run(approvals={"t1": Decision(True, input={"path": "b"})})
    assert calls == [("janitor", "b")]
    with pytest.raises(UsageError, match="must be a dict"):
        await janitor.run(approvals={"t1": Decision(True, input=["no"])})  # type: ignore[arg-type]


async def test_denying_the_outer_call_cancels_the_inner_run() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf(
        "janitor",
        [[tool_use("delete", "t1", path="a"), tool_use("delete", "t2", path="b")], "unused"],
        calls,
    )
    outer = boss([[tool_use("janitor", "c1", task="clean")], "Cancelled it."], janitor)
    await outer.run("go")
    with pytest.raises(UsageError, match="cannot also have decisions"):
        await outer.run(approvals={"c1": False, "c1/t1": True})

    done = await outer.run(approvals={"c1": Decision(False, reason="not now")})
    assert done.output == "Cancelled it." and calls == []
    outer_result = (await results(outer))["c1"]
    assert outer_result["is_error"] and "not now" in outer_result["output"]
    inner_results = await results(janitor)
    assert set(inner_results) == {"t1", "t2"}  # every inner call answered, none ran
    assert janitor.pending_tool_calls == [] and outer.pending_tool_calls == []
    await valid(outer, janitor)


async def test_a_new_message_cancels_the_calls_waiting_inside() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="a")], "Listed the files."], calls)
    outer = boss(
        [
            [tool_use("janitor", "c1", task="delete a")],
            [tool_use("janitor", "c2", task="list files")],
            "Here they are.",
        ],
        janitor,
    )
    await outer.run("delete a")
    done = await outer.run("never mind, list the files")
    assert done.output == "Here they are." and calls == []
    assert "new message" in (await results(outer))["c1"]["output"]
    assert "t1" in await results(janitor)  # the inner call was answered, never run
    # The inner agent itself took the next task (no copy): it remembers both.
    texts = [m.get_text() for m in await janitor.memory.get_memory()]
    assert "delete a" in texts and "list files" in texts
    await valid(outer, janitor)


async def test_a_pause_survives_a_json_save_and_load_into_new_agents() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="a")]], calls)
    manager = boss([[tool_use("janitor", "m1", task="clean a")]], janitor)
    manager.name = "manager"
    outer = boss([[tool_use("manager", "c1", task="clean")]], manager)
    paused = await outer.run("go")
    state = json.loads(json.dumps(outer.state_dict()))
    assert "nested_calls" in state

    # A new process: fresh agents, only the outer state loaded.
    calls2: list[tuple[str, str]] = []
    janitor2 = leaf("janitor", ["Deleted a."], calls2)
    manager2 = boss(["Janitor done."], janitor2)
    manager2.name = "manager"
    outer2 = boss(["Done."], manager2)
    outer2.load_state_dict(state)
    assert [c["id"] for c in outer2.pending_tool_calls] == [c.id for c in paused.pending]
    assert outer2.state_dict() == state  # stable: saving again changes nothing

    done = await outer2.run(approvals={"c1/m1/t1": True})
    assert done.output == "Done." and calls2 == [("janitor", "a")] and calls == []
    assert (await results(outer2))["c1"]["output"] == "Janitor done."
    await valid(outer2, manager2, janitor2)


async def test_a_denial_after_load_cancels_the_restored_inner_run() -> None:
    calls: list[tuple[str, str]] = []
    janitor = leaf("janitor", [[tool_use("delete", "t1", path="a")]], calls)
    outer = boss([[tool_use("janitor", "c1", task="clean")]], janitor)
    await outer.run("go")
    state = json.loads(json.dumps(outer.state_dict()))
    janitor2 = leaf("janitor", [], calls)
    outer2 = boss(["Fine."], janitor2)
    outer2.load_state_dict(state)
    done = await outer2.run(approvals={"c1": False})
    assert done.output == "Fine." and calls == []
    assert "t1" in await results(janitor2)
    await valid(outer2, janitor2)


async def test_a_corrupt_nested_state_is_refused_on_load() -> None:
    calls: list[tuple[str, str]] = []
    outer = boss(
        [[tool_use("janitor", "c1", task="x")]],
        leaf("janitor", [[tool_use("delete", "t1", path="a")]], calls),
    )
    await outer.run("go")
    state = json.loads(json.dumps(outer.state_dict()))
    from agentkit.exceptions import StateError

    bad = {**state, "nested_calls": {"nope": state["nested_calls"]["c1"]}}
    fresh = boss([], leaf("janitor", [], calls))
    with pytest.raises(StateError, match="not pending"):
        fresh.load_state_dict(bad)
    assert await fresh.memory.get_memory() == []  # nothing was loaded


# -- over AG-UI ----------------------------------------------------------------------------
def _served_factory(calls: list[tuple[str, str]]) -> Any:
    def answered(messages: list[Msg]) -> bool:
        return bool(messages) and bool(messages[-1].get_blocks("tool_result"))

    def inner_fn(messages: list[Msg], info: RequestInfo) -> Any:
        return "Deleted a." if answered(messages) else [tool_use("delete", "t1", path="a")]

    def outer_fn(messages: list[Msg], info: RequestInfo) -> Any:
        return "All clean." if answered(messages) else [tool_use("janitor", "c1", task="a")]

    def factory() -> ReActAgent:
        toolkit = Toolkit()

        @toolkit.tool(requires_approval=True)
        def delete(path: str) -> str:
            """Delete a file."""
            calls.append(("janitor", path))
            return f"deleted {path}"

        janitor = ReActAgent("janitor", "You delete.", FunctionModel(inner_fn), toolkit)
        outer_tools = Toolkit()
        outer_tools.register_tool(janitor.as_tool())
        return ReActAgent("boss", "You delegate.", FunctionModel(outer_fn), outer_tools)

    return factory


async def test_nested_calls_are_interrupts_of_a_served_thread(tmp_path: Path) -> None:
    from tests._serve_helpers import running

    calls: list[tuple[str, str]] = []
    app = create_app(_served_factory(calls), sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        events = await run_events(client, "/agui", run_input("n1", user("clean up")))
        outcome = events[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        assert [i["id"] for i in outcome["interrupts"]] == ["c1/t1"]
        thread = (await client.get("/threads/n1")).json()
        assert [p["toolCallId"] for p in thread["pending"]] == ["c1/t1"]
        async with client.stream("POST", "/threads/n1/approvals", json={"c1/t1": True}) as r:
            resumed = [e async for e in sse_events(r)]
        assert resumed[-1]["outcome"] == {"type": "success"}
        assert calls == [("janitor", "a")]
        thread = (await client.get("/threads/n1")).json()
        assert thread["pending"] == []
        assert "All clean." in str(thread["messages"])


async def test_a_nested_call_resumes_through_the_agui_resume(tmp_path: Path) -> None:
    from tests._serve_helpers import running

    calls: list[tuple[str, str]] = []
    app = create_app(_served_factory(calls), sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        await run_events(client, "/agui", run_input("n2", user("clean up")))
        payload = {"approved": True, "input": {"path": "b"}}
        resume = [{"interruptId": "c1/t1", "status": "resolved", "payload": payload}]
        events = await run_events(client, "/agui", run_input("n2", resume=resume))
        assert events[-1]["outcome"] == {"type": "success"}
        assert calls == [("janitor", "b")]  # the reviewer's arguments, exactly once
        bad = {"c1/t1": {"approved": False, "input": {"path": "c"}}}
        refused = await client.post("/threads/n2/approvals", json=bad)
        assert refused.status_code == 400

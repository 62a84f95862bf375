"""Human approval of tool calls, and the agent's state_dict / load_state_dict."""

from __future__ import annotations

import json

import pytest

from agentkit.agent._state import SCHEMA_VERSION
from agentkit.events import ApprovalRequested
from agentkit.exceptions import StateError
from agentkit.memory import InMemoryMemory
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, agent_for, checked_memory, results_of, shape


def _turn():
    return [
        text("Checking."),
        tool_use("guarded", "g1", label="g1"),
        tool_use("sleep", "s1", label="s1"),
        tool_use("guarded", "g2", label="g2"),
    ]


async def test_pending_calls_wait_while_siblings_run():
    rec = Recorder()
    model = ScriptedModel([_turn()])
    agent = agent_for(model, rec)
    reply = await agent("go")
    assert reply.get_text() == "Checking."
    assert reply.metadata["pending_tool_calls"] == [
        {"id": "g1", "name": "guarded", "input": {"label": "g1"}},
        {"id": "g2", "name": "guarded", "input": {"label": "g2"}},
    ]
    assert rec.calls == {"s1": 1}
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:go"]),
        ("assistant", ["text:Checking.", "use:g1", "use:s1", "use:g2"]),
        ("user", ["result:s1"]),
    ]


async def test_resume_with_partial_approvals_keeps_the_rest_pending():
    rec = Recorder()
    model = ScriptedModel([_turn(), "All done."])
    agent = agent_for(model, rec)
    await agent("go")
    reply = await agent.resume({"g1": True})
    assert [c["id"] for c in reply.metadata["pending_tool_calls"]] == ["g2"]
    assert model.calls == 1  # no model call while calls are pending
    assert rec.calls == {"s1": 1, "g1": 1}
    again = await agent.resume({})  # nothing decided: same pending calls, no model call
    assert [c["id"] for c in again.metadata["pending_tool_calls"]] == ["g2"]
    assert model.calls == 1
    reply = await agent.resume({"g2": "not today"})
    assert reply.get_text() == "All done."
    assert "pending_tool_calls" not in reply.metadata
    memory = await checked_memory(agent)
    results = results_of(memory)
    assert results["g1"] == ("guarded g1", False)
    assert results["g2"] == ("The user denied this tool call: not today", True)
    assert rec.calls == {"s1": 1, "g1": 1}
    assert shape(memory)[-1] == ("assistant", ["text:All done."])


async def test_denied_without_reason_and_unknown_ids():
    agent = agent_for(ScriptedModel([_turn(), "ok"]))
    await agent("go")
    with pytest.raises(ValueError, match="nope"):
        await agent.resume({"nope": True})
    with pytest.raises(ValueError, match="True, False, a reason or a Decision"):
        await agent.resume({"g1": 1})  # type: ignore[dict-item]
    await agent.resume({"g1": False, "g2": False})
    results = results_of(await checked_memory(agent))
    assert results["g1"] == ("The user denied this tool call.", True)


async def test_new_message_while_pending_denies_the_pending_calls():
    rec = Recorder()
    model = ScriptedModel([_turn(), "Fine, something else."])
    agent = agent_for(model, rec)
    await agent("go")
    reply = await agent("Actually, forget it.")
    assert reply.get_text() == "Fine, something else."
    memory = await checked_memory(agent)
    assert shape(memory)[3:] == [
        ("user", ["result:g1!", "result:g2!"]),
        ("user", ["text:Actually, forget it."]),
        ("assistant", ["text:Fine, something else."]),
    ]
    assert "sent a new message instead" in results_of(memory)["g1"][0]
    assert rec.calls == {"s1": 1}


async def test_approval_policy_auto_approves_some_calls():
    rec = Recorder()
    calls = [tool_use("guarded", "ok", label="ok"), tool_use("guarded", "ask", label="ask")]

    async def policy(call) -> bool:
        return call["input"]["label"] == "ok"

    agent = agent_for(ScriptedModel([calls, "done"]), rec, approval_policy=policy)
    reply = await agent("go")
    assert [c["id"] for c in reply.metadata["pending_tool_calls"]] == ["ask"]
    assert rec.calls == {"ok": 1}
    sync_agent = agent_for(ScriptedModel([calls, "done"]), approval_policy=lambda call: True)
    assert "pending_tool_calls" not in (await sync_agent("go")).metadata


async def test_approval_required_event_and_agent_call_without_message():
    agent = agent_for(ScriptedModel([_turn()]))
    events = []
    async with agent.stream("go") as stream:
        async for event in stream:
            events.append(event)
    assert isinstance(events[-2], ApprovalRequested)
    assert [c["id"] for c in events[-2].calls] == ["g1", "g2"]
    reply = await agent()  # continuing without deciding reports the pending calls again
    assert [c["id"] for c in reply.metadata["pending_tool_calls"]] == ["g1", "g2"]


async def test_state_round_trips_while_pending_and_resumes_elsewhere():
    rec = Recorder()
    model = ScriptedModel([_turn(), "Resumed elsewhere."])
    agent = agent_for(model, rec)
    await agent("go")
    await agent.observe(Msg("carol", "note while pending", "user"))
    state = json.loads(json.dumps(agent.state_dict()))
    assert state["schema_version"] == SCHEMA_VERSION
    assert [c["id"] for c in state["pending_tool_calls"]] == ["g1", "g2"]
    assert state["iteration"] == 1
    assert "toolkit" in state
    other = agent_for(model, rec, memory=InMemoryMemory())
    other.load_state_dict(state)
    assert other.state_dict() == state
    reply = await other.resume({"g1": True, "g2": True})
    assert reply.get_text() == "Resumed elsewhere."
    memory = await checked_memory(other)
    assert rec.calls == {"s1": 1, "g1": 1, "g2": 1}
    assert shape(memory)[3:] == [
        ("user", ["result:g1", "result:g2"]),
        ("user", ["text:note while pending"]),
        ("assistant", ["text:Resumed elsewhere."]),
    ]
    assert model.requests[-1].messages[-1].get_text() == "note while pending"


async def test_load_state_dict_validates():
    agent = agent_for(ScriptedModel(["hi"]))
    await agent("hello")
    good = agent.state_dict()
    with pytest.raises(StateError, match=f"schema_version {SCHEMA_VERSION + 1}"):
        agent.load_state_dict({**good, "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(StateError, match="must be a dict"):
        agent.load_state_dict([])  # type: ignore[arg-type]
    orphan = {
        "type": "tool_result",
        "id": "zz",
        "name": "add",
        "output": "1",
    }
    bad_memory = {"messages": [*good["memory"]["messages"], Msg("bot", [orphan], "user").to_dict()]}
    with pytest.raises(StateError, match="'zz'"):
        agent.load_state_dict({**good, "memory": bad_memory})
    with pytest.raises(StateError, match="pending_tool_calls"):
        agent.load_state_dict({**good, "pending_tool_calls": [{"type": "text", "text": "x"}]})
    with pytest.raises(StateError, match="no tool_use"):
        agent.load_state_dict({**good, "pending_tool_calls": [tool_use("add", "ghost", a=1, b=1)]})
    # Nothing was replaced by the failed loads.
    assert agent.state_dict()["memory"] == good["memory"]


async def test_state_dict_from_hooks():
    from agentkit.exceptions import AgentBusyError

    snapshots = []
    errors = []

    def autosave(agent, kwargs, reply):
        snapshots.append(json.dumps(agent.state_dict()))

    def mid_step(agent, kwargs):
        try:
            agent.state_dict()
        except AgentBusyError as exc:
            errors.append(str(exc))

    agent = agent_for(ScriptedModel([[tool_use("add", "c1", a=1, b=1)], "two"]))
    agent.register_hook("post_reply", "autosave", autosave)
    agent.register_hook("pre_acting", "mid", mid_step)
    await agent("go")
    assert len(snapshots) == 1 and len(errors) == 1 and "mid-step" in errors[0]
    restored = agent_for(ScriptedModel([]))
    restored.load_state_dict(json.loads(snapshots[0]))
    assert [m.get_text() for m in await checked_memory(restored)][-1] == "two"


async def test_denied_calls_emit_tool_result_events():
    from agentkit.agent import EventStream
    from agentkit.events import ToolResult

    rec = Recorder()
    model = ScriptedModel([_turn(), "All done."])
    agent = agent_for(model, rec)
    await agent("go")
    async with EventStream(agent, lambda: agent.resume({"g1": False, "g2": "nope"})) as events:
        results = [e async for e in events if isinstance(e, ToolResult)]
    assert [(e.tool_call_id, e.result.get("is_error")) for e in results] == [
        ("g1", True),
        ("g2", True),
    ]
    assert "nope" in str(results[1].result["output"])
    assert rec.calls == {"s1": 1}

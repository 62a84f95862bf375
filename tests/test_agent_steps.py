"""The loop's steps, run one by one without a ReActAgent: each returns the next step."""

from __future__ import annotations

import json
import pathlib

import pytest

from agentkit import UsageLimits
from agentkit.agent import _loop as loop
from agentkit.agent._conversation import Conversation
from agentkit.agent._setup import RunSetup
from agentkit.agent._state import MIGRATIONS, SCHEMA_VERSION, Run, migrate_state
from agentkit.agent._steps import Execute, Finish, Reason, Settle, Summarize, Triage
from agentkit.exceptions import StateError
from agentkit.memory import InMemoryMemory, check_memory_invariant
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel, text, tool_use
from tests._agent_helpers import Recorder, make_toolkit

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _parts(model: ScriptedModel, **kwargs: object) -> tuple[RunSetup, Conversation, Run]:
    system = Msg("system", "You are a test bot.", "system")
    setup = RunSetup(
        name="bot",
        model=model,
        system=lambda: system,
        toolkit=make_toolkit(Recorder()),
        **kwargs,  # type: ignore[arg-type]
    )
    return setup, Conversation(InMemoryMemory()), Run(None, None)


async def test_each_step_returns_the_next() -> None:
    model = ScriptedModel([[text("Adding."), tool_use("add", "c1", a=1, b=2)], "Three."])
    setup, conv, run = _parts(model)
    step = await loop.first_step(setup, conv, run, [Msg("user", "1+2?", "user")])
    assert step == Reason()
    step = await loop.run_step(setup, conv, run, step)
    assert isinstance(step, Triage) and step.assistant.get_text() == "Adding."
    assert run.batch is not None  # memory holds the call; the run answers for it
    step = await loop.run_step(setup, conv, run, step)
    assert isinstance(step, Execute) and step.indexes == (0,)
    step = await loop.run_step(setup, conv, run, step)
    assert step == Reason() and run.batch is None
    step = await loop.run_step(setup, conv, run, step)
    assert isinstance(step, Finish) and step.reply.get_text() == "Three."
    messages = await conv.memory.get_memory()
    check_memory_invariant(messages)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert run.counts.requests == 2 and run.counts.tool_calls == 1


async def test_max_iters_turns_reason_into_summarize() -> None:
    setup, conv, run = _parts(ScriptedModel(["Summary."]), max_iters=1)
    run.iteration = 1
    step = await loop.run_step(setup, conv, run, Reason())
    assert step == Summarize()
    step = await loop.run_step(setup, conv, run, step)
    assert isinstance(step, Finish)
    assert step.reply.metadata is not None and step.reply.metadata["max_iters_reached"]


async def test_approval_steps_set_calls_aside_and_settle_them() -> None:
    model = ScriptedModel([tool_use("guarded", "g1", label="a"), "ok"])
    setup, conv, run = _parts(model)
    await loop.first_step(setup, conv, run, [Msg("user", "go", "user")])
    reply = await loop.drive(setup, conv, run, Reason())
    assert [c["id"] for c in conv.pending] == ["g1"]
    assert reply.metadata is not None and reply.metadata["pending_tool_calls"]
    run2 = Run(None, None)
    step = await loop.run_step(setup, conv, run2, Settle((("g1", True),)))
    assert step == Execute((0,)) and conv.pending == []
    assert run2.approved == {"g1"}
    assert await loop.drive(setup, conv, run2, step) is not None
    check_memory_invariant(await conv.memory.get_memory())


async def test_the_driver_checks_limits_between_steps() -> None:
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2), tool_use("add", "c2", a=2, b=2)]])
    setup, conv, run = _parts(model, limits=UsageLimits(max_tool_calls=1))
    assert loop.limit_before(setup, run, Reason()) is None
    assert loop.limit_before(setup, run, Execute((0, 1))) == "max_tool_calls"
    await loop.first_step(setup, conv, run, [Msg("user", "go", "user")])
    reply = await loop.drive(setup, conv, run, Reason())
    assert run.usage_limit == "max_tool_calls" and run.counts.tool_calls == 0
    assert reply.metadata is not None and reply.metadata["usage_limit"] == "max_tool_calls"
    check_memory_invariant(await conv.memory.get_memory())


# -- saved states from older versions ---------------------------------------------------
@pytest.mark.parametrize("path", sorted((FIXTURES / "state_v1").glob("*.json")), ids=str)
def test_v1_states_load_through_the_migration(path: pathlib.Path) -> None:
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 1
    state = migrate_state(raw)
    assert state["schema_version"] == SCHEMA_VERSION
    conv = Conversation(InMemoryMemory())
    conv.load_state_dict(raw)
    messages = conv.memory.state_dict()["messages"]
    assert messages  # the conversation came back
    check_memory_invariant([Msg.from_dict(m) for m in messages], [c["id"] for c in conv.pending])
    if path.stem.startswith("paused"):
        assert conv.pending and conv.iteration >= 1
    if path.stem == "paused_structured":
        assert conv.paused_output_name is not None
        assert conv.paused_output_name.endswith("Trip")


async def test_v1_paused_approval_resumes_in_this_version() -> None:
    from agentkit import ReActAgent

    raw = json.loads((FIXTURES / "state_v1" / "paused_approval.json").read_text())
    rec = Recorder()
    agent = ReActAgent("bot", "sys", ScriptedModel(["All done."]), make_toolkit(rec))
    agent.load_state_dict(raw)
    result = await agent.run(approvals={"g1": True})
    assert result.output == "All done." and rec.calls == {"x": 1}
    texts = [m.get_text() for m in await agent.memory.get_memory()]
    assert "a note while pending" in texts  # the deferred message was kept and stored


def test_every_schema_version_has_its_migration_and_fixtures() -> None:
    for version in range(1, SCHEMA_VERSION):
        assert version in MIGRATIONS, f"no migration from schema_version {version}"
    for version in range(1, SCHEMA_VERSION + 1):
        if version < SCHEMA_VERSION or version == 1:
            assert list((FIXTURES / f"state_v{version}").glob("*.json")), version
    with pytest.raises(StateError, match="schema_version 99"):
        migrate_state({"schema_version": 99, "memory": {}})

"""Steering: ``agent.steer(msg)`` queues a user message into the live run.

Every test synchronises on events: a steer is queued the moment ``agent.steer`` is called
(before its first await), so a task that sets an event and then calls ``steer`` has its
message queued before anything waiting on that event runs again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from agentkit import check_memory_invariant
from agentkit.agent import ReActAgent, UsageLimits
from agentkit.exceptions import StateError, UsageError
from agentkit.messages import Msg
from agentkit.testing import FunctionModel, RequestInfo, ScriptedModel, tool_use
from agentkit.tools import Toolkit


def _texts(messages: list[Msg]) -> list[tuple[str, str]]:
    """``(role, text)`` of the messages with text (tool calls and results show as kinds)."""
    out = []
    for m in messages:
        kinds = {b["type"] for b in m.get_content_blocks()}
        label = m.get_text() or ",".join(sorted(kinds))
        out.append((m.role, label))
    return out


async def _valid(agent: ReActAgent[Any, Any]) -> list[Msg]:
    messages = await agent.memory.get_memory()
    check_memory_invariant(messages, [c["id"] for c in agent.pending_tool_calls])
    return messages


class Gate:
    """A tool (``wait``) that blocks until steers were queued; and the steering task."""

    def __init__(self, agent: ReActAgent[Any, Any]) -> None:
        self.agent = agent
        self.started = anyio.Event()  # the tool (or model call) is running
        self.queued = anyio.Event()  # the steers are queued: let it finish
        self.outcomes: list[str] = []

    async def wait(self) -> str:
        """Wait for the test.

        Returns:
            A fixed answer.
        """
        self.started.set()
        with anyio.fail_after(10):
            await self.queued.wait()
        return "waited"

    async def steer(self, *texts: str) -> None:
        """Queue ``texts`` as steers (in order), then release the gate; record outcomes."""
        outcomes: list[Any] = [None] * len(texts)

        async def one(i: int) -> None:
            if i == len(texts) - 1:
                # Wakes the gate only once this task awaits: by then every steer is queued.
                self.queued.set()
            outcomes[i] = await self.agent.steer(texts[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(texts)):
                tg.start_soon(one, i)  # tasks start in order: steers queue in order
        self.outcomes.extend(outcomes)


def _agent(model: Any, gate_holder: list[Gate] | None = None, **kwargs: Any) -> tuple[Any, Gate]:
    toolkit = Toolkit()
    agent: ReActAgent[Any, Any] = ReActAgent("bot", "sys", model, toolkit, **kwargs)
    gate = Gate(agent)
    toolkit.register_tool_function(gate.wait)

    async def guarded(city: str) -> str:
        """Needs approval.

        Args:
            city: A city.
        """
        return f"guarded {city}"

    toolkit.register_tool_function(guarded, requires_approval=True)
    return agent, gate


async def _run_and_steer(
    agent: ReActAgent[Any, Any], gate: Gate, start: Callable[[], Awaitable[Any]], *texts: str
) -> Any:
    results: list[Any] = []

    async def run() -> None:
        results.append(await start())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await gate.started.wait()
        tg.start_soon(gate.steer, *texts)
    return results[0]


async def test_steer_during_a_tool_call_is_stored_before_the_next_model_request():
    model = ScriptedModel([tool_use("wait", "c1"), "done"])
    agent, gate = _agent(model)
    result = await _run_and_steer(agent, gate, lambda: agent.run("go"), "also Lyon", "and Nice")
    assert gate.outcomes == ["next_request", "next_request"]
    assert result.output == "done"
    # The second request sees the call's result, then both steers, in the order sent.
    assert _texts(model.requests[1].messages)[-4:] == [
        ("assistant", "tool_use"),
        ("user", "tool_result"),
        ("user", "also Lyon"),
        ("user", "and Nice"),
    ]
    assert [m.get_text() for m in result.new_messages][-3:] == ["also Lyon", "and Nice", "done"]
    await _valid(agent)


@pytest.mark.parametrize("stream", [False, True])
async def test_steer_while_the_final_answer_is_produced_gets_a_follow_up_turn(stream):
    agent: Any = None
    gate: Any = None

    async def answer(messages: list[Msg], info: RequestInfo) -> str:
        last = messages[-1].get_text()
        if last == "go":
            gate.started.set()
            with anyio.fail_after(10):
                await gate.queued.wait()
            return "Paris is sunny."
        return f"About {last!r}: Lyon is cloudy."

    agent, gate = _agent(FunctionModel(answer, stream=stream))
    result = await _run_and_steer(agent, gate, lambda: agent.run("go"), "and Lyon?")
    assert gate.outcomes == ["follow_up"]
    assert result.stop_reason == "final"
    assert result.output == "About 'and Lyon?': Lyon is cloudy."
    assert _texts(await _valid(agent)) == [
        ("user", "go"),
        ("assistant", "Paris is sunny."),
        ("user", "and Lyon?"),
        ("assistant", "About 'and Lyon?': Lyon is cloudy."),
    ]


async def test_steer_while_an_approval_waits_is_delivered_when_the_run_resumes():
    model = ScriptedModel([tool_use("guarded", "c1", city="Paris"), "done"])
    agent, _ = _agent(model)
    paused = await agent.run("go")
    assert paused.stop_reason == "pending_approval"
    assert await agent.steer("also Lyon") == "next_request"
    # Kept with the state: a worker that loads the thread resumes with it.
    restored, _ = _agent(model)
    restored.load_state_dict(agent.state_dict())
    await _valid(restored)
    result = await restored.run(approvals={"c1": True})
    assert result.output == "done"
    assert _texts(model.requests[1].messages)[-3:] == [
        ("assistant", "tool_use"),
        ("user", "tool_result"),
        ("user", "also Lyon"),
    ]
    await _valid(restored)


async def test_steer_without_a_run_says_so():
    agent, _ = _agent(ScriptedModel(["hi"]))
    with pytest.raises(StateError, match="no run in progress"):
        await agent.steer("hello?")
    await agent.run("go")
    with pytest.raises(StateError, match="no run in progress"):
        await agent.steer("too late")
    with pytest.raises(UsageError):
        await agent.steer([])
    assert [m.get_text() for m in await _valid(agent)] == ["go", "hi"]


async def test_steer_in_a_run_that_is_interrupted_is_kept_for_the_next_request():
    model = ScriptedModel([tool_use("wait", "c1"), "next answer"])
    agent, gate = _agent(model)
    outcome: list[str] = []

    async def run() -> None:
        await agent.run("go")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await gate.started.wait()

        steering = anyio.Event()

        async def steer() -> None:
            steering.set()  # the waiter below runs again once this task awaits: queued
            outcome.append(await agent.steer("also Lyon"))

        tg.start_soon(steer)
        await steering.wait()
        assert await agent.interrupt() is True
    assert outcome == ["next_request"]
    messages = await _valid(agent)
    assert messages[-1].get_text() == "also Lyon"
    await agent.run(None)
    assert model.requests[1].messages[-1].get_text() == "also Lyon"


async def test_steer_when_a_usage_limit_ends_the_run_is_kept_and_not_answered():
    model = ScriptedModel([tool_use("wait", "c1"), "never"])
    agent, gate = _agent(model, usage_limits=UsageLimits(max_requests=1))
    result = await _run_and_steer(agent, gate, lambda: agent.run("go"), "also Lyon")
    assert result.stop_reason == "usage_limit"
    assert gate.outcomes == ["next_request"]
    assert len(model.requests) == 1
    assert (await _valid(agent))[-1].get_text() == "also Lyon"


async def test_steer_session_reaches_a_run_held_in_another_process(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from agentkit.session import SQLiteSession, steer_session

    root = Path(__file__).resolve().parent.parent
    db = tmp_path / "s.db"
    async with SQLiteSession(db) as store:
        assert await steer_session(store, "chat-1", "nobody holds it") == "no_run"
        proc = subprocess.Popen(
            [sys.executable, str(root / "tests" / "_steer_worker.py"), str(db), "chat-1"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        try:
            assert proc.stdout is not None
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
            assert line.strip() == "running"
            assert await steer_session(store, "chat-1", "also Lyon") == "next_request"
            done = json.loads(await anyio.to_thread.run_sync(proc.stdout.readline))
            assert done == {"second": "also Lyon", "reply": "done", "ok": True}
        finally:
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()

"""Adversarial QA of the agent loop: bad model output, tool-side BaseExceptions, late interrupts.

Every test ends by checking the memory invariant and a JSON round trip of the state.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
from typing import Any

import anyio
import pytest
from _agent_helpers import SignalModel, agent_for, checked_memory, results_of, shape
from _wire_server import Reply, Stream, WireServer, openai_chunks, openai_completion

from agentkit.agent import ReActAgent
from agentkit.exceptions import (
    AgentBusyError,
    MemoryInvariantError,
    ModelAPIError,
    RateLimitError,
    StateError,
)
from agentkit.memory import InMemoryMemory
from agentkit.messages import Msg
from agentkit.models._base import ChatResponse
from agentkit.testing import ScriptedModel, text, tool_use
from agentkit.tools import Toolkit


async def round_trip(agent: ReActAgent) -> ReActAgent:
    """Check the invariant, then load the JSON state into a fresh agent and check again."""
    await checked_memory(agent)
    fresh = agent_for(ScriptedModel([]))
    fresh.load_state_dict(json.loads(json.dumps(agent.state_dict())))
    await checked_memory(fresh)
    return fresh


def _ids(messages: list[Msg]) -> list[str]:
    return [b["id"] for m in messages for b in m.get_blocks("tool_use")]


# -- duplicate tool-call ids in one turn ---------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
async def test_duplicate_call_ids_in_one_turn_get_distinct_ids(stream: bool) -> None:
    model = ScriptedModel(
        [[tool_use("add", "c1", a=1, b=2), tool_use("add", "c1", a=3, b=4)], "done"],
        stream=stream,
    )
    agent = agent_for(model)
    reply = await agent("add twice")
    assert reply.get_text() == "done"
    memory = await checked_memory(agent)
    assert _ids(memory) == ["c1", "c1_2"]
    assert results_of(memory) == {"c1": ("3", False), "c1_2": ("7", False)}
    await round_trip(agent)


@pytest.mark.parametrize("stream", [False, True])
async def test_duplicate_call_ids_through_the_openai_adapter(stream: bool) -> None:
    from agentkit.models._openai import OpenAIChatModel

    calls = [("c1", "add", '{"a": 1, "b": 2}'), ("c1", "add", '{"a": 3, "b": 4}')]
    if stream:
        script: list[Reply | Stream] = [
            Stream(openai_chunks(tool_calls=calls)),
            Stream(openai_chunks(text="done")),
        ]
    else:
        script = [
            Reply(json=openai_completion(tool_calls=calls)),
            Reply(json=openai_completion(text="done")),
        ]
    async with WireServer() as server:
        server.script(*script)
        model = OpenAIChatModel(
            "gpt", api_key="k", base_url=server.openai_url, stream=stream, max_retries=0
        )
        agent = agent_for(model)
        try:
            assert (await agent("go")).get_text() == "done"
        finally:
            await model.aclose()
        sent = server.requests[1].json["messages"]
    await round_trip(agent)
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["c1", "c1_2"]
    assert [m["tool_call_id"] for m in sent[3:]] == ["c1", "c1_2"]
    assert [m["content"] for m in sent[3:]] == ["3", "7"]


async def test_duplicate_ids_in_an_interrupted_stream_stay_distinct() -> None:
    calls = [tool_use("add", "d", a=1, b=1), tool_use("add", "d", a=2, b=2)]
    inner = ScriptedModel(
        [[*calls, text("and a long tail of text " * 4)], "resumed"],
        stream=True,
        chunk_delay=0.05,
        chunks_per_block=8,
    )

    def both_calls_done(chunk: ChatResponse) -> bool:
        uses = [b for b in chunk.content if b["type"] == "tool_use" and "raw_input" not in b]
        return len(uses) == 2 and any(b["type"] == "text" for b in chunk.content)

    model = SignalModel(inner, both_calls_done)
    agent = agent_for(model)
    async with anyio.create_task_group() as tg:
        out: dict[str, Msg] = {}

        async def go() -> None:
            out["reply"] = await agent("go")

        tg.start_soon(go)
        await model.event.wait()
        assert await agent.interrupt()
    assert out["reply"].metadata["interrupted"] is True
    memory = await checked_memory(agent)
    assert _ids(memory) == ["d", "d_2"]
    await round_trip(agent)
    assert (await agent()).get_text() == "resumed"


# -- model errors in the middle of a multi-turn reply -------------------------------------
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "error", [RateLimitError("slow down"), ModelAPIError("down", status_code=503)]
)
async def test_model_error_on_second_call_raises_it_and_agent_can_retry(
    stream: bool, error: Exception
) -> None:
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], error, "retried"], stream=stream)
    agent = agent_for(model)
    with pytest.raises(type(error)):
        await agent("hi")
    memory = await checked_memory(agent)
    assert results_of(memory) == {"c1": ("3", False)}  # the finished call keeps its result
    fresh = await round_trip(agent)
    reply = await agent("retry")
    assert reply.get_text() == "retried"
    assert shape(await checked_memory(agent))[-2:] == [
        ("user", ["text:retry"]),
        ("assistant", ["text:retried"]),
    ]
    assert len(await fresh.memory.get_memory()) == 3


# -- interrupts that arrive after the answer is complete ----------------------------------
async def test_interrupt_in_post_reply_keeps_the_complete_answer_as_reply_text() -> None:
    agent = agent_for(ScriptedModel(["the full answer", "next"]))

    async def post(agent: ReActAgent, kwargs: dict[str, Any], reply: Msg) -> None:
        await agent.interrupt("stop")
        await anyio.sleep(0)  # the cancellation lands here

    agent.register_hook("post_reply", "late", post)
    reply = await agent("hi")
    assert reply.metadata["interrupted"] is True
    assert reply.get_text() == "the full answer"
    assert shape(await checked_memory(agent)) == [
        ("user", ["text:hi"]),
        ("assistant", ["text:the full answer"]),
        ("user", ["text:stop"]),
    ]
    await round_trip(agent)


# -- resume misuse ------------------------------------------------------------------------
async def test_resume_with_nothing_pending_is_a_clear_error() -> None:
    agent = agent_for(ScriptedModel(["hello"]))
    with pytest.raises(StateError, match="no tool calls waiting"):
        await agent.resume()
    with pytest.raises(ValueError, match="not waiting for approval"):
        await agent.resume({"nope": True})
    assert not agent.is_replying
    assert (await agent("hi")).get_text() == "hello"  # the agent is still usable


# -- tools raising BaseException subclasses -----------------------------------------------
def _base_exception_toolkit() -> Toolkit:
    tk = Toolkit()

    async def exits(code: int) -> str:
        """Calls sys.exit like a wrapped script would.

        Args:
            code: The exit code.
        """
        raise SystemExit(code)

    async def stray_cancel() -> str:
        """Awaits a future that something else cancelled."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    async def interrupt_key() -> str:
        """Raises KeyboardInterrupt."""
        raise KeyboardInterrupt

    def interrupt_key_sync() -> str:
        """Raises KeyboardInterrupt in a worker thread."""
        raise KeyboardInterrupt

    async def slow() -> str:
        """Finishes after a moment."""
        await anyio.sleep(0.2)
        return "slow done"

    for fn in (exits, stray_cancel, interrupt_key, interrupt_key_sync, slow):
        tk.register_tool_function(fn)
    return tk


@pytest.mark.parametrize("tool", ["exits", "stray_cancel"])
async def test_sys_exit_or_stray_cancelled_error_in_a_tool_is_a_tool_error(tool: str) -> None:
    args = {"code": 2} if tool == "exits" else {}
    model = ScriptedModel([[tool_use(tool, "c1", **args), tool_use("slow", "c2")], "done"])
    agent = ReActAgent("bot", "", model, _base_exception_toolkit(), print_hint=False)
    reply = await agent("go")
    assert reply.get_text() == "done"
    assert "interrupted" not in reply.metadata
    results = results_of(await checked_memory(agent))
    assert results["c2"] == ("slow done", False)  # the sibling was not cancelled
    output, is_error = results["c1"]
    assert is_error
    assert ("SystemExit" if tool == "exits" else "CancelledError") in output
    await round_trip(agent)


@pytest.mark.parametrize("tool", ["interrupt_key", "interrupt_key_sync"])
@pytest.mark.parametrize("parallel", [True, False])
async def test_keyboard_interrupt_in_a_tool_propagates_bare_after_repair(
    tool: str, parallel: bool
) -> None:
    calls = [tool_use(tool, "c1")]
    if parallel:
        calls.append(tool_use("slow", "c2"))
    model = ScriptedModel([calls, "after"])
    agent = ReActAgent("bot", "", model, _base_exception_toolkit(), print_hint=False)
    with pytest.raises(KeyboardInterrupt):  # not wrapped in a BaseExceptionGroup
        await agent("go")
    results = results_of(await checked_memory(agent))
    assert set(results) == ({"c1", "c2"} if parallel else {"c1"})
    assert all(is_error for _, is_error in results.values())
    assert "KeyboardInterrupt" in results["c1"][0]
    await round_trip(agent)
    assert (await agent()).get_text() == "after"


# -- snapshots while a reply runs ---------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
async def test_state_dict_refuses_during_a_model_call_every_time(stream: bool) -> None:
    # Before: a non-streamed call (or a stream before its first chunk) could be snapshotted,
    # a streamed one not: an autosave timer failed or not depending on timing.
    agent = agent_for(ScriptedModel(["slow answer"], stream=stream, delay=0.5))
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "hi")
        await anyio.sleep(0.1)
        assert agent.is_replying
        with pytest.raises(AgentBusyError, match="mid-step"):
            agent.state_dict()
    state = agent.state_dict()  # between replies it works
    assert [m["role"] for m in state["memory"]["messages"]] == ["user", "assistant"]


# -- a failing event sink ----------------------------------------------------------------
async def test_a_broken_console_does_not_abort_the_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    # print_hint=True (the default) on a closed stdout (a daemon, a pipe that went away):
    # before, the printer's ValueError failed the reply and cancelled its tool calls.
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdout", closed)
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "done", "again"], stream=True)
    agent = agent_for(model, print_hint=True)
    reply = await agent("hi")
    assert reply.get_text() == "done"
    assert results_of(await checked_memory(agent)) == {"c1": ("3", False)}
    events: list[str] = []
    async with agent.stream("again") as stream:  # other sinks still get every event
        async for event in stream:
            events.append(event.type)
    assert events[0] == "reply_started" and events[-1] == "reply_finished"


# -- input messages that would break the invariant ----------------------------------------
async def test_input_with_an_unanswered_call_or_an_orphan_result_is_refused() -> None:
    agent = agent_for(ScriptedModel(["ok"]))
    call = Msg("bot", [tool_use("add", "x", a=1, b=2)], "assistant")
    result = Msg("user", [{"type": "tool_result", "id": "x", "name": "add", "output": "3"}], "user")
    with pytest.raises(MemoryInvariantError, match="'x': tool_use without a tool_result"):
        await agent([Msg("user", "hi", "user"), call])
    with pytest.raises(MemoryInvariantError, match="tool_result without an earlier tool_use"):
        await agent.observe(result)
    assert not agent.is_replying
    assert await agent.memory.get_memory() == []  # nothing was stored
    await agent.observe([call, result])  # a balanced exchange is fine
    assert (await agent("go on")).get_text() == "ok"
    await round_trip(agent)


async def test_a_tool_result_cannot_answer_a_pending_call_by_hand() -> None:
    agent = agent_for(ScriptedModel([[tool_use("guarded", "g1", label="a")]]))
    await agent("go")
    assert [c["id"] for c in agent.pending_tool_calls] == ["g1"]
    forged = Msg(
        "user", [{"type": "tool_result", "id": "g1", "name": "guarded", "output": "ok"}], "user"
    )
    with pytest.raises(MemoryInvariantError):
        await agent(forged)
    assert [c["id"] for c in agent.pending_tool_calls] == ["g1"]  # still pending, untouched
    await round_trip(agent)


# -- a rejected state changes nothing -----------------------------------------------------
async def test_load_state_dict_with_a_bad_toolkit_part_leaves_memory_untouched() -> None:
    agent = agent_for(ScriptedModel(["kept"]))
    await agent("keep me")
    donor = agent_for(ScriptedModel(["other"]))
    await donor("other conversation")
    state = json.loads(json.dumps(donor.state_dict()))
    state["toolkit"] = {"version": 999}
    with pytest.raises(StateError, match="Toolkit state"):
        agent.load_state_dict(state)
    assert shape(await checked_memory(agent)) == [
        ("user", ["text:keep me"]),
        ("assistant", ["text:kept"]),
    ]


async def test_load_state_dict_restores_the_toolkit_when_memory_refuses() -> None:
    class PickyMemory(InMemoryMemory):
        def load_state_dict(self, state: dict[str, Any]) -> None:
            raise StateError("this memory refuses")

    agent = agent_for(ScriptedModel([]), memory=PickyMemory())
    agent.toolkit.create_tool_group("extra", "Extra tools.", active=False)
    before = agent.toolkit.state_dict()
    donor = agent_for(ScriptedModel([]))
    donor.toolkit.create_tool_group("extra", "Extra tools.", active=True)
    with pytest.raises(StateError, match="refuses"):
        agent.load_state_dict(json.loads(json.dumps(donor.state_dict())))
    assert agent.toolkit.state_dict() == before

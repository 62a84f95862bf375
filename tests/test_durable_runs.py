"""Durable runs in one process: step order, approvals, interrupts, sessions, the template."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit.agent import ReActAgent  # noqa: E402
from agentkit.durable import PENDING_EVENT, DBOSAgent  # noqa: E402
from agentkit.exceptions import SessionConflictError  # noqa: E402
from agentkit.memory import check_memory_invariant  # noqa: E402
from agentkit.messages import Msg  # noqa: E402
from agentkit.session import SQLiteSession, interrupt_session  # noqa: E402
from agentkit.testing import ScriptedModel, tool_use  # noqa: E402
from agentkit.tools import Toolkit  # noqa: E402

DBOS = dbos.DBOS


class Env:
    """Everything the module's durable agents share (DBOS is one per process)."""

    def __init__(self, tmp: Path) -> None:
        self.sessions = SQLiteSession(tmp / "sessions.db")
        self.log: list[str] = []
        self.blocking = anyio.Event()
        self.tools = Toolkit()
        self.models: dict[str, ScriptedModel] = {}

        @self.tools.tool
        async def work(name: str, delay: float = 0.0) -> str:
            """Do some work.

            Args:
                name: What to do.
                delay: Seconds it takes.
            """
            await anyio.sleep(delay)
            self.log.append(name)
            return f"{name} done"

        @self.tools.tool(requires_approval=True)
        def pay(amount: int) -> str:
            """Pay.

            Args:
                amount: How much.
            """
            self.log.append(f"paid {amount}")
            return "paid"

        @self.tools.tool
        async def block() -> str:
            """Block until interrupted."""
            self.blocking.set()
            await anyio.sleep_forever()
            return "unreachable"

        self.agents = {name: self.make(name) for name in ("par", "appr", "intr", "sess", "hand")}

    def make(self, name: str) -> DBOSAgent:
        model = self.models[name] = ScriptedModel([])
        agent = ReActAgent(name, "You work.", model, self.tools, print_hint=False)
        return DBOSAgent(agent, name=f"test-{name}", sessions=self.sessions)

    def script(self, name: str, replies: list[Any]) -> ScriptedModel:
        model = ScriptedModel(replies)
        self.agents[name].template.model = model
        return model


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("dbos")
    DBOS(
        config={
            "name": "agentkit-durable-runs",
            "system_database_url": f"sqlite:///{tmp / 'dbos.sqlite'}",
            "executor_id": "test-worker",
            "application_version": "test-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    environment = Env(tmp)
    DBOS.launch()
    yield environment
    DBOS.destroy(destroy_registry=True)


async def run_steps(workflow_id: str) -> list[Any]:
    """The run's model and tool steps (without the DBOS.recv that takes its steers)."""
    steps = await DBOS.list_workflow_steps_async(workflow_id)
    return [s for s in steps if not s["function_name"].startswith("DBOS.")]


async def test_parallel_calls_get_steps_in_the_models_order(env: Env) -> None:
    calls = [
        tool_use("work", "c1", name="slow", delay=0.2),
        tool_use("work", "c2", name="mid", delay=0.1),
        tool_use("work", "c3", name="fast"),
    ]
    env.script("par", [calls, "all done"])
    env.log.clear()
    result = await env.agents["par"].run("go")
    assert result.output == "all done" and result.stop_reason == "final"
    assert result.usage.models == {"scripted": 2} and result.model_name == "scripted"
    assert env.log == ["fast", "mid", "slow"]  # they did run in parallel
    steps = await run_steps(result.workflow_id)
    names = [s["function_name"] for s in steps]
    assert names == ["model:scripted", "tool:work", "tool:work", "tool:work", "model:scripted"]
    ids = [s["function_id"] for s in steps]
    assert ids[1:4] == [ids[0] + 1, ids[0] + 2, ids[0] + 3]  # reserved right after the answer
    outputs = [json.loads(json.dumps(s["output"])) for s in steps[1:4]]
    assert [o["content"][0]["text"] for o in outputs] == ["slow done", "mid done", "fast done"]
    check_memory_invariant([Msg.from_dict(m) for m in result.state["memory"]["messages"]])


async def test_the_durable_result_records_the_agent_a_handoff_reached(env: Env) -> None:
    billing = ReActAgent("billing", "You bill.", ScriptedModel(["42 EUR."]))
    env.agents["hand"].template.handoffs = [billing]
    env.script("hand", [[tool_use("transfer_to_billing", "h1")]])
    result = await env.agents["hand"].run("how much?")
    assert result.last_agent == "billing" and result.output == "42 EUR."
    check_memory_invariant([Msg.from_dict(m) for m in result.state["memory"]["messages"]])


async def test_approval_waits_in_recv_and_send_delivers_it(env: Env) -> None:
    env.script("appr", [[tool_use("pay", "p1", amount=5)], "paid, thanks"])
    env.log.clear()
    durable = env.agents["appr"]
    handle = await DBOS.start_workflow_async(durable.workflow, await durable.request("pay 5"))
    workflow_id = handle.get_workflow_id()
    pending = await DBOS.get_event_async(workflow_id, PENDING_EVENT, 30)
    assert pending == [{"id": "p1", "name": "pay", "input": {"amount": 5}}]
    assert env.log == []  # nothing ran before the decision
    await DBOSAgent.approve(workflow_id, {"p1": True})
    result = DBOSAgent.result(await handle.get_result(), workflow_id)
    assert result.output == "paid, thanks" and result.pending == []
    assert env.log == ["paid 5"]


async def test_interrupt_through_the_control_channel_ends_the_workflow(env: Env) -> None:
    env.blocking = anyio.Event()
    env.script("intr", [[tool_use("block", "b1")], "never"])
    durable = env.agents["intr"]
    results: list[Any] = []

    async def run() -> None:
        results.append(await durable.run("wait", session_id="intr-1"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await env.blocking.wait()
        assert await interrupt_session(env.sessions, "intr-1", "stop now") == 1
    (result,) = results
    assert result.interrupted and result.stop_reason == "interrupted"
    status = await DBOS.get_workflow_status_async(result.workflow_id)
    assert status is not None and status.status == "SUCCESS"
    state = await env.sessions.load_state("intr-1")
    assert state == result.state
    memory = [Msg.from_dict(m) for m in state["memory"]["messages"]]
    check_memory_invariant(memory)
    assert memory[-1].get_text() == "stop now"


async def test_session_is_the_truth_between_runs(env: Env) -> None:
    model = env.script("sess", ["first answer", "second answer"])
    durable = env.agents["sess"]
    one = await durable.run("hello", session_id="s-1")
    two = await durable.run("again", session_id="s-1")
    assert (one.session_version, two.session_version) == (1, 2)
    second_request = [m.get_text() for m in model.requests[1].messages]
    assert second_request[1:] == ["hello", "first answer", "again"]
    # The template never holds a conversation.
    assert await durable.template.memory.get_memory() == []
    # A write by someone else between load and save is a conflict, not an overwrite.
    env.script("sess", ["third answer"])
    request = await durable.request("third", session_id="s-1")
    await env.sessions.save_state("s-1", {"elsewhere": True})
    handle = await DBOS.start_workflow_async(durable.workflow, request)
    with pytest.raises(SessionConflictError):
        DBOSAgent.result(await handle.get_result())
    assert await env.sessions.load_state("s-1") == {"elsewhere": True}


async def test_a_workflow_id_runs_once(env: Env) -> None:
    env.script("par", ["only once"])
    durable = env.agents["par"]
    first = await durable.run("hi", workflow_id="fixed-id")
    second = await durable.run("hi", workflow_id="fixed-id")
    assert first.output == second.output == "only once"
    assert len(env.agents["par"].template.model.requests) == 1  # type: ignore[attr-defined]


async def test_enqueued_runs_respect_the_queue(env: Env) -> None:
    await DBOS.register_queue_async(
        "agentkit-test-queue", worker_concurrency=2, polling_interval_sec=0.1
    )
    env.script("par", ["one", "two", "three"])
    durable = env.agents["par"]
    handles = [await durable.enqueue(f"q{i}", "agentkit-test-queue") for i in range(3)]
    outputs = sorted([DBOSAgent.result(await h.get_result()).output for h in handles])
    assert outputs == ["one", "three", "two"]


async def test_mcp_tool_calls_are_steps_too(env: Env) -> None:
    from agentkit.durable import DurableToolkit
    from agentkit.durable._steps import RunSteps
    from agentkit.mcp import MCPClient, register_mcp_client
    from tests._mcp_helpers import py_stdio

    durable = env.agents["par"]
    plain = durable.template.toolkit
    toolkit = Toolkit()
    async with MCPClient("py", py_stdio()) as client:
        await register_mcp_client(toolkit, client, enable_funcs=["add"])
        # The run's toolkit keeps the server's registration: pins saved, list changes seen.
        run_toolkit = DurableToolkit(toolkit, RunSteps())
        assert run_toolkit.state_dict()["mcp_pins"] == toolkit.state_dict()["mcp_pins"]
        durable.template.toolkit = toolkit
        try:
            env.script("par", [[tool_use("add", "m1", a=2, b=3)], "it is 5"])
            result = await durable.run("add 2 and 3")
        finally:
            durable.template.toolkit = plain
    assert result.output == "it is 5"
    steps = await run_steps(result.workflow_id)
    assert [s["function_name"] for s in steps] == ["model:scripted", "tool:add", "model:scripted"]
    assert steps[1]["output"]["content"][0]["text"] == "5"


async def test_a_streaming_model_is_recorded_as_its_complete_answer(env: Env) -> None:
    durable = env.agents["par"]
    model = ScriptedModel(
        [[tool_use("work", "s1", name="streamed")], "a long streamed answer"], stream=True
    )
    durable.template.model = model
    result = await durable.run("stream it")
    assert result.output == "a long streamed answer"
    steps = await run_steps(result.workflow_id)
    recorded = steps[-1]["output"]["content"]
    assert recorded == [{"type": "text", "text": "a long streamed answer"}]
    assert len(model.requests) == 2


async def test_interrupt_while_waiting_for_approval_ends_the_run_interrupted(env: Env) -> None:
    env.script("appr", [[tool_use("pay", "p9", amount=9), tool_use("work", "w9", name="x")]])
    env.log.clear()
    durable = env.agents["appr"]
    request = await durable.request("pay 9", session_id="appr-intr")
    handle = await DBOS.start_workflow_async(durable.workflow, request)
    workflow_id = handle.get_workflow_id()
    with anyio.fail_after(30):  # before the fix: it waited for approval_timeout (a week)
        assert await DBOS.get_event_async(workflow_id, PENDING_EVENT, 30)  # in DBOS.recv now
        assert await interrupt_session(env.sessions, "appr-intr", "never mind") == 1
        results = [DBOSAgent.result(await handle.get_result(), workflow_id)]
    (result,) = results
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.pending == [] and "paid 9" not in env.log
    state = await env.sessions.load_state("appr-intr")
    assert state == result.state and state["pending_tool_calls"] == []
    memory = [Msg.from_dict(m) for m in state["memory"]["messages"]]
    check_memory_invariant(memory)
    answers = [b for m in memory for b in m.get_blocks("tool_result")]
    assert sorted(b["id"] for b in answers) == ["p9", "w9"]  # exactly one result each
    assert memory[-1].get_text() == "never mind"
    # The next message continues the conversation.
    env.script("appr", ["ok, not paying"])
    follow = await durable.run("fine", session_id="appr-intr")
    assert follow.output == "ok, not paying" and follow.stop_reason == "final"


async def test_a_handoff_targets_model_calls_and_tools_are_steps_of_the_run(env: Env) -> None:
    # The target's own loop is durable too: a recovery replays its requests and tools.
    billing = ReActAgent(
        "billing",
        "You bill.",
        ScriptedModel([[tool_use("work", "w1", name="invoice")], "42 EUR."]),
        env.tools,
    )
    env.agents["hand"].template.handoffs = [billing]
    env.script("hand", [[tool_use("transfer_to_billing", "h1")], "Anything else?"])
    env.log.clear()
    result = await env.agents["hand"].run("how much?", session_id="hand-steps")
    assert result.last_agent == "billing" and result.output == "42 EUR."
    steps = await run_steps(result.workflow_id)
    names = [s["function_name"] for s in steps]
    assert names == [
        "model:scripted",  # the source hands off
        "model:scripted",  # the target calls its tool
        "tool:work",
        "model:scripted",  # the target answers
        "agentkit.save_session",
    ]
    assert env.log == ["invoice"]
    assert billing.model is not None and isinstance(billing.model, ScriptedModel)  # untouched
    again = await env.agents["hand"].run("thanks", session_id="hand-steps")
    assert again.last_agent == "hand" and again.output == "Anything else?"
    memory = [Msg.from_dict(m) for m in again.state["memory"]["messages"]]
    check_memory_invariant(memory)
    assert [m.name for m in memory if m.role == "assistant"] == ["hand", "billing", "hand"]


async def test_handoffs_that_cycle_back_get_one_durable_copy_each(env: Env) -> None:
    billing = ReActAgent(
        "billing", "You bill.", ScriptedModel([[tool_use("transfer_to_hand", "b1")]])
    )
    template = env.agents["hand"].template
    template.handoffs = [billing]
    billing.handoffs = [template]  # a -> b -> a
    env.script("hand", [[tool_use("transfer_to_billing", "h1")], "Back with hand."])
    result = await env.agents["hand"].run("route me")
    assert result.last_agent == "hand" and result.output == "Back with hand."
    steps = await DBOS.list_workflow_steps_async(result.workflow_id)
    assert [s["function_name"] for s in steps].count("model:scripted") == 3

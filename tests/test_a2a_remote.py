"""A remote A2A agent where an agent is used: a handoff target, in pipelines and a MsgHub, and
input-required mapped onto the outer run's approvals. Real uvicorn servers on 127.0.0.1: a
reference server written with a2a-sdk's executor API, and agentkit's own ``to_a2a``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
)
from starlette.applications import Starlette

from agentkit import Decision, ReActAgent, Toolkit, handoff
from agentkit.a2a import A2AAgent, RemoteAuthRequiredError, to_a2a
from agentkit.a2a._client import HANDOFF_HEADER, OBSERVED_HEADER
from agentkit.events import TextDelta, ToolProgress, ToolResult
from agentkit.exceptions import StateError, UsageError
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.pipelines import MsgHub, fanout_pipeline, sequential_pipeline
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from tests._serve_helpers import run_events, run_input, running, user

pytestmark = pytest.mark.anyio


class Recorder(AgentExecutor):
    """A reference server's agent: records each message it gets, answers with a count."""

    def __init__(self, name: str = "geo") -> None:
        self.name = name
        self.got: list[tuple[str, str]] = []  # (context id, message text)
        self.block = False  # work until CancelTask (or release)
        self.release = anyio.Event()
        self.started = anyio.Event()
        self.canceled: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(id=context.task_id, context_id=context.context_id, history=[context.message])
            )
        self.got.append((context.context_id, context.get_user_input()))
        await updater.start_work(updater.new_agent_message([Part(text="reading")]))
        if self.block:
            self.started.set()
            await self.release.wait()
        await updater.add_artifact(
            [Part(text=f"{self.name} answer ")], artifact_id="a", append=False, last_chunk=False
        )
        await updater.add_artifact(
            [Part(text=str(len(self.got)))], artifact_id="a", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.canceled.append(str(context.task_id))
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def reference_app(executor: Recorder | Asker) -> Starlette:
    card = AgentCard(
        name=executor.name,
        description="Answers geography questions.",
        version="1.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="geo", name="geo", description="Geography.", tags=["geo"])],
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1/", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )

    async def card_with_url(c: AgentCard) -> AgentCard:
        served = AgentCard()
        served.CopyFrom(c)
        served.supported_interfaces[0].url = app.state.url
        return served

    app = Starlette(
        routes=[
            *create_agent_card_routes(card, card_modifier=card_with_url),
            *create_jsonrpc_routes(handler, "/"),
        ]
    )
    return app


def valid(memory: list[Msg], agent: ReActAgent) -> None:
    check_memory_invariant(memory, [c["id"] for c in agent.conversation.pending])


# -- a handoff target ---------------------------------------------------------------------
async def test_a_remote_handoff_target_gets_the_filtered_history_and_keeps_its_context() -> None:
    executor = Recorder()
    app = reference_app(executor)

    def last_three(msgs: list[Msg]) -> list[Msg]:
        return msgs[-3:]  # the question, the handoff call, its result

    async with running(app) as url:
        app.state.url = f"{url}/"
        remote = A2AAgent(url, name="geo", description="Answers geography questions.")
        script = [
            [tool_use("transfer_to_geo", "h1")],
            [tool_use("transfer_to_geo", "h2")],
        ]
        triage = ReActAgent(
            "triage",
            "You route.",
            ScriptedModel(script),
            handoffs=[handoff(remote, input_filter=last_three)],
        )
        await triage.observe(Msg("user", "an earlier aside", "user"))
        events: list[Any] = []
        triage.add_event_listener(events.append)
        first = await triage.run("capital of France?")
        assert (first.last_agent, first.text) == ("geo", "geo answer 1")
        # Saved and loaded (a served thread's store): the next handoff continues the context.
        again = ReActAgent(
            "triage", "You route.", ScriptedModel(script[1:]), handoffs=[handoff(remote)]
        )
        again.load_state_dict(json.loads(json.dumps(triage.state_dict())))
        second = await again.run("and of Spain?")
        assert (second.last_agent, second.text) == ("geo", "geo answer 2")
        memory = await again.memory.get_memory()
        await remote.aclose()

    (ctx1, text1), (ctx2, text2) = executor.got
    assert ctx1 == ctx2 and ctx1  # one remote context across turns and save/load
    assert text1 == HANDOFF_HEADER + "\n".join(
        [
            "user (user): capital of France?",
            "triage called transfer_to_geo({})",
            "transfer_to_geo returned: Transferred to geo.",
        ]
    )
    # Only what the remote has not seen: from its own answer on (the filter is the default).
    assert text2 == HANDOFF_HEADER + "\n".join(
        [
            "user (user): and of Spain?",
            "triage called transfer_to_geo({})",
            "transfer_to_geo returned: Transferred to geo.",
        ]
    )
    valid(memory, again)
    answers = [m for m in memory if m.name == "geo"]
    assert [m.get_text() for m in answers] == ["geo answer 1", "geo answer 2"]
    assert answers[-1].metadata == {
        "handoff": {"target": "transfer_to_geo", "state": {"contextId": ctx1}}
    }
    # The client saw the handoff answered before the remote's text streamed.
    kinds = [
        type(e).__name__ for e in events if isinstance(e, ToolResult | TextDelta | ToolProgress)
    ]
    assert kinds.index("ToolResult") < kinds.index("TextDelta")
    assert "ToolProgress" in kinds  # the remote's status message ("reading")


async def test_a_served_thread_hands_off_to_the_remote_agent_turn_after_turn(
    tmp_path: Path,
) -> None:
    executor = Recorder()
    remote_app = reference_app(executor)
    async with running(remote_app) as url:
        remote_app.state.url = f"{url}/"
        remote = A2AAgent(url, name="geo")
        script = [[tool_use("transfer_to_geo", "h1")], [tool_use("transfer_to_geo", "h2")]]
        model = ScriptedModel(script)  # one conversation: the template's copies share it

        def triage() -> ReActAgent:
            return ReActAgent("triage", "You route.", model, handoffs=[remote])

        app = create_app(triage, sessions=SQLiteSession(tmp_path / "threads.db"))
        streamed: list[str] = []
        async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
            for i, question in enumerate(["capital?", "and the river?"]):
                events = await run_events(client, "/agui", run_input("t1", user(question, f"m{i}")))
                assert events[-1]["outcome"] == {"type": "success"}
                streamed.append(
                    "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
                )
        await remote.aclose()
    assert streamed == ["geo answer 1", "geo answer 2"]
    (ctx1, _), (ctx2, text2) = executor.got
    assert ctx1 == ctx2  # the thread's store kept the remote context between requests
    assert "capital?" not in text2 and "and the river?" in text2


async def test_a_failing_remote_handoff_is_an_error_result_and_the_source_answers() -> None:
    remote = A2AAgent("http://127.0.0.1:9/", name="gone", timeout=2)  # nothing listens
    triage = ReActAgent(
        "triage",
        "You route.",
        ScriptedModel([[tool_use("transfer_to_gone", "h1")], "I will answer myself."]),
        handoffs=[remote],
    )
    result = await triage.run("hello?")
    await remote.aclose()
    assert (result.last_agent, result.text) == ("triage", "I will answer myself.")
    memory = await triage.memory.get_memory()
    valid(memory, triage)
    (failed,) = [b for m in memory for b in m.get_content_blocks() if b["type"] == "tool_result"]
    assert failed["is_error"] and "gone" in json.dumps(failed["output"])


async def test_interrupting_the_source_cancels_the_remote_targets_task() -> None:
    executor = Recorder()
    executor.block = True
    app = reference_app(executor)
    async with running(app) as url:
        app.state.url = f"{url}/"
        remote = A2AAgent(url, name="geo")
        triage = ReActAgent(
            "triage",
            "You route.",
            ScriptedModel([[tool_use("transfer_to_geo", "h1")], "Stopped; what now?"]),
            handoffs=[remote],
        )
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                results.append(await triage.run("slow question"))

            tg.start_soon(run)
            with anyio.fail_after(20):
                await executor.started.wait()
            assert await triage.interrupt()
        executor.block = False
        again = await triage.run("go on")  # the source's memory is valid
        await remote.aclose()
    assert results[0].stop_reason == "interrupted"
    assert len(executor.canceled) == 1
    assert again.text == "Stopped; what now?"
    valid(await triage.memory.get_memory(), triage)


# -- pipelines and MsgHub -----------------------------------------------------------------
async def test_a2a_agents_in_sequential_and_fanout_pipelines() -> None:
    geo, sea = Recorder("geo"), Recorder("sea")
    geo_app, sea_app = reference_app(geo), reference_app(sea)
    async with running(geo_app) as geo_url, running(sea_app) as sea_url:
        geo_app.state.url, sea_app.state.url = f"{geo_url}/", f"{sea_url}/"
        writer = ReActAgent("writer", "You write.", ScriptedModel(["a draft"]))
        remote_geo, remote_sea = A2AAgent(geo_url), A2AAgent(sea_url)
        last = await sequential_pipeline([writer, remote_geo], "start")
        replies = await fanout_pipeline([remote_geo, remote_sea], "both?")
        await remote_geo.aclose()
        await remote_sea.aclose()
    assert last is not None and (last.name, last.get_text()) == ("geo", "geo answer 1")
    assert [(r.name, r.get_text()) for r in replies] == [
        ("geo", "geo answer 2"),
        ("sea", "sea answer 1"),
    ]
    assert [t for _, t in geo.got] == ["a draft", "both?"]
    assert geo.got[0][0] == geo.got[1][0]  # consecutive calls share one remote context


async def test_in_a_msghub_a_remote_agent_hears_the_others_with_its_next_message() -> None:
    executor = Recorder()
    app = reference_app(executor)
    async with running(app) as url:
        app.state.url = f"{url}/"
        remote = A2AAgent(url, name="geo")
        alice = ReActAgent("alice", "You talk.", ScriptedModel(["Lyon is nice."]))
        async with MsgHub([alice, remote], announcement=Msg("host", "Topic: cities", "user")):
            await alice()
            reply = await remote("Which city?")
        await alice.memory.get_memory()
        heard_by_alice = [m.get_text() for m in await alice.memory.get_memory()]
        await remote.aclose()
    ((_, text),) = executor.got
    assert text == (
        OBSERVED_HEADER
        + "host (user): Topic: cities\nalice (assistant): Lyon is nice.\nWhich city?"
    )
    assert heard_by_alice[-1] == reply.get_text() == "geo answer 1"  # the hub broadcast it


# -- input-required: a pending approval of the outer run ------------------------------------
def ops_agent(ran: list[str]) -> ReActAgent:
    toolkit = Toolkit()

    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    toolkit.register_tool_function(delete_file, requires_approval=True)
    model = ScriptedModel(
        [tool_use("delete_file", "r1", path="/tmp/a"), "Done, deleted.", "Done again."]
    )
    return ReActAgent("ops", "You manage files.", model, toolkit)


def planner(remote: A2AAgent, script: list[Any]) -> ReActAgent:
    toolkit = Toolkit()
    toolkit.register_tool(remote.as_tool())
    return ReActAgent("planner", "You plan.", ScriptedModel(script), toolkit)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSession:
    return SQLiteSession(tmp_path / "a2a.db")


async def test_remote_input_required_is_an_outer_approval_that_survives_save_and_load(
    store: SQLiteSession,
) -> None:
    ran: list[str] = []
    async with running(to_a2a(ops_agent(ran), sessions=store)) as url:
        script = [tool_use("ops", "c1", task="delete /tmp/a"), "The file is gone."]
        first = A2AAgent(url, name="ops")
        outer = planner(first, script)
        paused = await outer.run("clean up")
        await first.aclose()
        assert paused.stop_reason == "pending_approval"
        assert [(p.id, p.name, p.input) for p in paused.pending] == [
            ("c1/r1", "delete_file", {"path": "/tmp/a"})
        ]
        assert ran == []
        valid(await outer.memory.get_memory(), outer)
        # Another process: a fresh outer agent and a fresh client, from the saved state.
        remote = A2AAgent(url, name="ops")
        restored = planner(remote, script[1:])
        restored.load_state_dict(json.loads(json.dumps(outer.state_dict())))
        # The decision's edited arguments reach the remote tool (Decision.input).
        done = await restored.run(approvals={"c1/r1": Decision(True, input={"path": "/tmp/b"})})
        await remote.aclose()
    assert (done.stop_reason, done.text) == ("final", "The file is gone.")
    assert ran == ["/tmp/b"]
    (result,) = [
        b
        for m in restored.model.requests[0].messages  # type: ignore[attr-defined]
        for b in m.get_content_blocks()
        if b["type"] == "tool_result"
    ]
    assert "Done, deleted." in json.dumps(result["output"])


async def test_remote_input_required_in_a_handoff_and_a_denial(store: SQLiteSession) -> None:
    ran: list[str] = []
    async with running(to_a2a(ops_agent(ran), sessions=store)) as url:
        remote = A2AAgent(url, name="ops")
        triage = ReActAgent(
            "triage",
            "You route.",
            ScriptedModel([[tool_use("transfer_to_ops", "h1")]]),
            handoffs=[remote],
        )
        paused = await triage.run("delete /tmp/a please")
        assert [p.id for p in paused.pending] == ["h1/r1"]
        denied = await triage.run(approvals={"h1/r1": "not that file"})
        await remote.aclose()
    assert (denied.stop_reason, denied.last_agent, denied.text) == (
        "final",
        "ops",
        "Done, deleted.",
    )
    assert ran == []  # denied remotely: the remote model was told why and answered
    valid(await triage.memory.get_memory(), triage)


async def test_denying_the_outer_call_cancels_the_waiting_remote_task(store: SQLiteSession) -> None:
    ran: list[str] = []
    async with running(to_a2a(ops_agent(ran), sessions=store)) as url:
        remote = A2AAgent(url, name="ops")
        outer = planner(remote, [tool_use("ops", "c1", task="delete /tmp/a"), "Left it."])
        assert (await outer.run("clean up")).stop_reason == "pending_approval"
        result = await outer.run(approvals={"c1": False})
        # The remote context is free again: its next task runs (the canceled one never does).
        answer = (await remote("anything else?")).get_text()
        await remote.aclose()
    assert (result.stop_reason, result.text) == ("final", "Left it.")
    assert ran == [] and answer == "Done, deleted."


# -- called directly: input-required is the reply's pending calls, resume() answers them ------
async def test_a_direct_call_that_needs_approval_returns_the_pending_calls_and_resumes(
    store: SQLiteSession,
) -> None:
    ran: list[str] = []
    async with running(to_a2a(ops_agent(ran), sessions=store)) as url:
        remote = A2AAgent(url, name="ops")
        reply = await sequential_pipeline([remote], "delete /tmp/a")
        pending = [{"id": "r1", "name": "delete_file", "input": {"path": "/tmp/a"}}]
        assert (reply.metadata or {})["pending_tool_calls"] == pending
        assert remote.pending_tool_calls == pending and ran == []
        assert (await remote()).metadata == reply.metadata  # reported again, nothing sent
        with pytest.raises(UsageError, match="'r9' is not waiting"):
            await remote.resume({"r9": True})
        done = await remote.resume({"r1": Decision(True, input={"path": "/tmp/b"})})
        assert (done.get_text(), remote.pending_tool_calls, ran) == (
            "Done, deleted.",
            [],
            ["/tmp/b"],
        )
        assert "pending_tool_calls" not in (done.metadata or {})
        with pytest.raises(StateError, match="no task waiting"):
            await remote.resume({"r1": True})
        await remote.aclose()


async def test_a_new_message_instead_of_a_decision_cancels_the_waiting_task(
    store: SQLiteSession,
) -> None:
    ran: list[str] = []
    async with running(to_a2a(ops_agent(ran), sessions=store)) as url:
        remote = A2AAgent(url, name="ops")
        assert (await remote("delete /tmp/a")).metadata["pending_tool_calls"]  # type: ignore[index]
        # The same context continues: the waiting task is canceled (CancelTask), not refused.
        reply = await remote("never mind, just say done")
        await remote.aclose()
    assert (reply.get_text(), remote.pending_tool_calls, ran) == ("Done, deleted.", [], [])


class Asker(AgentExecutor):
    """Another framework's agent: asks a question (or for credentials), then answers."""

    def __init__(self, auth: bool = False) -> None:
        self.name = "geo"
        self.auth = auth
        self.got: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        self.got.append(context.get_user_input())
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(id=context.task_id, context_id=context.context_id, history=[context.message])
            )
            ask = updater.requires_auth if self.auth else updater.requires_input
            await ask(updater.new_agent_message([Part(text="Which country?")]))
            return
        await updater.add_artifact([Part(text=f"Noted: {self.got[-1]}")], artifact_id="a")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


async def test_another_frameworks_question_is_one_pending_call_answered_in_its_task() -> None:
    executor = Asker()
    app = reference_app(executor)
    async with running(app) as url:
        app.state.url = url
        remote = A2AAgent(url, name="geo")
        reply = await remote("Where is Lyon?")
        task_id = (reply.metadata or {})["a2a_task_id"]
        assert reply.get_text() == "Which country?"
        assert remote.pending_tool_calls == [
            {"id": task_id, "name": "geo", "input": {"question": "Which country?"}}
        ]
        done = await remote.resume({task_id: "it is France"})  # a reason: "deny: <reason>"
        await remote.aclose()
    assert (done.get_text(), executor.got) == (
        "Noted: deny: it is France",
        ["Where is Lyon?", "deny: it is France"],
    )


async def test_auth_required_is_a_typed_error_naming_the_state() -> None:
    app = reference_app(Asker(auth=True))
    async with running(app) as url:
        app.state.url = url
        remote = A2AAgent(url, name="geo")
        with pytest.raises(RemoteAuthRequiredError, match="TASK_STATE_AUTH_REQUIRED") as caught:
            await remote("Where is Lyon?")
        assert caught.value.state == "TASK_STATE_AUTH_REQUIRED" and caught.value.task_id
        assert remote.pending_tool_calls == []
        outer = planner(remote, [tool_use("geo", "c1", task="Where is Lyon?"), "I cannot."])
        result = await outer.run("where?")
        await remote.aclose()
    (tool_result,) = [
        b for m in result.new_messages for b in m.get_content_blocks() if b["type"] == "tool_result"
    ]
    assert "TASK_STATE_AUTH_REQUIRED" in json.dumps(tool_result["output"])
    assert result.text == "I cannot."


# -- inside a durable step: the journal makes an executed-again exchange follow its task -----
class MemoryJournal:
    """The journal of one step (a DBOS step's events, here a dict); ``lose_task_id``: the
    worker dies between sending and recording the task id."""

    def __init__(self, lose_task_id: bool = False) -> None:
        self.records: dict[str, dict[str, str]] = {}
        self.lose_task_id = lose_task_id
        self.task_recorded = anyio.Event()

    def key(self, task_id: str, parts: object) -> str:
        return f"step-7:{task_id}"

    async def get(self, key: str) -> dict[str, str] | None:
        return self.records.get(key)

    async def put(self, key: str, record: dict[str, str]) -> None:
        if not (self.lose_task_id and "taskId" in record):
            self.records[key] = dict(record)
            if "taskId" in record:
                self.task_recorded.set()


class MethodLog:
    """ASGI wrapper: the JSON-RPC methods the server received, in order."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.state = app.state
        self.methods: list[str] = []
        self.subscribed = anyio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        method = json.loads(body).get("method", "")
        self.methods.append(method)
        if method == "SubscribeToTask":
            self.subscribed.set()
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def test_an_exchange_executed_again_follows_the_running_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executor = Recorder()
    executor.block = True
    journal = MemoryJournal()
    monkeypatch.setattr("agentkit.a2a._client.current_journal", lambda: journal)
    app = MethodLog(reference_app(executor))
    async with running(app) as url:
        app.state.url = url
        first, again = A2AAgent(url, name="geo"), A2AAgent(url, name="geo")
        answers: list[str] = []

        async def ask(remote: A2AAgent) -> None:
            answers.append((await remote("capital?")).get_text())

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, first)
            with anyio.fail_after(10):
                await journal.task_recorded.wait()
            tg.start_soon(ask, again)  # the step executed again (the first one still reads)
            with anyio.fail_after(10):
                await app.subscribed.wait()
            executor.release.set()
        await first.aclose()
        await again.aclose()
    assert app.methods == ["SendStreamingMessage", "GetTask", "SubscribeToTask"]
    assert answers == ["geo answer 1", "geo answer 1"]
    assert len(executor.got) == 1  # sent once, answered twice


async def test_a_journal_without_task_id_finds_the_task_by_message_id_or_sends_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executor = Recorder()
    journal = MemoryJournal(lose_task_id=True)
    monkeypatch.setattr("agentkit.a2a._client.current_journal", lambda: journal)
    app = reference_app(executor)
    async with running(app) as url:
        app.state.url = url

        async def ask() -> Msg:  # each execution of the step is a fresh process
            remote = A2AAgent(url, name="geo")
            try:
                return await remote("capital?")
            finally:
                await remote.aclose()

        sent = await ask()  # then the worker dies before recording the task id
        (record,) = journal.records.values()
        assert set(record) == {"messageId", "contextId"}
        found = await ask()  # ListTasks: the server has it, by message id
        # A record whose message never reached the server: sent, with its ids, once.
        journal.records = {"step-7:": {"messageId": "m-lost", "contextId": "ctx-lost"}}
        lost = await ask()
    assert (sent.get_text(), found.get_text(), lost.get_text()) == (
        "geo answer 1",
        "geo answer 1",
        "geo answer 2",
    )
    assert [c for c, _ in executor.got] == [record["contextId"], "ctx-lost"]

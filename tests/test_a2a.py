"""A2A both ways: the official a2a-sdk client against ``to_a2a``, ``A2AAgent`` against a server
written with the SDK's own executor API. Real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
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
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, Parse
from pydantic import BaseModel
from starlette.applications import Starlette

from agentkit import ReActAgent, Toolkit
from agentkit.a2a import A2AAgent, to_a2a
from agentkit.events import ToolProgress
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, text, tool_use
from tests._serve_helpers import running

pytestmark = pytest.mark.anyio
TIMEOUT = 20


def _text_message(text: str, *, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    msg = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )
    return SendMessageRequest(message=msg)


def _data(value: object) -> Part:
    return Part(data=Parse(json.dumps(value), struct_pb2.Value()))


@contextlib.asynccontextmanager
async def sdk_client(
    url: str, *, streaming: bool = True, token: str | None = None
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
        client = await create_client(
            url, client_config=ClientConfig(streaming=streaming, httpx_client=http)
        )
        yield client


async def _collect(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


def _final_task(events: list[StreamResponse]) -> tuple[str, str, int]:
    """(task id, context id, last state) of a stream."""
    task_id = context_id = ""
    state = TaskState.TASK_STATE_UNSPECIFIED
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "task":
            task_id, context_id, state = (
                event.task.id,
                event.task.context_id,
                event.task.status.state,
            )
        elif kind == "status_update":
            task_id, context_id = event.status_update.task_id, event.status_update.context_id
            state = event.status_update.status.state
    return task_id, context_id, state


def calculator(model: ScriptedModel) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool
    async def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    return ReActAgent("calc", "You add numbers.", model, toolkit)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSession:
    return SQLiteSession(tmp_path / "a2a.db")


# -- to_a2a, driven by the official SDK client --------------------------------------------
async def test_card_describes_the_agent_its_tools_and_streaming(store: SQLiteSession) -> None:
    app = to_a2a(calculator(ScriptedModel([])), sessions=store)
    async with running(app) as url, httpx.AsyncClient() as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
    assert card["name"] == "calc"
    assert card["description"] == "You add numbers."
    assert [s["id"] for s in card["skills"]] == ["add"]
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["url"] == f"{url}/"
    assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
    assert "securitySchemes" not in card


async def test_send_message_answers_a_completed_task_with_a_text_artifact(
    store: SQLiteSession,
) -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "The sum is 3."])
    async with (
        running(to_a2a(calculator(model), sessions=store)) as url,
        sdk_client(url, streaming=False) as client,
    ):
        (event,) = await _collect(client, _text_message("1+2?"))
        task = event.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [a.artifact_id for a in task.artifacts] == ["answer"]
        assert task.artifacts[0].parts[0].text == "The sum is 3."
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert f"a2a-task:{task.id}" in await store.list_ids()


async def test_stream_reports_the_tool_call_then_the_answer_then_completion(
    store: SQLiteSession,
) -> None:
    model = ScriptedModel([tool_use("add", "c1", a=2, b=5), "It is 7."], stream=True)
    async with running(to_a2a(calculator(model), sessions=store)) as url, sdk_client(url) as client:
        events = await _collect(client, _text_message("2+5?"))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    calls = [
        MessageToDict(p.data)
        for e in events
        if e.WhichOneof("payload") == "status_update"
        for p in e.status_update.status.message.parts
        if p.WhichOneof("content") == "data"
    ]
    assert {"toolCall": {"id": "c1", "name": "add", "input": {"a": 2, "b": 5}}} in calls
    chunks = [e.artifact_update for e in events if e.WhichOneof("payload") == "artifact_update"]
    assert chunks, "the answer streams as artifact chunks"
    assert chunks[-1].last_chunk and chunks[-1].artifact.parts[0].text == "It is 7."
    first_call = kinds.index("status_update", 2)
    assert first_call < kinds.index("artifact_update")  # the call is reported before the answer


async def test_a_follow_up_in_the_same_context_continues_the_conversation(
    store: SQLiteSession,
) -> None:
    model = ScriptedModel(["Noted: Lyon.", "You said Lyon."])
    async with running(to_a2a(calculator(model), sessions=store)) as url, sdk_client(url) as client:
        first = await _collect(client, _text_message("Remember Lyon."))
        _, context_id, _ = _final_task(first)
        second = await _collect(client, _text_message("What city?", context_id=context_id))
        assert _final_task(second)[2] == TaskState.TASK_STATE_COMPLETED
    seen = [m.get_text() for m in model.requests[1].messages]
    assert "Remember Lyon." in seen and "Noted: Lyon." in seen


async def test_cancel_mid_tool_ends_canceled_and_the_context_goes_on(store: SQLiteSession) -> None:
    started = anyio.Event()
    toolkit = Toolkit()

    @toolkit.tool
    async def crawl(site: str) -> str:
        """Crawl a site (slow)."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    model = ScriptedModel([tool_use("crawl", "c1", site="x"), "Fresh start."])
    agent = ReActAgent("crawler", "You crawl.", model, toolkit)
    async with running(to_a2a(agent, sessions=store)) as url, sdk_client(url) as client:
        ids: dict[str, str] = {}
        got_task = anyio.Event()

        async def stream() -> None:
            async for event in client.send_message(_text_message("crawl x")):
                if event.WhichOneof("payload") == "task":
                    ids["task"], ids["context"] = event.task.id, event.task.context_id
                    got_task.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stream)
            with anyio.fail_after(TIMEOUT):
                await started.wait()
                await got_task.wait()
            canceled = await client.cancel_task(CancelTaskRequest(id=ids["task"]))
            tg.cancel_scope.cancel()
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        stored = await client.get_task(GetTaskRequest(id=ids["task"]))
        assert stored.status.state == TaskState.TASK_STATE_CANCELED
        after = await _collect(client, _text_message("start over", context_id=ids["context"]))
        assert _final_task(after)[2] == TaskState.TASK_STATE_COMPLETED
    # The interrupted call was answered in memory: the next request pairs it with a result.
    blocks = [b for m in model.requests[1].messages for b in m.get_content_blocks()]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert [r["id"] for r in results] == ["c1"]


class CountingSession(SQLiteSession):
    """Counts the task reads and writes that reach the store."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.task_io: list[str] = []

    async def save_state(self, session_id: str, state: dict[str, Any], **kwargs: Any) -> int:
        if session_id.startswith("a2a-task:"):
            self.task_io.append("write")
        return await super().save_state(session_id, state, **kwargs)

    async def load_state(self, session_id: str) -> dict[str, Any] | None:
        if session_id.startswith("a2a-task:"):
            self.task_io.append("read")
        return await super().load_state(session_id)


async def test_a_turn_writes_its_task_twice_and_another_worker_sees_it(tmp_path: Path) -> None:
    sessions = CountingSession(tmp_path / "a2a.db")
    release, started = anyio.Event(), anyio.Event()
    toolkit = Toolkit()

    @toolkit.tool
    async def crawl(site: str) -> str:
        """Crawl a site."""
        started.set()
        await release.wait()
        return "crawled"

    model = ScriptedModel([tool_use("crawl", "c1", site="x"), "All crawled."])
    worker = to_a2a(ReActAgent("crawler", "You crawl.", model, toolkit), sessions=sessions)
    # Every working update waits for the settled state (no refresh within this test).
    worker.state.a2a_handler.tasks.refresh_interval = float("inf")
    other = to_a2a(ReActAgent("crawler", "You crawl.", ScriptedModel([])), sessions=sessions)
    async with (
        running(worker) as url,
        running(other) as other_url,
        sdk_client(url) as client,
        sdk_client(other_url) as elsewhere,
    ):
        events: list[StreamResponse] = []
        got_task = anyio.Event()

        async def stream() -> None:
            async for event in client.send_message(_text_message("crawl x")):
                events.append(event)
                got_task.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stream)
            with anyio.fail_after(TIMEOUT):
                await started.wait()
                await got_task.wait()
            task_id = _final_task(events)[0]
            # Mid-turn, the other worker finds the task (its first state was written).
            seen = await elsewhere.get_task(GetTaskRequest(id=task_id))
            assert seen.status.state == TaskState.TASK_STATE_SUBMITTED
            assert sessions.task_io == ["write", "read"]  # the other worker's GetTask read
            release.set()
        assert _final_task(events)[2] == TaskState.TASK_STATE_COMPLETED
        # The working updates (the call, its result, the answer chunks) were coalesced: one
        # more write, the settled state, before "completed" went out.
        assert sessions.task_io == ["write", "read", "write"]
        done = await elsewhere.get_task(GetTaskRequest(id=task_id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for a in done.artifacts for p in a.parts] == ["All crawled."]


async def test_a_pending_approval_is_input_required_and_the_decision_resumes_it(
    store: SQLiteSession,
) -> None:
    ran: list[str] = []
    toolkit = Toolkit()

    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    toolkit.register_tool_function(delete_file, requires_approval=True)
    model = ScriptedModel([tool_use("delete_file", "c1", path="/tmp/a"), "Done, deleted."])
    agent = ReActAgent("ops", "You manage files.", model, toolkit)
    async with running(to_a2a(agent, sessions=store)) as url, sdk_client(url) as client:
        first = await _collect(client, _text_message("delete /tmp/a"))
        task_id, context_id, state = _final_task(first)
        assert state == TaskState.TASK_STATE_INPUT_REQUIRED
        status = first[-1].status_update.status
        (data,) = [
            MessageToDict(p.data) for p in status.message.parts if p.WhichOneof("content") == "data"
        ]
        assert data == {
            "pendingApprovals": [{"id": "c1", "name": "delete_file", "input": {"path": "/tmp/a"}}]
        }
        assert ran == []
        decision = _text_message("", context_id=context_id, task_id=task_id)
        decision.message.ClearField("parts")
        decision.message.parts.append(_data({"approvals": {"c1": True}}))
        second = await _collect(client, decision)
        assert _final_task(second) == (task_id, context_id, TaskState.TASK_STATE_COMPLETED)
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.artifacts[0].parts[0].text == "Done, deleted."
    assert ran == ["/tmp/a"]


class Weather(BaseModel):
    city: str
    celsius: float


async def test_a_structured_output_is_a_data_part_of_the_answer(store: SQLiteSession) -> None:
    model = ScriptedModel(
        [[text("Here it is."), tool_use("generate_response", "r1", city="Oslo", celsius=4.5)]]
    )
    agent = ReActAgent("weather", "You report weather.", model, output_type=Weather)
    async with (
        running(to_a2a(agent, sessions=store)) as url,
        sdk_client(url, streaming=False) as client,
    ):
        (event,) = await _collect(client, _text_message("weather?"))
    parts = event.task.artifacts[0].parts
    assert parts[0].text == "Here it is."
    assert MessageToDict(parts[1].data) == {"city": "Oslo", "celsius": 4.5}


async def test_push_notification_config_is_refused_with_the_spec_error(
    store: SQLiteSession,
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "CreateTaskPushNotificationConfig",
        "params": {"taskId": "t1", "url": "https://example.com/hook"},
    }
    async with (
        running(to_a2a(calculator(ScriptedModel([])), sessions=store)) as url,
        httpx.AsyncClient() as http,
    ):
        answer = (await http.post(f"{url}/", json=body, headers={"A2A-Version": "1.0"})).json()
    assert answer["error"]["code"] == -32003  # PushNotificationNotSupportedError


def _send_body(part: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [part]}},
    }


async def test_bad_input_gets_a_json_rpc_error_and_nothing_is_stored(store: SQLiteSession) -> None:
    deep = '{"a":' * 1000 + '"x"' + "}" * 1000  # 1000 levels: written out, json.dumps cannot
    bodies = [
        json.dumps(_send_body({"text": "x" * (10 * 1024 * 1024)})).encode(),
        json.dumps(_send_body({"data": "DEEP"})).replace('"DEEP"', deep).encode(),
        json.dumps(_send_body({"text": "\ud800 lone"})).encode(),  # escaped: \ud800 in the JSON
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"text": "\xed\xa0\x80"}}}',
    ]
    model = ScriptedModel(["should not run"])
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    async with (
        running(to_a2a(calculator(model), sessions=store)) as url,
        httpx.AsyncClient(timeout=TIMEOUT) as http,
    ):
        answers = [(await http.post(f"{url}/", content=b, headers=headers)).json() for b in bodies]
    codes = [a["error"]["code"] for a in answers]
    assert codes == [-32600, -32602, -32602, -32700]
    assert "too large" in answers[0]["error"]["message"]
    assert "deeper" in answers[1]["error"]["message"]
    assert "surrogate" in answers[2]["error"]["message"]
    assert model.calls == 0
    assert await store.list_ids() == []


async def test_a_client_without_the_version_header_gets_the_version_error(
    store: SQLiteSession,
) -> None:
    async with (
        running(to_a2a(calculator(ScriptedModel([])), sessions=store)) as url,
        httpx.AsyncClient() as http,
    ):
        answer = (await http.post(f"{url}/", json=_send_body({"text": "hi"}))).json()
    assert answer["error"]["code"] == -32009  # VersionNotSupportedError
    assert await store.list_ids() == []


async def test_the_token_is_required_and_the_card_says_so(store: SQLiteSession) -> None:
    app = to_a2a(calculator(ScriptedModel(["hello"])), sessions=store, auth_token="s3cret")
    async with running(app) as url, httpx.AsyncClient() as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
        no_token = await http.post(f"{url}/", json=_send_body({"text": "hi"}))
        wrong = await http.post(
            f"{url}/", json=_send_body({"text": "hi"}), headers={"Authorization": "Bearer nope"}
        )
        assert (no_token.status_code, wrong.status_code) == (401, 401)
        async with sdk_client(url, token="s3cret") as client:
            assert (
                _final_task(await _collect(client, _text_message("hi")))[2]
                == TaskState.TASK_STATE_COMPLETED
            )


# -- A2AAgent against a reference server written with the SDK's executor API -------------
class ReferenceExecutor(AgentExecutor):
    """A server-side agent nobody on this project wrote the protocol code of: the SDK's."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.canceled: list[str] = []
        self.block = False

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(id=context.task_id, context_id=context.context_id, history=[context.message])
            )
        await updater.start_work(updater.new_agent_message([Part(text="looking it up")]))
        if self.block:
            self.started.set()
            await anyio.sleep_forever()
        question = context.get_user_input()
        await updater.add_artifact(
            [Part(text="Paris ")], artifact_id="a", append=False, last_chunk=False
        )
        await updater.add_artifact(
            [Part(text=f"(asked: {question})")], artifact_id="a", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        self.canceled.append(context.task_id)
        updater = TaskUpdater(event_queue, context.task_id, str(context.context_id))
        await updater.cancel()


def reference_app(executor: ReferenceExecutor) -> tuple[Starlette, InMemoryTaskStore]:
    card = AgentCard(
        name="geo",
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
    tasks = InMemoryTaskStore()
    handler = DefaultRequestHandler(agent_executor=executor, task_store=tasks, agent_card=card)

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
    return app, tasks


async def test_a2a_agent_as_a_tool_streams_the_remote_progress_and_returns_the_answer() -> None:
    executor = ReferenceExecutor()
    app, _ = reference_app(executor)
    async with running(app) as url:
        app.state.url = f"{url}/"
        remote = A2AAgent(url)
        await remote.connect()
        assert (remote.name, remote.description) == ("geo", "Answers geography questions.")
        toolkit = Toolkit()
        toolkit.register_tool(remote.as_tool())
        model = ScriptedModel([tool_use("geo", "c1", task="capital of France?"), "Paris."])
        outer = ReActAgent("planner", "You plan.", model, toolkit)
        progress: list[str] = []
        async with outer.stream("Where to?") as events:
            async for event in events:
                if isinstance(event, ToolProgress):
                    progress += [b["text"] for b in event.chunk.content if b["type"] == "text"]
        assert events.result.text == "Paris."
        await remote.aclose()
    assert progress[0] == "looking it up\n"
    assert "Paris " in progress
    (result,) = [
        b
        for m in model.requests[1].messages
        for b in m.get_content_blocks()
        if b["type"] == "tool_result"
    ]
    output = result["output"]
    text = (
        output
        if isinstance(output, str)
        else "".join(b["text"] for b in output if b["type"] == "text")
    )
    assert text == "Paris (asked: capital of France?)"
    assert remote.context_id  # the next call continues the same remote context


async def test_a2a_agent_is_callable_like_an_agent() -> None:
    executor = ReferenceExecutor()
    app, _ = reference_app(executor)
    async with running(app) as url:
        app.state.url = f"{url}/"
        remote = A2AAgent(url, name="geo")
        reply = await remote("capital?")
        await remote.aclose()
    assert reply.name == "geo"
    assert reply.get_text() == "Paris (asked: capital?)"


async def test_interrupting_the_outer_run_cancels_the_remote_task() -> None:
    executor = ReferenceExecutor()
    executor.block = True
    app, tasks = reference_app(executor)
    async with running(app) as url:
        app.state.url = f"{url}/"
        remote = A2AAgent(url, name="geo")
        toolkit = Toolkit()
        toolkit.register_tool(remote.as_tool())
        model = ScriptedModel(
            [tool_use("geo", "c1", task="slow question"), "Stopped; next?", "Fine."]
        )
        outer = ReActAgent("planner", "You plan.", model, toolkit)
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def run() -> None:
                results.append(await outer.run("go"))

            tg.start_soon(run)
            with anyio.fail_after(TIMEOUT):
                await executor.started.wait()
            assert await outer.interrupt()
        assert results[0].stop_reason == "interrupted"
        assert len(executor.canceled) == 1
        from a2a.server.context import ServerCallContext

        task = await tasks.get(executor.canceled[0], ServerCallContext())
        assert task is not None and task.status.state == TaskState.TASK_STATE_CANCELED
        executor.block = False
        again = await outer.run("try again")  # the outer memory is valid
        assert again.text == "Stopped; next?"
        await remote.aclose()

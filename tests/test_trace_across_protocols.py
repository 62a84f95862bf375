"""One trace across protocols: a browser's AG-UI request -> the served agent -> a remote agent
over A2A -> agentkit's MCP tool server, every hop continuing the W3C trace context (the
request's ``traceparent`` header, A2A request headers, MCP ``params._meta``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import ReActAgent, Toolkit
from agentkit.a2a import A2AAgent, to_a2a
from agentkit.mcp import MCPClient, StdioServer
from agentkit.observability import instrument, uninstrument
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from tests._serve_helpers import run_events, run_input, running, user

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
MCP_SERVER = ROOT / "tests" / "_obs_traced_server.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
BROWSER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        uninstrument()


async def test_one_trace_spans_agui_agent_a2a_remote_and_the_mcp_tool_server(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    spans_file = tmp_path / "mcp-spans.jsonl"
    env = {**os.environ, "OBS_SPANS_FILE": str(spans_file), "PYTHONPATH": str(ROOT)}
    mcp = MCPClient("calc", StdioServer(sys.executable, [str(MCP_SERVER)], env=env), timeout=30)
    remote_tools = Toolkit()
    async with mcp:
        await remote_tools.register_mcp_client(mcp)
        remote_model = ScriptedModel([tool_use("add", "r1", a=1, b=2), "It is 3."])

        def calc() -> ReActAgent:
            return ReActAgent("calc", "You add.", remote_model, remote_tools)

        a2a_app = to_a2a(calc, sessions=SQLiteSession(tmp_path / "a2a.db"))
        async with running(a2a_app) as a2a_url:
            remote = A2AAgent(a2a_url, name="calc")

            def planner() -> ReActAgent:
                tools = Toolkit()
                tools.register_tool(remote.as_tool())
                script = [tool_use("calc", "c1", task="1+2"), "The sum is 3."]
                return ReActAgent("planner", "You plan.", ScriptedModel(script), tools)

            app = create_app(planner, sessions=SQLiteSession(tmp_path / "agui.db"))
            traceparent = f"00-{TRACE_ID}-{BROWSER_SPAN}-01"
            async with running(app) as base, httpx2.AsyncClient(base_url=base) as browser:
                events = await run_events(
                    browser,
                    "/agui",
                    run_input("t1", user("add 1 and 2", "m1")),
                    headers={"traceparent": traceparent},
                )
            await remote.aclose()
    assert events[-1]["type"] == "RUN_FINISHED"

    spans = {s.name: s for s in exporter.get_finished_spans()}
    served = spans["invoke_agent planner"]  # the AG-UI run
    tool = spans["execute_tool calc"]  # its call of the remote agent
    remote_run = spans["invoke_agent calc"]  # the A2A server's run
    mcp_call = spans["execute_tool add"]  # the remote agent's MCP client call
    for span in (served, tool, remote_run, mcp_call):
        assert format(span.context.trace_id, "032x") == TRACE_ID, span.name
    assert served.parent is not None and format(served.parent.span_id, "016x") == BROWSER_SPAN
    assert remote_run.parent is not None and remote_run.parent.span_id == tool.context.span_id
    # agentkit's MCP server (another process) continued it from params._meta.
    server_spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    (add,) = [s for s in server_spans if s["name"] == "execute_tool add"]
    assert add["trace_id"] == TRACE_ID
    assert add["parent_id"] == format(mcp_call.context.span_id, "016x")


async def test_an_agui_request_without_traceparent_starts_a_trace_of_its_own(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    app = create_app(
        lambda: ReActAgent("solo", "You answer.", ScriptedModel(["Hi."])),
        sessions=SQLiteSession(tmp_path / "agui.db"),
    )
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as browser:
        await run_events(browser, "/agui", run_input("t1", user("hello", "m1")))
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent solo"]
    assert span.parent is None

"""One trace across protocols: a browser's AG-UI request -> the served agent -> a remote agent
over A2A -> agentkit's MCP tool server, every hop continuing the W3C trace context (the
request's ``traceparent`` header, A2A request headers, MCP ``params._meta``).

Every server runs in this process (uvicorn, 127.0.0.1) but in its own tasks, started before
any span: a hop can only continue the trace from what its request carried. (Over stdio, to
another process: tests/test_obs_tracing.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import ReActAgent, Toolkit
from agentkit.a2a import A2AAgent, to_a2a
from agentkit.mcp import HttpServer, MCPClient, register_mcp_client
from agentkit.mcp._server import build_http_app
from agentkit.observability import instrument, uninstrument
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from tests._serve_helpers import run_events, run_input, running, user

pytestmark = pytest.mark.anyio
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
    served_tools = Toolkit()

    @served_tools.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    remote_tools = Toolkit()
    async with (
        running(build_http_app(served_tools)) as mcp_url,
        MCPClient("calc", HttpServer(f"{mcp_url}/mcp"), timeout=30) as mcp,
    ):
        await register_mcp_client(remote_tools, mcp)
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
    # The remote agent's MCP call, and agentkit's MCP server continuing it from params._meta.
    adds = [s for s in exporter.get_finished_spans() if s.name == "execute_tool add"]
    (mcp_call,) = [s for s in adds if s.parent and s.parent.span_id == remote_run.context.span_id]
    (mcp_served,) = [s for s in adds if s is not mcp_call]
    for span in (served, tool, remote_run, mcp_call, mcp_served):
        assert format(span.context.trace_id, "032x") == TRACE_ID, span.name
    assert served.parent is not None and format(served.parent.span_id, "016x") == BROWSER_SPAN
    assert tool.parent is not None and tool.parent.span_id == served.context.span_id
    assert remote_run.parent is not None and remote_run.parent.span_id == tool.context.span_id
    assert mcp_call.parent is not None and mcp_call.parent.span_id == remote_run.context.span_id
    assert mcp_served.parent is not None and mcp_served.parent.span_id == mcp_call.context.span_id
    assert mcp_served.attributes is not None
    assert mcp_served.attributes["mcp.method.name"] == "tools/call"


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

"""OpenTelemetry tracing: the span tree of a run with parallel tools, an MCP call, an
interrupt and a denied approval, compared with a checked-in expected tree."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import ReActAgent, Toolkit
from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.observability import conversation, instrument, is_instrumented, uninstrument
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools._response import ToolResponse
from tests._obs_otel import load_or_update, span_tree

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "obs_span_tree.json"
SERVER = ROOT / "tests" / "_obs_traced_server.py"
UPDATE = os.environ.get("AGENTKIT_UPDATE_FIXTURES") == "1"


class Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        assert data is not None
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out[metric.name] = list(metric.data.data_points)
        return out


@pytest.fixture
def traced() -> Iterator[Traced]:
    t = Traced()
    instrument(tracer_provider=t.provider, meter_provider=t.meters)
    try:
        yield t
    finally:
        uninstrument()


def _toolkit(started: anyio.Event) -> Toolkit:
    tk = Toolkit()

    @tk.tool
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        await anyio.sleep(0.01)
        return f"value of {key}"

    @tk.tool
    async def wait() -> str:
        """Wait for a long time."""
        started.set()
        await anyio.sleep(60)
        return "never"

    @tk.tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        return f"deleted {path}"

    return tk


async def _scenario(tk: Toolkit, started: anyio.Event) -> ReActAgent:
    model = ScriptedModel(
        [
            # run 1: two tool calls in parallel
            [tool_use("lookup", "c1", key="a"), tool_use("lookup", "c2", key="b")],
            "a and b found",
            # run 2: an MCP tool
            [tool_use("add", "c3", a=2, b=3)],
            "5",
            # run 3: interrupted while a tool runs
            [tool_use("wait", "c4")],
            # run 4: a call needing approval, denied
            [tool_use("delete", "c5", path="/tmp/x")],
            "not deleted",
        ],
        model_name="scripted-1",
    )
    agent = ReActAgent("helper", "You help.", model, tk, print_hint=False)
    with conversation("conv-1"):
        await agent("find a and b")
        await agent("add 2 and 3")
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await agent("wait")

            tg.start_soon(run)
            await started.wait()
            await agent.interrupt()
        reply = await agent("delete /tmp/x")
        assert reply.metadata["pending_tool_calls"][0]["id"] == "c5"
        await agent.resume({"c5": "keep that file"})
    return agent


async def test_span_tree_of_parallel_tools_mcp_interrupt_and_denied_approval(
    traced: Traced, tmp_path: Path
) -> None:
    spans_file = tmp_path / "server-spans.jsonl"
    env = {**os.environ, "OBS_SPANS_FILE": str(spans_file), "PYTHONPATH": str(ROOT)}
    client = MCPClient("calc", StdioServer(sys.executable, [str(SERVER)], env=env), timeout=30)
    started = anyio.Event()
    tk = _toolkit(started)
    async with client:
        await register_mcp_client(tk, client)
        await _scenario(tk, started)
    spans = traced.exporter.get_finished_spans()
    tree = span_tree(spans)
    expected = load_or_update(FIXTURE, tree, UPDATE)
    assert json.loads(json.dumps(tree)) == expected

    # The agentkit MCP server continued the trace: its execute_tool span is a child of
    # the client's execute_tool span (traceparent sent in params._meta over stdio).
    client_span = next(s for s in spans if s.name == "execute_tool add")
    server_spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    served = next(s for s in server_spans if s["name"] == "execute_tool add")
    ctx = client_span.get_span_context()
    assert served["trace_id"] == format(ctx.trace_id, "032x")
    assert served["parent_id"] == format(ctx.span_id, "016x")
    assert served["attributes"]["mcp.method.name"] == "tools/call"


async def test_metrics_token_usage_and_duration(traced: Traced) -> None:
    started = anyio.Event()
    model = ScriptedModel([[tool_use("lookup", "c1", key="a")], "done"], model_name="m1")
    agent = ReActAgent("a", "s", model, _toolkit(started), print_hint=False)
    await agent("go")
    metrics = traced.metrics()
    durations = metrics["gen_ai.client.operation.duration"]
    assert sum(p.count for p in durations) == 2
    assert durations[0].attributes["gen_ai.operation.name"] == "chat"
    assert durations[0].attributes["gen_ai.request.model"] == "m1"
    tokens = metrics["gen_ai.client.token.usage"]
    kinds = sorted(p.attributes["gen_ai.token.type"] for p in tokens)
    assert kinds == ["input", "output"]
    out = next(p for p in tokens if p.attributes["gen_ai.token.type"] == "output")
    assert out.count == 2 and out.sum > 0


async def test_content_only_with_capture_content() -> None:
    started = anyio.Event()
    for capture in (False, True):
        t = Traced()
        instrument(tracer_provider=t.provider, capture_content=capture)
        try:
            model = ScriptedModel([[tool_use("lookup", "c1", key="secret")], "the answer"])
            agent = ReActAgent("a", "sys prompt", model, _toolkit(started), print_hint=False)
            await agent("my question")
        finally:
            uninstrument()
        spans = t.exporter.get_finished_spans()
        dumped = json.dumps([dict(s.attributes or {}) for s in spans])
        for needle in ("my question", "sys prompt", "the answer", "secret", "value of secret"):
            assert (needle in dumped) is capture, (needle, capture)
        if capture:
            chat = next(s for s in spans if s.name.startswith("chat"))
            messages = json.loads(chat.attributes["gen_ai.input.messages"])  # type: ignore[arg-type]
            assert messages == [
                {"role": "user", "parts": [{"type": "text", "content": "my question"}]}
            ]
            assert json.loads(chat.attributes["gen_ai.system_instructions"]) == [  # type: ignore[arg-type]
                {"type": "text", "content": "sys prompt"}
            ]


async def test_model_error_sets_error_type_and_status(traced: Traced) -> None:
    from agentkit.exceptions import RateLimitError

    model = ScriptedModel([RateLimitError("slow down", provider="scripted")])
    agent = ReActAgent("a", "s", model, print_hint=False)
    with pytest.raises(RateLimitError):
        await agent("go")
    spans = {s.name: s for s in traced.exporter.get_finished_spans()}
    for name in ("chat scripted", "invoke_agent a"):
        assert spans[name].attributes["error.type"] == "RateLimitError"  # type: ignore[index]
        assert spans[name].status.status_code.name == "ERROR"


def test_uninstrument_restores_no_ops() -> None:
    assert not is_instrumented()
    instrument(tracer_provider=TracerProvider())
    assert is_instrumented()
    uninstrument()
    assert not is_instrumented()


async def test_mcp_tool_over_http_has_server_address_and_port(traced: Traced) -> None:
    from tests._mcp_helpers import http_server

    with http_server("http") as (config, _proc):
        client = MCPClient("remote", config, timeout=30)
        tk = Toolkit()
        async with client:
            await register_mcp_client(tk, client, enable_funcs=["echo"])
            model = ScriptedModel([[tool_use("echo", "c1", text="hi")], "done"])
            await ReActAgent("a", "s", model, tk, print_hint=False)("go")
    span = next(s for s in traced.exporter.get_finished_spans() if s.name == "execute_tool echo")
    attributes = dict(span.attributes or {})
    port = int(config.url.rsplit(":", 1)[1].split("/")[0])
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == port
    assert attributes["network.transport"] == "tcp"
    assert attributes["mcp.method.name"] == "tools/call"
    assert span.status.status_code.name == "UNSET"


async def test_tracing_a_call_without_tools_changes_nothing(traced: Traced) -> None:
    model = ScriptedModel([[tool_use("ghost", "c1")], "ok"])
    agent = ReActAgent("a", "s", model, print_hint=False)
    await agent("go")
    results = [b for m in await agent.memory.get_memory() for b in m.get_blocks("tool_result")]
    assert results[0]["output"] == "Tool 'ghost' does not exist (no tools)."
    assert agent.pending_tool_calls == []
    span = next(s for s in traced.exporter.get_finished_spans() if s.name == "execute_tool ghost")
    assert span.status.status_code.name == "ERROR"


async def test_the_agent_span_says_why_the_run_stopped(traced: Traced) -> None:
    """``agentkit.stop_reason`` on the span is the result's ``stop_reason``, limits included."""
    from agentkit import UsageLimits

    tk = Toolkit()

    @tk.tool
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    def agent(model: ScriptedModel, **kwargs: Any) -> ReActAgent:
        return ReActAgent("a", "s", model, tk, print_hint=False, **kwargs)

    limited = agent(ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "x"]))
    summarized = agent(ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "sum"]), max_iters=1)
    results = [
        await limited.run("go", usage_limits=UsageLimits(max_requests=1)),
        await summarized.run("go"),
        await agent(ScriptedModel(["plain"])).run("go"),
    ]
    spans = [s for s in traced.exporter.get_finished_spans() if s.name == "invoke_agent a"]
    assert [r.stop_reason for r in results] == ["usage_limit", "max_iters", "final"]
    assert [(s.attributes or {})["agentkit.stop_reason"] for s in spans] == [
        r.stop_reason for r in results
    ]
    assert (spans[0].attributes or {})["agentkit.usage_limit"] == "max_requests"
    assert "agentkit.usage_limit" not in (spans[1].attributes or {})


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("openai", "openai"),
        ("anthropic", "anthropic"),
        ("bedrock", "aws.bedrock"),
        ("vertex", "gcp.vertex_ai"),
        ("gemini", "gcp.gemini"),
        ("azure", "azure.ai.openai"),
        ("mistral", "mistral_ai"),
        ("deepseek", "deepseek"),
        ("groq", "groq"),
        ("vllm", "vllm"),  # not a well-known value: kept as it is
    ],
)
async def test_provider_name_is_the_conventions_value(
    traced: Traced, provider: str, expected: str
) -> None:
    """``gen_ai.provider.name`` uses the GenAI conventions' well-known values."""
    model = ScriptedModel(["hi"])
    model.provider = provider
    await ReActAgent("a", "s", model, print_hint=False)("go")
    for span in traced.exporter.get_finished_spans():
        assert (span.attributes or {})["gen_ai.provider.name"] == expected, span.name
    points = traced.metrics()["gen_ai.client.operation.duration"]
    assert {p.attributes["gen_ai.provider.name"] for p in points} == {expected}


async def test_captured_content_of_a_long_conversation_stays_valid_json() -> None:
    """Cut to size, the captured messages must still parse (backends render them as JSON),
    keep the latest turns, and never carry the bytes of an image."""
    import base64

    from agentkit.messages import image_block

    t = Traced()
    instrument(tracer_provider=t.provider, capture_content=True)
    tk = Toolkit()

    @tk.tool
    def shot() -> ToolResponse:
        """Take a screenshot."""
        return ToolResponse([image_block(b"\x89PNG" + bytes(200_000), "image/png")])

    try:
        model = ScriptedModel([*(f"answer {k} " + "x" * 9000 for k in range(11))])
        agent = ReActAgent("a", "s", model, tk, print_hint=False)
        for k in range(11):
            await agent(f"question {k} " + "y" * 9000)
        model.responses.append([tool_use("shot", "c1")])
        model.responses.append("seen")
        await agent("look")
    finally:
        uninstrument()
    spans = t.exporter.get_finished_spans()
    png = base64.b64encode(b"\x89PNG" + bytes(200_000)).decode()[:100]
    for span in spans:
        for key, value in (span.attributes or {}).items():
            assert png not in str(value), key
            if key in ("gen_ai.input.messages", "gen_ai.output.messages"):
                json.loads(str(value))
    chats = [s for s in spans if s.name.startswith("chat")]
    last = json.loads(str((chats[-1].attributes or {})["gen_ai.input.messages"]))
    assert last[-1]["role"] == "tool" and last[-1]["parts"][0]["type"] == "tool_call_response"
    before = json.loads(str((chats[-3].attributes or {})["gen_ai.input.messages"]))
    assert before[-1]["parts"][0]["content"].startswith("question 10")
    result = next(s for s in spans if s.name == "execute_tool shot")
    assert "image" in str((result.attributes or {})["gen_ai.tool.call.result"])


async def test_a_long_tool_call_and_result_are_captured_as_valid_json() -> None:
    """Tool arguments and results go through the same size cap as the messages: cut to size,
    they must still parse (a cut in the middle of the JSON made the whole value unreadable)."""
    t = Traced()
    instrument(tracer_provider=t.provider, capture_content=True)
    tk = Toolkit()

    @tk.tool
    def echo(text: str) -> str:
        """Echo the text, many times.

        Args:
            text: What to echo.
        """
        return text * 20

    try:
        model = ScriptedModel([[tool_use("echo", "c1", text="z" * 70_000)], "done"])
        await ReActAgent("a", "s", model, tk, print_hint=False)("go")
    finally:
        uninstrument()
    span = next(s for s in t.exporter.get_finished_spans() if s.name == "execute_tool echo")
    for key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        value = str((span.attributes or {})[key])
        assert len(value) <= 64_000 + 16, key
        json.loads(value)

"""Spans over OTLP/HTTP to a local collector stub, and no OpenTelemetry import by default."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agentkit import ReActAgent, Toolkit
from agentkit.observability import instrument, uninstrument
from agentkit.testing import ScriptedModel, tool_use


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


async def test_spans_reach_an_otlp_http_collector(
    collector: tuple[str, list[tuple[str, str, bytes]]],
) -> None:
    endpoint, received = collector
    provider = TracerProvider(resource=Resource.create({"service.name": "agentkit-test"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    instrument(tracer_provider=provider)
    try:
        tk = Toolkit()

        @tk.tool
        def double(x: int) -> int:
            """Double a number.

            Args:
                x: The number.
            """
            return 2 * x

        model = ScriptedModel([[tool_use("double", "c1", x=21)], "42"], model_name="m-otlp")
        await ReActAgent("calc", "s", model, tk, print_hint=False)("double 21")
    finally:
        uninstrument()
    assert provider.force_flush()
    provider.shutdown()
    assert received, "the collector got nothing"
    spans = []
    for path, content_type, body in received:
        assert path == "/v1/traces"
        assert content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            service = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
            assert service["service.name"] == "agentkit-test"
            for ss in rs.scope_spans:
                assert ss.scope.name == "agentkit"
                spans.extend(ss.spans)
    by_name = {s.name: s for s in spans}
    assert sorted(by_name) == ["chat m-otlp", "execute_tool double", "invoke_agent calc"]
    root = by_name["invoke_agent calc"]
    assert by_name["execute_tool double"].parent_span_id == root.span_id
    assert by_name["chat m-otlp"].parent_span_id == root.span_id
    assert _attrs(by_name["execute_tool double"])["gen_ai.tool.call.id"] == "c1"
    assert _attrs(by_name["chat m-otlp"])["gen_ai.request.model"] == "m-otlp"
    assert _attrs(root)["gen_ai.agent.name"] == "calc"


def test_opentelemetry_is_not_imported_without_instrument() -> None:
    code = textwrap.dedent(
        """
        import sys, anyio
        from agentkit import ReActAgent, Toolkit
        from agentkit.testing import ScriptedModel, tool_use
        import agentkit.observability

        def echo(text: str) -> str:
            '''Echo.

            Args:
                text: Text.
            '''
            return text

        async def main():
            tk = Toolkit()
            tk.register_tool_function(echo)
            model = ScriptedModel([[tool_use("echo", text="hi")], "hi"])
            await ReActAgent("a", "s", model, tk, print_hint=False)("go")

        anyio.run(main)
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print(loaded)
        assert not loaded, loaded
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=50
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "[]"

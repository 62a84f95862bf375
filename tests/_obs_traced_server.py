"""An agentkit MCP server (stdio) with tracing on, writing its spans to $OBS_SPANS_FILE."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agentkit.mcp import serve
from agentkit.observability import instrument
from agentkit.tools import Toolkit
from tests._obs_otel import FileSpanExporter


def build() -> Toolkit:
    tk = Toolkit()

    @tk.tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    return tk


if __name__ == "__main__":
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(os.environ["OBS_SPANS_FILE"])))
    instrument(tracer_provider=provider)
    anyio.run(serve, build())

"""The tracing soak and the Bedrock interrupt benchmark run end to end (tiny sizes, no
timing assertions: what is checked is that every span is exported and every cut is counted)."""

from __future__ import annotations

import pytest

from benchmarks.mock_server import MockLLMServer


async def test_tracing_soak_exports_every_span_and_samples() -> None:
    from benchmarks import soak_tracing

    async with MockLLMServer(interval=0.001) as server:
        result = await soak_tracing.soak(
            server.url + "/v1", seconds=1.5, every=0.5, workers=2, log=False
        )
    assert result["runs"] > 0
    assert result["spans_exported"] == result["runs"] * soak_tracing.SPANS_PER_RUN
    assert result["dropped"] == 0
    assert len(result["samples"]) >= 2  # the first and the last, at least (timing-free)
    assert all(s["rss_mb"] > 0 and s["objects"] > 0 for s in result["samples"])
    assert "|" in soak_tracing.table(result)


async def test_bedrock_interrupt_benchmark_cuts_every_variant() -> None:
    pytest.importorskip("aiobotocore")
    from benchmarks import bedrock_interrupt

    result = await bedrock_interrupt.measure(3, block=2)
    assert {"raw", "model", "agent"} <= result.keys()
    assert result["agent_p99_ratio"] > 0
    assert "agent.interrupt()" in bedrock_interrupt.table(result)

"""The benchmark suite works: the mock LLM server speaks both wire formats correctly, and
``python -m benchmarks.run --quick`` runs every scenario end to end. No timing assertions."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import anthropic
import openai
import pytest

from benchmarks import kit
from benchmarks.baselines import httpx_run, sdk_run, tool_schema
from benchmarks.mock_server import MockLLMServer, plan_turn
from benchmarks.run import SCENARIOS

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Where every test run leaves the quick run's machine-readable summaries, one per part (kept
# by CI as an artifact; docs/benchmarks.md, "Published numbers").
SUMMARIES = ROOT / "benchmarks" / "results" / "ci"

TOOLS = [tool_schema("step")]
HALVES = [
    "turns,streaming,parallel,concurrency,interrupts",
    "startup,mcp_call,mcp_fleet,a2a",
    "cross_worker_interrupts,long_history,scale",
    "durable",
    "serve",
]


@pytest.fixture
async def server():
    async with MockLLMServer(interval=0.005) as srv:
        yield srv


def test_summaries_render_as_one_release_table():
    from benchmarks.summary import render

    machine = {"cpus": 2, "python": "3.11.7", "implementation": "CPython", "platform": "Linux"}
    figure = {"scenario": "s", "metric": "m", "value": 2e-6, "unit": "s", "baseline": 4e-6,
              "baseline_name": "raw loop", "ratio": 0.5, "target": "<= 1.0x", "met": True,
              "note": ""}  # fmt: skip
    part = {"format": "agentkit-benchmark-summary/1", "date": "2026-12-02T00:00:00+00:00",
            "commit": "abc", "quick": True, "rounds": 1, "scenarios": ["turns"],
            "machine": machine, "load": {"start": [0.5, 0.4, 0.3], "end": [0.7, 0.5, 0.3]},
            "figures": [figure]}  # fmt: skip
    table = render([part, {**part, "scenarios": ["scale"]}])
    assert "2 CPUs" in table and "load average 0.50 at the start, 0.70 at the end" in table
    assert table.count("| s | m | 2.0 us | 4.0 us (raw loop) | 0.50x | <= 1.0x: met |") == 2


def test_smoke_halves_cover_all_scenarios():
    halves = ",".join(HALVES).split(",")
    assert sorted(halves) == sorted(SCENARIOS)


def test_plan_turn_is_decided_by_tool_results_only():
    assert [c[2] for c in plan_turn("steps-3", 0, "t").calls] == [{"i": 0}]
    assert plan_turn("steps-3", 2, "t").calls[0][:2] == ("call_2", "t")
    assert plan_turn("steps-3", 3, "t").text == "Done: 3 tool results received."
    assert len(plan_turn("parallel-8", 0, "t").calls) == 8
    assert len({c[0] for c in plan_turn("parallel-8", 0, "t").calls}) == 8
    assert plan_turn("parallel-8", 8, "t").calls == []
    long = plan_turn("text-50", 0, "t")
    assert long.text_pieces == 50
    assert long.text.endswith("Done: 0 tool results received.")
    big = plan_turn("bigcall-50", 0, "t")
    assert big.arg_pieces == 50
    assert len(big.calls[0][2]["text"]) == 50 * 7
    assert plan_turn("bigcall-50", 1, "t").calls == []
    assert plan_turn("stream-forever", 5, "t").forever
    assert plan_turn("hello", 0, "t").text


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_sdk_and_httpx_loops_complete_steps(server, stream):
    import httpx2

    client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        answer = await sdk_run(client, "steps-4", TOOLS, kit.raw_step, stream=stream)
    finally:
        await client.close()
    kit.check_answer(answer, 4)
    async with httpx2.AsyncClient() as raw:
        answer = await httpx_run(
            raw, server.base_url, "parallel-3", TOOLS, kit.raw_step, stream=stream
        )
    kit.check_answer(answer, 3)
    # 5 + 2 requests, and keep-alive: one connection per client.
    assert server.requests == 7
    assert server.connections == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sdk_round_trip(server, stream):
    client = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)
    tools = [
        {"name": "step", "description": "d", "input_schema": TOOLS[0]["function"]["parameters"]}
    ]
    messages: list[dict] = [{"role": "user", "content": "go"}]
    try:
        for _ in range(5):
            if stream:
                async with client.messages.stream(
                    model="parallel-2", max_tokens=10, messages=messages, tools=tools
                ) as events:
                    message = await events.get_final_message()
            else:
                message = await client.messages.create(
                    model="parallel-2", max_tokens=10, messages=messages, tools=tools
                )
            calls = [b for b in message.content if b.type == "tool_use"]
            if not calls:
                break
            assert message.stop_reason == "tool_use"
            assert [c.input for c in calls] == [{"i": 0}, {"i": 1}]
            messages.append({"role": "assistant", "content": [c.model_dump() for c in calls]})
            results = [{"type": "tool_result", "tool_use_id": c.id, "content": "ok"} for c in calls]
            messages.append({"role": "user", "content": results})
    finally:
        await client.close()
    assert message.content[0].text == "Done: 2 tool results received."


async def test_stream_forever_streams_until_the_client_leaves(server):
    client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="stream-forever", messages=[{"role": "user", "content": "x"}], stream=True
        )
        async with stream:
            tokens = 0
            async for chunk in stream:
                tokens += bool(chunk.choices[0].delta.content)
                if tokens == 5:
                    break
    finally:
        await client.close()
    assert tokens == 5


# Split in parts, each far below its limit on an idle machine; the limit is generous because a
# shared CI machine may run them at a fraction of a core (a smoke run, not a measurement).
@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "only", HALVES, ids=["loops", "startup", "cross_worker", "durable", "serve"]
)
def test_quick_run_covers_every_scenario(tmp_path, only):
    out = tmp_path / "bench.json"
    summary_path = SUMMARIES / f"summary-{only.split(',')[0]}.json"
    command = [sys.executable, "-m", "benchmarks.run", "--quick", "--only", only]
    proc = subprocess.run(
        [*command, "--out", str(out), "--summary", str(summary_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=190,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| scenario |" in proc.stdout
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert result["config"]["quick"] is True
    assert result["machine"]["cpus"] >= 1
    errors = [r for r in rows if r["note"].startswith(("error", "n/a"))]
    assert not errors, errors
    summary = json.loads(summary_path.read_text())
    assert summary["format"] == "agentkit-benchmark-summary/1"
    assert summary["quick"] is True and summary["scenarios"] == only.split(",")
    assert summary["machine"]["cpus"] >= 1 and len(summary["load"]["start"]) == 3
    assert [(f["metric"], f["ratio"]) for f in summary["figures"]] == [
        (r["metric"], r["ratio"]) for r in rows
    ]
    # every scenario module contributed rows with an agentkit figure and (where it has one)
    # a baseline measured in the same run
    assert len({r["scenario"] for r in rows}) >= len(only.split(","))
    mcp_rows = [r for r in rows if r["metric"] == "agentkit MCPClient.call_tool per call"]
    for row in mcp_rows:  # counted by the server: agentkit must not list tools per call
        assert row["met"] is True, row
    for row in rows:
        if row["metric"] in ("agentkit vs ideal", "agentkit vs httpx2 floor"):
            continue
        if row["metric"].startswith("client CPU added per turn"):
            # a difference of two medians: any sign is a measurement; the ratio needs a floor
            assert isinstance(row["value"], float), row
            if row["baseline"] is not None:
                assert row["ratio"] == pytest.approx(row["value"] / row["baseline"]), row
            continue
        assert row["value"] is not None and row["value"] > 0, row
        if row["baseline_name"]:
            assert row["baseline"] is not None and row["baseline"] > 0, row
            assert row["ratio"] == pytest.approx(row["value"] / row["baseline"]), row

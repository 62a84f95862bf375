"""Interrupting a Bedrock ``ConverseStream`` mid-stream: agentkit vs a raw aiobotocore cut.

Run: ``python -m benchmarks.bedrock_interrupt [--quick] [--n 200] [--json PATH]``

The server is the local Bedrock Runtime double of ``tests/test_models_bedrock_converse.py``
(``tests/_wire_server.py``): it answers ``ConverseStream`` with real
``application/vnd.amazon.eventstream`` frames (``messageStart``, one text
``contentBlockDelta``) and then holds the stream open, as a model still generating does. The
real aiobotocore client signs every request (SigV4, dummy credentials). Three variants, each
cut at the same point, once the first text arrived, timed from the cut to the awaited task's
end (the HTTP response closed):

- raw: ``client.converse_stream(...)`` read by a task with ``async for``, the stream closed in
  a ``finally`` (what a careful raw user writes), cut by ``task.cancel()``;
- model: ``BedrockConverseModel.request_stream`` read by a task, cut by ``task.cancel()``;
- agent: ``ReActAgent`` over the same model, its first ``TextDelta`` seen by an event
  listener, cut by ``agent.interrupt()`` (the reply comes back marked interrupted).

Variants are interleaved in blocks of ten (drift hits all three alike). The target (issue 32):
the agent's p99 <= 1.3x the raw cut's p99, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.common import ROOT, percentile

sys.path.insert(0, str(ROOT / "tests"))  # the wire server the adapter's tests use

from _wire_server import Stream, WireServer, aws_event_frame

from agentkit import ReActAgent, Toolkit
from agentkit.events import TextDelta
from agentkit.messages import Msg
from agentkit.models import BedrockConverseModel, ModelRequest

MODEL = "us.amazon.nova-lite-v1:0"
KEYS = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}
TARGET = 1.3


def _event(kind: str, data: dict[str, Any]) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return aws_event_frame(json.dumps(data).encode(), headers)


def _hanging() -> Stream:
    frames = [
        _event("messageStart", {"role": "assistant"}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "partial"}}),
    ]
    headers = {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "r-1"}
    return Stream(events=frames, headers=headers, then="hang")


Start = Callable[[], Awaitable[tuple["asyncio.Task[Any]", Callable[[], Awaitable[None]]]]]


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _raw(client: Any, server: WireServer) -> Start:
    async def start() -> tuple[asyncio.Task[Any], Callable[[], Awaitable[None]]]:
        server.script(_hanging())
        first = asyncio.Event()

        async def job() -> None:
            answer = await client.converse_stream(
                modelId=MODEL, messages=[{"role": "user", "content": [{"text": "go"}]}]
            )
            stream = answer["stream"]
            try:
                async for event in stream:
                    if "contentBlockDelta" in event:
                        first.set()
            finally:
                stream.close()

        task = asyncio.create_task(job())
        await first.wait()
        return task, lambda: _cancel(task)

    return start


def _model(model: BedrockConverseModel, server: WireServer) -> Start:
    async def start() -> tuple[asyncio.Task[Any], Callable[[], Awaitable[None]]]:
        server.script(_hanging())
        first = asyncio.Event()

        async def job() -> None:
            async for _ in model.request_stream(ModelRequest([Msg("user", "go", "user")])):
                first.set()

        task = asyncio.create_task(job())
        waiting = asyncio.ensure_future(first.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not first.is_set():  # the request failed before its first chunk: say why
            waiting.cancel()
            task.result()
        return task, lambda: _cancel(task)

    return start


def _agent(model: BedrockConverseModel, server: WireServer) -> Start:
    first = asyncio.Event()

    def listen(event: object) -> None:
        if isinstance(event, TextDelta):
            first.set()

    async def start() -> tuple[asyncio.Task[Any], Callable[[], Awaitable[None]]]:
        server.script(_hanging())
        first.clear()
        agent: ReActAgent[Any, Any] = ReActAgent(
            name="bench", sys_prompt="s", model=model, toolkit=Toolkit(), print_hint=False
        )
        agent.add_event_listener(listen)
        task = asyncio.create_task(agent("go"))
        await first.wait()

        async def stop() -> None:
            await agent.interrupt()
            reply = await task
            if not (reply.metadata or {}).get("interrupted"):
                raise AssertionError(f"reply not marked interrupted: {reply.metadata!r}")

        return task, stop

    return start


async def _cut(start: Start) -> float:
    _task, stop = await start()
    t0 = time.perf_counter()
    await stop()
    return time.perf_counter() - t0


async def measure(n: int, block: int = 10) -> dict[str, Any]:
    """``n`` cuts per variant (interleaved in blocks); percentiles and the p99 ratio."""
    import aiobotocore.session
    import botocore.config

    out: dict[str, list[float]] = {"raw": [], "model": [], "agent": []}
    async with WireServer() as server:
        config = botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"})
        session = aiobotocore.session.get_session()
        creator = session.create_client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=server.url,
            config=config,
            **KEYS,
        )
        model = BedrockConverseModel(
            MODEL,
            region="us-east-1",
            aws_access_key=KEYS["aws_access_key_id"],
            aws_secret_key=KEYS["aws_secret_access_key"],
            base_url=server.url,
            stream=True,
        )
        async with creator as client:
            starts = {
                "raw": _raw(client, server),
                "model": _model(model, server),
                "agent": _agent(model, server),
            }
            for start in starts.values():  # warm: first connection, first parse
                await _cut(start)
            done = 0
            while done < n:
                size = min(block, n - done)
                for name, start in starts.items():
                    for _ in range(size):
                        out[name].append(await _cut(start))
                done += size
        await model.aclose()
    result: dict[str, Any] = {"n": n}
    for name, values in out.items():
        result[name] = {"p50_s": percentile(values, 0.5), "p99_s": percentile(values, 0.99)}
    raw_p99 = result["raw"]["p99_s"]
    result["agent_p99_ratio"] = result["agent"]["p99_s"] / raw_p99
    result["model_p99_ratio"] = result["model"]["p99_s"] / raw_p99
    result["met"] = result["agent_p99_ratio"] <= TARGET
    return result


def table(result: dict[str, Any]) -> str:
    """A Markdown table of one run."""
    lines = ["| variant | p50 | p99 | p99 / raw |", "|---|---|---|---|"]
    raw = result["raw"]["p99_s"]
    names = {
        "raw": "raw aiobotocore stream, `task.cancel()`",
        "model": "`BedrockConverseModel.request_stream`, `task.cancel()`",
        "agent": "`ReActAgent`, `agent.interrupt()`",
    }
    for key, label in names.items():
        p50, p99 = result[key]["p50_s"], result[key]["p99_s"]
        lines.append(f"| {label} | {p50 * 1e3:.2f} ms | {p99 * 1e3:.2f} ms | {p99 / raw:.2f}x |")
    verdict = "met" if result["met"] else "MISSED"
    lines.append(
        f"\nagent p99 / raw p99 = {result['agent_p99_ratio']:.2f}x (<= {TARGET}x: {verdict})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bedrock_interrupt")
    parser.add_argument("--n", type=int, default=200, help="cuts per variant")
    parser.add_argument("--quick", action="store_true", help="20 cuts per variant")
    parser.add_argument("--json", default="", help="write the result here")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(20 if args.quick else max(1, args.n)))
    print(table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

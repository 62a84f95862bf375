"""A2A round-trip overhead per message, next to the AG-UI endpoint: same agent, same server.

``python -m benchmarks.a2a_roundtrip [--quick] [--messages 50] [--repeats 5]`` starts one
server process, ``agentkit serve --a2a`` as the CLI builds it (AG-UI at ``/agui``, A2A at
``/a2a``, one SQLite store), serving one agent whose model answers at once (a
``FunctionModel``: a short streamed text, no tool call, no network), so what is timed is
the protocol, the store and the agent loop, never a model. Each repeat sends ``--messages``
messages one after another in a fresh conversation over each protocol, interleaved (the
order alternates between repeats):

* A2A: ``await remote(text)`` (an ``A2AAgent``: the official ``a2a-sdk`` client,
  ``SendStreamingMessage``), one
  context; timed from the call to the completed task;
* AG-UI: ``POST /agui`` with the new message on one thread, timed from the request to the
  stream's ``RUN_FINISHED``.

Prints the per-message medians and their ratio, each the median over the repeats of the
per-repeat figure (the per-repeat ratio cancels most drift of a shared machine). The
benchmark suite runs it as the ``a2a`` scenario (``python -m benchmarks.run --only a2a``).

    python -m benchmarks.a2a_roundtrip serve DB   # the server process it starts
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Config, Row, ratio

WARM_UP = 5  # messages per protocol before the first timed one


def make_agent() -> Any:
    """The served agent: answers every message with a short streamed text."""
    from agentkit import ReActAgent
    from agentkit.testing import FunctionModel, text

    def answer(messages: list[Any], tools: Any) -> Any:
        return [text(f"Answer to message {len(messages)}.")]

    model = FunctionModel(answer, stream=True, chunks_per_block=4)
    return ReActAgent("bench", "You are a benchmark.", model, print_hint=False)


def _serve(db: str) -> None:
    import uvicorn

    from agentkit.cli._serve_cmd import with_a2a
    from agentkit.serve import create_app
    from agentkit.session import SQLiteSession

    sessions = SQLiteSession(db)
    app = create_app(make_agent, sessions=sessions, max_runs_per_client=None)
    app = with_a2a(app, make_agent, sessions=sessions, auth_token=None)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


async def _agui_message(client: Any, thread: str, text: str) -> None:
    body = {
        "threadId": thread,
        "runId": os.urandom(8).hex(),
        "messages": [{"id": os.urandom(8).hex(), "role": "user", "content": text}],
    }
    async with client.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200, await response.aread()
        last = ""
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                last = line
    assert '"RUN_FINISHED"' in last, last


async def _timed(n: int, send: Any) -> float:
    """The median seconds of ``n`` messages sent one after another."""
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        await send(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def measure(messages: int, repeats: int) -> dict[str, Any]:
    """Per-message medians (seconds) of both protocols and their ratio, over ``repeats``."""
    import httpx2

    from agentkit.a2a import A2AAgent

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "benchmarks.a2a_roundtrip", "serve", str(Path(tmp) / "b.db")]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            *cmd, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        port = int((await proc.stdout.readline()).split()[1])
        base = f"http://127.0.0.1:{port}"
        a2a_ms: list[float] = []
        agui_ms: list[float] = []
        ratios: list[float] = []
        try:
            async with httpx2.AsyncClient(base_url=base, timeout=60) as agui:
                for _ in range(300):  # the server is up once it answers
                    try:
                        if (await agui.get("/healthz")).status_code == 200:
                            break
                    except httpx2.HTTPError:
                        pass
                    await asyncio.sleep(0.05)
                remote = A2AAgent(f"{base}/a2a", name="bench")
                try:
                    for _ in range(WARM_UP):  # connections, the card, first imports, caches
                        await remote("warm up")
                        await _agui_message(agui, "warm-up", "warm up")
                    for r in range(repeats):
                        remote.reset()  # a fresh context and thread: equal history lengths
                        thread = f"bench-{r}"

                        async def over_a2a(i: int) -> None:
                            answer = (await remote(f"message {i}")).get_text()
                            assert answer.startswith("Answer"), answer

                        async def over_agui(i: int, thread: str = thread) -> None:
                            await _agui_message(agui, thread, f"message {i}")

                        if r % 2 == 0:
                            a = await _timed(messages, over_a2a)
                            g = await _timed(messages, over_agui)
                        else:
                            g = await _timed(messages, over_agui)
                            a = await _timed(messages, over_a2a)
                        a2a_ms.append(a * 1e3)
                        agui_ms.append(g * 1e3)
                        ratios.append(a / g)
                finally:
                    await remote.aclose()
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 15)
    return {
        "messages": messages,
        "repeats": repeats,
        "a2a_ms": statistics.median(a2a_ms),
        "agui_ms": statistics.median(agui_ms),
        "ratio": statistics.median(ratios),
        "per_repeat": {"a2a_ms": a2a_ms, "agui_ms": agui_ms, "ratio": ratios},
    }


async def run(cfg: Config) -> list[Row]:
    """The benchmark suite's ``a2a`` scenario."""
    found = await measure(5 if cfg.quick else 50, cfg.rounds)
    value, baseline = found["a2a_ms"] / 1e3, found["agui_ms"] / 1e3
    return [
        Row(
            "a2a",
            "A2A round trip per message (A2AAgent -> to_a2a, streaming)",
            value,
            "s",
            baseline=baseline,
            baseline_name="AG-UI POST /agui -> RUN_FINISHED, same agent, same server",
            ratio=ratio(value, baseline),
            note=f"{found['messages']} messages per protocol and repeat, one conversation "
            "each; an instant FunctionModel (no tool, no network)",
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 messages, 1 repeat")
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    messages, repeats = (10, 1) if args.quick else (args.messages, args.repeats)
    found = asyncio.run(measure(messages, repeats))
    if args.json:
        print(json.dumps(found, indent=2))
    else:
        print(
            f"{messages} messages x {repeats} repeats, per-message medians: "
            f"A2A {found['a2a_ms']:.2f} ms, AG-UI {found['agui_ms']:.2f} ms, "
            f"ratio A2A/AG-UI {found['ratio']:.2f}"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "serve":
        _serve(sys.argv[2])
    else:
        sys.exit(main())

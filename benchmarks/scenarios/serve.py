"""Serving load: N concurrent AG-UI SSE conversations against one ``agentkit serve`` process
(scripted streaming model), M of them stopped mid-stream with ``POST /threads/{id}/interrupt``.

Checked, not timed: every stream validates against the ag-ui-protocol models, starts once and
finishes once (``success`` or ``cancelled`` as expected), and its streamed text equals what
the server stored (nothing lost, nothing duplicated); every stored thread passes the memory
invariant. Timed: p50/p99 from the interrupt request to the end of that run's SSE stream,
next to the same figure for a bare Starlette SSE endpoint whose producer task is cancelled
(the least any Python SSE server can do), measured in the same run.

The 200 users are not one process: the conversations are spread over ``CLIENTS`` client
processes (as 200 browsers would be), so one client's event loop falling behind its share of
the streams does not count as server latency. Each client process also reports its own
event-loop lag, printed in the row's note.

    python -m benchmarks.run --only serve
    python -m benchmarks.scenarios.serve PORT DB DELAY  # the server process it starts
    python -m benchmarks.scenarios.serve client PORT MODE FIRST STEP N M OUT  # one client
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Config, Row, percentile, ratio

CLIENTS = 4  # client processes sharing the conversations
TEXT_CHUNKS = 30
CHUNK_DELAY = 0.1  # a reply streams for about 3 s: interrupts land mid-stream
# ``--quick`` only proves the scenario runs and its checks pass: 2 client processes, and
# 25 ms chunks. The latest stop point (the 17th text delta; the first 8 are "Working.") still
# leaves 21 answer chunks, half a second, for the Stop to land before the run would finish.
QUICK_CLIENTS = 2
QUICK_CHUNK_DELAY = 0.025


def make_agent(chunk_delay: float = CHUNK_DELAY) -> Any:
    """The served agent: one quick tool call, then a long streamed answer.

    Args:
        chunk_delay: Seconds between the streamed chunks of each block.
    """
    from agentkit import ReActAgent
    from agentkit.testing import FunctionModel, text, tool_use
    from agentkit.tools import Toolkit

    async def step(i: int) -> str:
        """A quick step.

        Args:
            i: Step number.
        """
        return f"step {i} done"

    def decide(messages: list[Any], tools: Any) -> Any:
        if messages[-1].has_blocks("tool_result"):
            words = " ".join(f"word{i}" for i in range(TEXT_CHUNKS * 3))
            return [text(f"Answer: {words}.")]
        return [text("Working."), tool_use("step", i=1)]

    toolkit = Toolkit()
    toolkit.register_tool_function(step)
    model = FunctionModel(
        decide, stream=True, chunk_delay=chunk_delay, chunks_per_block=TEXT_CHUNKS
    )
    return ReActAgent("bench", "You are a benchmark.", model, toolkit, print_hint=False)


def baseline_app(chunk_delay: float = CHUNK_DELAY) -> Any:
    """A bare Starlette SSE endpoint streaming chunks; ``POST /stop/{id}`` cancels it.

    A stream that ends on its own leaves its finished task in ``tasks``; a benchmark run is
    short, so nothing prunes them.

    Args:
        chunk_delay: Seconds between the streamed chunks, as for the agentkit replies.
    """
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    tasks: dict[str, asyncio.Task[None]] = {}

    async def stream(request: Any) -> Any:
        key = request.path_params["key"]
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def produce() -> None:
            try:
                for i in range(TEXT_CHUNKS):
                    await asyncio.sleep(chunk_delay)
                    queue.put_nowait(f'data: {{"delta": "word{i}"}}\n\n')
            finally:
                queue.put_nowait(None)

        tasks[key] = asyncio.get_running_loop().create_task(produce())

        async def body() -> Any:
            while (item := await queue.get()) is not None:
                yield item
            yield 'data: {"type": "end"}\n\n'

        return StreamingResponse(body(), media_type="text/event-stream")

    async def stop(request: Any) -> Any:
        task = tasks.pop(request.path_params["key"])
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return JSONResponse({"stopped": True})

    return Starlette(
        routes=[
            Route("/stream/{key}", stream, methods=["POST"]),
            Route("/stop/{key}", stop, methods=["POST"]),
        ]
    )


def _serve(port: int, db: str, chunk_delay: float) -> None:
    import functools

    import uvicorn

    _pin(server=True)

    from agentkit.serve import create_app
    from agentkit.session import SQLiteSession

    # The load client is one client with hundreds of streams: no per-client cap here.
    factory = functools.partial(make_agent, chunk_delay)
    app = create_app(factory, sessions=SQLiteSession(db), max_runs_per_client=None)
    mount = baseline_app(chunk_delay)
    from starlette.routing import Mount

    app.router.routes.append(Mount("/baseline", app=mount))
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", port))  # 0: the OS picks; printed for the benchmark process
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=1,
        timeout_keep_alive=120,  # pooled client connections outlive slow rounds
        backlog=4096,
    )
    uvicorn.Server(config).run(sockets=[sock])


class _Conversation:
    def __init__(self, index: int, interrupt_after: int | None) -> None:
        self.thread = f"load-{index}"
        self.interrupt_after = interrupt_after  # text events before Stop (None: never)
        self.lines: list[str] = []  # raw ``data:`` payloads, parsed after the round
        self.latency: float | None = None
        self.server_latency: float | None = None  # the Stop's Server-Timing ``stream-end``

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


_TEXT = '"type":"TEXT_MESSAGE_CONTENT"'


async def _converse(client: Any, conv: _Conversation) -> None:
    """One conversation; the client keeps each event's text and parses it after the round.

    The load generator shares the machine (and, with 2 cores, a core) with the server: per
    event it does a prefix check and a substring count, no JSON parsing, so what the
    latency shows is the server, not the client's event loop falling behind.
    """
    body = {
        "threadId": conv.thread,
        "runId": os.urandom(8).hex(),
        "messages": [{"id": os.urandom(8).hex(), "role": "user", "content": "go"}],
    }
    stop: asyncio.Task[Any] | None = None
    t0 = 0.0
    texts = 0
    after = conv.interrupt_after
    async with client.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            conv.lines.append(line[6:])
            if stop is None and after is not None and _TEXT in line:
                texts += 1
                if texts >= after:
                    t0 = time.perf_counter()
                    stop = asyncio.create_task(client.post(f"/threads/{conv.thread}/interrupt"))
    if stop is not None:
        conv.latency = time.perf_counter() - t0
        answer = await stop
        assert answer.json()["status"] == "stopped"
        conv.server_latency = _stream_end(answer.headers.get("server-timing", ""))


def _stream_end(header: str) -> float | None:
    """Seconds of ``stream-end;dur=<ms>`` in a ``Server-Timing`` header (None: absent)."""
    for part in header.split(","):
        name, _, params = part.strip().partition(";")
        if name == "stream-end" and params.startswith("dur="):
            return float(params[4:]) / 1e3
    return None


def _check(conv: _Conversation) -> None:
    """Valid AG-UI, one start, one finish as expected, streamed text == stored text."""
    from tests._serve_helpers import validate

    events = conv.events
    for event in events:
        validate(event)
    kinds = [e["type"] for e in events]
    assert kinds.count("RUN_STARTED") == 1, kinds
    assert kinds[-1] == "RUN_FINISHED", kinds[-3:]
    expected = "cancelled" if conv.interrupt_after is not None else "success"
    assert events[-1]["outcome"]["type"] == expected, events[-1]
    streamed = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    snapshot = events[-2]["messages"]
    stored = "".join(m.get("content") or "" for m in snapshot if m["role"] == "assistant")
    assert streamed == stored, (
        f"{conv.thread}: streamed {len(streamed)} chars, stored {len(stored)}"
    )
    calls = kinds.count("TOOL_CALL_START")
    assert calls == kinds.count("TOOL_CALL_RESULT"), conv.thread  # every call answered
    assert calls == 1 or conv.interrupt_after is not None


def _stop_point(i: int, m: int) -> int | None:
    """After how many text deltas conversation ``i`` is stopped (None: never)."""
    return 3 + (i * 7) % (TEXT_CHUNKS // 2) if i < m else None


async def _baseline(client: Any, indices: list[int], m: int) -> list[float]:
    """Interrupt-to-stream-end of the bare SSE endpoint under the same load: the same
    streams, the first ``m`` stopped at the same points as the agentkit conversations."""

    async def one(i: int, after: int | None) -> float | None:
        seen = 0
        stop: asyncio.Task[Any] | None = None
        t0 = 0.0
        async with client.stream("POST", f"/baseline/stream/b{i}") as response:
            async for line in response.aiter_lines():
                seen += line.startswith("data: ")
                if stop is None and after is not None and seen >= after:
                    t0 = time.perf_counter()
                    stop = asyncio.create_task(client.post(f"/baseline/stop/b{i}"))
        if stop is None:
            return None
        ended = time.perf_counter() - t0  # the stream's end, as for the agentkit streams
        await stop
        return ended

    found = await asyncio.gather(*(one(i, _stop_point(i, m)) for i in indices))
    return [x for x in found if x is not None]


async def _check_memory(db: Path) -> int:
    from agentkit.memory import check_memory_invariant
    from agentkit.session import SQLiteSession

    store = SQLiteSession(db)
    ids = await store.list_ids()
    for key in ids:
        state = await store.load_state(key)
        assert state is not None
        agent = make_agent()
        agent.load_state_dict(state["agent"])
        check_memory_invariant(await agent.memory.get_memory())
    return len(ids)


async def _wait_up(client: Any) -> None:
    for _ in range(300):
        with contextlib.suppress(Exception):
            if (await client.get("/healthz")).status_code == 200:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError("the serve benchmark server did not start")


async def _lag_monitor(lags: list[float], done: asyncio.Event) -> None:
    """Record how late a 5 ms sleep wakes up: this client's event-loop lag."""
    while not done.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.005)
        lags.append(time.perf_counter() - t0 - 0.005)


async def _warm(client: Any, connections: int) -> None:
    """Open ``connections`` keep-alive connections, as a browser has by the time it stops a
    run (the page, its script, the thread list): a Stop then does not wait for a TCP
    handshake and an accept on a busy server. Both the agentkit and the baseline phase
    start this way."""
    await asyncio.gather(*(client.get("/healthz") for _ in range(connections)))


async def _client_part(port: int, mode: str, indices: list[int], m: int) -> dict[str, Any]:
    """One client process's share: the agentkit conversations or the baseline streams."""
    import httpx2

    n = len(indices)
    limits = httpx2.Limits(max_connections=2 * n + 10, max_keepalive_connections=2 * n)
    lags: list[float] = []
    done = asyncio.Event()
    monitor = asyncio.create_task(_lag_monitor(lags, done))
    async with httpx2.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits
    ) as client:
        await _warm(client, n + sum(_stop_point(i, m) is not None for i in indices))
        if mode == "agentkit":
            convs = [_Conversation(i, _stop_point(i, m)) for i in indices]
            await asyncio.gather(*(_converse(client, c) for c in convs))
            result: dict[str, Any] = {
                "convs": [
                    [c.thread, c.interrupt_after, c.lines, c.latency, c.server_latency]
                    for c in convs
                ]
            }
        else:
            result = {"latencies": await _baseline(client, indices, m)}
    done.set()
    await monitor
    result["lag_p99"] = percentile(lags, 0.99)
    return result


async def _clients(
    port: int, mode: str, n: int, m: int, tmp: Path, clients: int
) -> list[dict[str, Any]]:
    """Run ``clients`` client processes at once, conversation ``i`` in process ``i % clients``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = []
    for k in range(clients):
        out = tmp / f"{mode}-{k}.json"
        args = ["client", str(port), mode, str(k), str(clients), str(n), str(m), str(out)]
        cmd = [sys.executable, "-m", "benchmarks.scenarios.serve", *args]
        procs.append((await asyncio.create_subprocess_exec(*cmd, cwd=ROOT, env=env), out))
    results = []
    for proc, out in procs:
        assert await proc.wait() == 0, f"serve benchmark client failed ({out.name})"
        results.append(json.loads(out.read_text()))
    return results


def _pin(server: bool) -> None:
    """Give the server a core of its own: the clients stand in for browsers on other machines.

    With two or more cores the server runs on the first and every client process on the
    others, so the load generator's CPU is not taken from the server it measures.
    """
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) >= 2:
        os.sched_setaffinity(0, cores[:1] if server else cores[1:])


def _client_main(argv: list[str]) -> None:
    _pin(server=False)
    port, mode, first, step, n, m, out = argv
    indices = list(range(int(first), int(n), int(step)))
    result = asyncio.run(_client_part(int(port), mode, indices, int(m)))
    Path(out).write_text(json.dumps(result))


async def _round(
    port: int, n: int, m: int, tmp: Path, clients: int
) -> tuple[list[_Conversation], list[float], float]:
    """Both phases; returns the conversations, the baseline latencies, the worst client lag."""
    convs = []
    parts = await _clients(port, "agentkit", n, m, tmp, clients)
    for part in parts:
        for thread, after, lines, latency, server_latency in part["convs"]:
            conv = _Conversation(int(thread.split("-")[1]), after)
            conv.lines, conv.latency, conv.server_latency = lines, latency, server_latency
            _check(conv)
            convs.append(conv)
    base_parts = await _clients(port, "baseline", n, m, tmp, clients)
    base = [x for part in base_parts for x in part["latencies"]]
    lag = max(part["lag_p99"] for part in (*parts, *base_parts))
    return convs, base, lag


async def run(cfg: Config) -> list[Row]:
    import httpx2

    n = 20 if cfg.quick else cfg.agents
    m = 5 if cfg.quick else n // 4
    clients = QUICK_CLIENTS if cfg.quick else CLIENTS
    delay = QUICK_CHUNK_DELAY if cfg.quick else CHUNK_DELAY
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "threads.db"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "benchmarks.scenarios.serve", "0", str(db), str(delay)]
        proc = await asyncio.create_subprocess_exec(
            *cmd, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        port = int((await proc.stdout.readline()).split()[1])
        try:
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                await _wait_up(client)
            convs, base, lag = await _round(port, n, m, Path(tmp), clients)
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 15)
        threads = await _check_memory(db)
    lat = [c.latency for c in convs if c.latency is not None]
    events = sum(len(c.lines) for c in convs)
    note = (
        f"{n} conversations from {clients} client processes, {m} stopped mid-stream, {events} "
        f"events: all valid AG-UI, none lost or duplicated; {threads} stored threads pass the "
        f"memory invariant; worst client event-loop lag p99 {lag * 1e3:.0f} ms"
    )
    rows = []
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        value, baseline = percentile(lat, q), percentile(base, q)
        rows.append(
            Row(
                "serve",
                f"interrupt -> SSE stream end, {name}",
                value,
                "s",
                baseline=baseline,
                baseline_name="bare Starlette SSE, same load, task.cancel()",
                ratio=ratio(value, baseline),
                target="p99 < 100 ms" if name == "p99" else "",
                met=(value < 0.1) if name == "p99" else None,
                note=note if name == "p50" else "",
            )
        )
    server = [c.server_latency for c in convs if c.server_latency is not None]
    assert len(server) == len(lat), "every Stop answers with its Server-Timing"
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        rows.append(
            Row(
                "serve",
                f"interrupt -> last event written, server side (Server-Timing), {name}",
                percentile(server, q),
                "s",
                note="from the Stop request's handler to the stream's last event handed to "
                "the socket; the rows above add the client's side",
            )
        )
    return rows


if __name__ == "__main__":
    if sys.argv[1] == "client":
        _client_main(sys.argv[2:])
    else:
        _serve(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))

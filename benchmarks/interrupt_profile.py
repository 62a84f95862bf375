"""The cost of a mid-stream interrupt, from ``await agent.interrupt()`` to the reply.

Each interrupt cuts a streaming answer after its first text chunk (as the
``interrupts`` scenario's ``model mid-stream`` rows do) and the script counts the Python
calls of that span with cProfile (deterministic: no clock involved), then times it::

    python -m benchmarks.interrupt_profile              # in process: a stream that waits
    python -m benchmarks.interrupt_profile --http       # OpenAIChatModel, mock server
    python -m benchmarks.interrupt_profile --top 40     # the most called functions too

In process, the model yields one text chunk and then waits forever (as a socket read
does), so what is counted is the agent's part alone: the cancel landing, the stream's
end, the run's cancel scope, ``finalize`` (stored partial, reply, ``Interrupted``) and
``ReplyFinished``. With ``--http`` the HTTP client's part is counted too.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from collections.abc import AsyncGenerator

import anyio

from agentkit import ReActAgent, Toolkit
from agentkit.events import AgentEvent, TextDelta
from agentkit.models import ChatModel, ChatResponse, ModelRequest


class WaitingModel(ChatModel):
    """Streams one text chunk, then waits forever (a read that never completes)."""

    def __init__(self) -> None:
        super().__init__("waiting", True)

    async def _request(self, request: ModelRequest) -> ChatResponse:
        raise NotImplementedError

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        yield ChatResponse(content=[{"type": "text", "text": "tok "}])
        await anyio.sleep_forever()


async def _interrupts(model: ChatModel, n: int, profiler: cProfile.Profile | None) -> list[float]:
    first = asyncio.Event()

    def listen(event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            first.set()

    out = []
    for _ in range(n):
        first.clear()
        agent = ReActAgent("bench", "You are a benchmark agent.", model, Toolkit())
        agent.add_event_listener(listen)
        task = asyncio.create_task(agent("go"))
        await first.wait()
        if profiler is not None:
            profiler.enable()
        t0 = time.perf_counter()
        await agent.interrupt()
        reply = await task
        out.append(time.perf_counter() - t0)
        if profiler is not None:
            profiler.disable()
        if not (reply.metadata or {}).get("interrupted"):
            raise AssertionError(f"reply not marked interrupted: {reply.metadata!r}")
    return out


def _run(args: argparse.Namespace, base_url: str | None) -> None:
    async def go() -> None:
        model: ChatModel = WaitingModel()
        if base_url is not None:
            from agentkit.models import OpenAIChatModel

            model = OpenAIChatModel("stream-forever", api_key="x", base_url=base_url, stream=True)
        await _interrupts(model, 50, None)  # warm up
        profiler = cProfile.Profile()
        await _interrupts(model, args.n, profiler)
        stats = pstats.Stats(profiler)
        table = stats.stats  # type: ignore[attr-defined]
        python = sum(counts[1] for where, counts in table.items() if where[0] != "~")
        print(
            f"calls per interrupt: {stats.total_calls / args.n:.1f}, "  # type: ignore[attr-defined]
            f"{python / args.n:.1f} of Python functions (builtins left out)"
        )
        if args.top:
            stats.sort_stats("ncalls").print_stats(args.top)
        times = sorted(await _interrupts(model, args.n, None))
        p50, p99 = statistics.median(times), times[int(len(times) * 0.99) - 1]
        print(f"{args.n} interrupts: p50 {p50 * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us (wall)")
        if base_url is not None:
            await model.aclose()

    anyio.run(go)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--top", type=int, default=0, help="print the N most called functions")
    parser.add_argument("--http", action="store_true", help="OpenAIChatModel over the mock server")
    args = parser.parse_args()
    if args.http:
        from benchmarks.mock_server import MockServerProcess

        with MockServerProcess() as server:
            _run(args, server.base_url)
        return
    _run(args, None)


if __name__ == "__main__":
    main()

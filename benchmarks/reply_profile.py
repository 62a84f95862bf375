"""Per-reply cost of agentkit itself: ``await agent("hi")`` against an instant model.

Counts the cancel scopes, task groups and checkpoints one reply enters (a counting shim
around anyio's, installed by this script only), times replies, and optionally writes a
cProfile of them::

    python -m benchmarks.reply_profile                 # counts and time per reply
    python -m benchmarks.reply_profile --stream        # agent.stream() replies
    python -m benchmarks.reply_profile --profile out.prof --n 2000
    python -m benchmarks.reply_profile --http --model text-20 --model-stream --stream

The model answers at once (no network, no script to walk), so what is measured is the
agent: its run state, memory writes, messages, events, scopes and hooks. With ``--http``
the model is an ``OpenAIChatModel`` on the lean HTTP path, against ``benchmarks.mock_server``
(started in a child process when no URL is given): the reply's whole client cost.
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel

from agentkit import ReActAgent, Toolkit
from agentkit.messages import ToolUseBlock
from agentkit.models import ChatModel, ChatResponse, ModelRequest

COUNTS: Counter[str] = Counter()
WHERE = False


class InstantModel(ChatModel):
    """Calls ``step`` until ``steps`` results are in, then answers "ok"; at once."""

    def __init__(self, stream: bool, steps: int, deltas: int = 1) -> None:
        super().__init__("instant", stream)
        self.steps = steps
        self.deltas = deltas

    def _answer(self, request: ModelRequest) -> ChatResponse:
        done = sum(1 for m in request.messages if m.role == "user" and m.has_blocks("tool_result"))
        if done < self.steps:
            call: ToolUseBlock = {
                "type": "tool_use",
                "id": f"c{done}",
                "name": "step",
                "input": {"i": done},
            }
            return ChatResponse(content=[call])
        return ChatResponse(content=[{"type": "text", "text": "ok"}])

    async def request(self, request: ModelRequest) -> ChatResponse:
        return self._answer(request)

    async def request_stream(self, request: ModelRequest) -> Any:
        answer = self._answer(request)
        if answer.content[0]["type"] != "text" or self.deltas < 2:
            yield answer
            return
        for i in range(1, self.deltas + 1):  # cumulative chunks, one word more each
            yield ChatResponse(content=[{"type": "text", "text": "ok " * i}])


def _count(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        COUNTS[name] += 1
        if WHERE:  # the first caller outside anyio: who pays for it
            frame = sys._getframe(1)
            while frame.f_back is not None and (
                "/anyio/" in frame.f_code.co_filename or "contextlib" in frame.f_code.co_filename
            ):
                frame = frame.f_back
            path = frame.f_code.co_filename.split("site-packages/")[-1]
            COUNTS[f"  {name} from {path}:{frame.f_code.co_name}"] += 1
        return fn(*args, **kwargs)

    return counted


def install_counters() -> None:
    """Count scopes, task groups and checkpoints (this process only)."""
    from anyio._backends import _asyncio  # the class anyio.CancelScope() makes here

    scope = _asyncio.CancelScope
    setattr(scope, "__enter__", _count("cancel scopes", scope.__enter__))  # noqa: B010
    group = _asyncio.TaskGroup
    setattr(group, "start_soon", _count("tasks started", group.start_soon))  # noqa: B010
    anyio.create_task_group = _count("task groups", anyio.create_task_group)
    anyio.lowlevel.checkpoint = _count("checkpoints", anyio.lowlevel.checkpoint)
    anyio.lowlevel.checkpoint_if_cancelled = _count(
        "checkpoint_if_cancelled", anyio.lowlevel.checkpoint_if_cancelled
    )


async def _replies(agent: ReActAgent, n: int, stream: bool) -> None:
    memory = agent.memory
    for _ in range(n):
        if stream:
            async with agent.stream("hi") as events:
                async for _event in events:
                    pass
        else:
            await agent("hi")
        await memory.clear()  # a conversation of one turn: the prompt stays the same size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--stream", action="store_true", help="agent.stream() replies")
    parser.add_argument("--model-stream", action="store_true", help="a streaming model")
    parser.add_argument("--profile", help="write a cProfile of the timed replies here")
    parser.add_argument("--deltas", type=int, default=1, help="text chunks per answer")
    parser.add_argument("--steps", type=int, default=0, help="tool calls per reply")
    parser.add_argument(
        "--http",
        nargs="?",
        const="",
        help="base URL of benchmarks.mock_server (none given: one is started; else in process)",
    )
    parser.add_argument("--model", help="with --http: the mock server's scenario (text-20...)")
    parser.add_argument("--where", action="store_true", help="with --count: by caller")
    parser.add_argument("--count", action="store_true", help="count scopes per reply")
    args = parser.parse_args()
    toolkit = Toolkit()

    @toolkit.tool
    async def step(i: int) -> str:
        """One step.

        Args:
            i: Step number.
        """
        return f"step {i} ok"

    if args.http == "":  # a mock server of our own, in a child process
        from benchmarks.mock_server import MockServerProcess

        with MockServerProcess() as server:
            args.http = server.base_url
            _run(args, toolkit)
        return
    _run(args, toolkit)


def _run(args: argparse.Namespace, toolkit: Toolkit) -> None:
    model: ChatModel = InstantModel(args.model_stream, args.steps, args.deltas)
    if args.http:  # the mock server: "steps-N" calls the first tool N times, else answers
        from agentkit.models import OpenAIChatModel

        name = args.model or (f"steps-{args.steps}" if args.steps else "answer")
        model = OpenAIChatModel(name, api_key="x", base_url=args.http, stream=args.model_stream)
    agent = ReActAgent("bench", "You are a benchmark agent.", model, toolkit)

    async def go() -> None:
        await _replies(agent, 200, args.stream)  # warm up
        if args.count:
            global WHERE
            WHERE = args.where
            install_counters()
            await _replies(agent, 100, args.stream)
            for name, n in sorted(COUNTS.items()):
                print(f"{name}: {n / 100:.2f} per reply")
            return
        profiler = cProfile.Profile() if args.profile else None
        start, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        await _replies(agent, args.n, args.stream)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        print(
            f"{args.n} replies: {wall / args.n * 1e6:.1f} us wall, "
            f"{used / args.n * 1e6:.1f} us CPU per reply"
        )

    anyio.run(go)


if __name__ == "__main__":
    main()

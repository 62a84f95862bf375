"""Profile agentkit's hot paths with pyinstrument (a benchmark-only tool: ``pip install
pyinstrument``). Writes text and HTML reports under ``benchmarks/results/``.

    python -m benchmarks.profile                    # every target
    python -m benchmarks.profile --target agent-http-stream --runs 50

Targets: ``adapter-http``, ``adapter-http-stream`` (OpenAIChatModel in a hand loop),
``agent-http``, ``agent-http-stream`` (ReActAgent over HTTP, steps-20), ``agent-inprocess``
(ReActAgent + ScriptedModel, steps-20), ``concurrent`` (200 agents x steps-3).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.baselines import tool_schema
from benchmarks.common import ROOT, Config
from benchmarks.mock_server import MockServerProcess
from benchmarks.scenarios.turns import _hand_loop, _script

OUT = ROOT / "benchmarks" / "results"
Job = Callable[[], Awaitable[Any]]


def _jobs(base_url: str, steps: int) -> dict[str, Callable[[], Job]]:
    def adapter(stream: bool) -> Callable[[], Job]:
        def make() -> Job:
            model = kit.openai_model(f"steps-{steps}", base_url, stream=stream)
            return lambda: _hand_loop(model, [tool_schema("step")])

        return make

    def agent(stream: bool) -> Callable[[], Job]:
        def make() -> Job:
            model = kit.openai_model(f"steps-{steps}", base_url, stream=stream)
            toolkit = kit.toolkit_with(kit.step)
            return lambda: kit.ask(kit.make_agent(model, toolkit))

        return make

    def inprocess() -> Job:
        from agentkit.testing import ScriptedModel

        toolkit = kit.toolkit_with(kit.step)
        return lambda: kit.ask(kit.make_agent(ScriptedModel(_script(steps)), toolkit))

    def concurrent() -> Job:
        model = kit.openai_model("steps-3", base_url, stream=False)
        toolkit = kit.toolkit_with(kit.step)

        async def batch() -> None:
            await asyncio.gather(*(kit.ask(kit.make_agent(model, toolkit)) for _ in range(200)))

        return batch

    return {
        "adapter-http": adapter(False),
        "adapter-http-stream": adapter(True),
        "agent-http": agent(False),
        "agent-http-stream": agent(True),
        "agent-inprocess": inprocess,
        "concurrent": concurrent,
    }


async def _profile(name: str, job: Job, runs: int) -> None:
    from pyinstrument import Profiler

    await job()  # warm-up
    profiler = Profiler(interval=0.0002, async_mode="disabled")
    profiler.start()
    for _ in range(runs):
        await job()
    profiler.stop()
    OUT.mkdir(parents=True, exist_ok=True)
    text = profiler.output_text(unicode=False, color=False, show_all=False)
    (OUT / f"profile_{name}.txt").write_text(text)
    (OUT / f"profile_{name}.html").write_text(profiler.output_html())
    print(f"== {name}: {OUT / f'profile_{name}.txt'}")


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile")
    parser.add_argument("--target", default="", help="comma-separated targets (default: all)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=Config().steps)
    args = parser.parse_args(argv)
    with MockServerProcess() as server:

        async def go() -> None:
            jobs = _jobs(server.base_url, args.steps)
            names = [t for t in args.target.split(",") if t] or list(jobs)
            for name in names:
                runs = max(1, args.runs // 20) if name == "concurrent" else args.runs
                await _profile(name, jobs[name](), runs)

        asyncio.run(go())


if __name__ == "__main__":
    main()

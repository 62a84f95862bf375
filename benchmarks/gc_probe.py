"""Counts, not timings: what a waiting turn holds, and how often the collector runs.

Two probes, both deterministic (they repeat exactly from run to run on the same code):

* **held while waiting**: ``N`` agents (copies of one template, as in ``scenarios/scale``)
  each start a turn whose model request is never answered, then the probe counts the
  gc-tracked objects alive (``len(gc.get_objects())`` after ``gc.collect()``) against the
  count before the turns started, per turn. Two models: an in-process ``ChatModel`` whose
  ``request`` waits on an ``anyio.Event`` (only agentkit's own frames and ledger), and the
  ``OpenAIChatModel`` over HTTP against the mock server's never-answered ``stream-forever``
  (what a ``scale`` turn holds, the HTTP client's read included). The pooled connections are
  made before the count starts, so they do not count.
* **collections per phase**: the ``scale`` scenario's latency phases (2,000 turns, 500 in
  flight, on random idle conversations among 1,000 and then 10,000 held ones), with
  ``gc.callbacks`` counting the collections of each generation per phase. A phase with more
  than 10 generation-1 collections gets a full collection (CPython 3.11's rule: more than
  10 since the last full one, and promotions over a quarter of the old generation).

Run ``python -m benchmarks.gc_probe`` (``--turns``, ``--held``, ``--active`` to resize).
"""

from __future__ import annotations

import argparse
import gc
import types
from collections import Counter
from typing import Any

import anyio
import httpx2

from benchmarks import kit
from benchmarks.common import Config, require
from benchmarks.mock_server import MockServerProcess
from benchmarks.scenarios.scale import _phase

_TEMPLATE_TEXT = "Hello! How can I help?"


def _blocking_model() -> Any:
    """A ``ChatModel`` whose requests wait until ``release`` is set, then answer a text."""
    (chat_model, chat_response) = require("agentkit.models", "ChatModel", "ChatResponse")

    class Blocking(chat_model):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__("blocking", stream=False)
            self.release = anyio.Event()
            self.waiting = 0

        async def _request(self, request: Any) -> Any:
            self.waiting += 1
            await self.release.wait()
            return chat_response(content=[{"type": "text", "text": "done"}])

    return Blocking()


def _conversations(template: Any, n: int) -> list[Any]:
    """``n`` idle conversations with a short history, as ``scale`` holds them."""
    (memory_cls,) = require("agentkit.memory", "InMemoryMemory")
    (msg_cls,) = require("agentkit.messages", "Msg")
    return [
        template.copy(
            memory=memory_cls(
                [
                    msg_cls("user", f"Hello, I am user {i}.", "user"),
                    msg_cls("bench", _TEMPLATE_TEXT, "assistant"),
                ]
            )
        )
        for i in range(n)
    ]


def _by_type() -> Counter[str]:
    return Counter(_type_name(o) for o in gc.get_objects())


def _type_name(obj: object) -> str:
    name = type(obj).__qualname__
    code = None  # which coroutine or function: the layers to look at
    if isinstance(obj, types.CoroutineType):
        code = obj.cr_code
    elif isinstance(obj, types.AsyncGeneratorType):
        code = obj.ag_code
    elif isinstance(obj, types.GeneratorType):
        code = obj.gi_code
    elif isinstance(obj, types.FunctionType):
        code = obj.__code__
    elif isinstance(obj, types.FrameType):
        code = obj.f_code
    return name if code is None else f"{name} {code.co_qualname}"


async def _held(agents: list[Any], started: Any, types: bool) -> float:
    """Objects held per waiting turn: start one turn per agent, count once all wait.

    With ``types``, print the kinds of objects held, per turn, most first.
    """
    async with anyio.create_task_group() as tg:
        gc.collect()
        before = len(gc.get_objects())
        kinds = _by_type() if types else None
        for agent in agents:
            tg.start_soon(agent, "One more question.")
        while True:  # the server's count, or the model's: polled, nothing to wait on
            if await started():
                break
            await anyio.sleep(0.01)
        gc.collect()
        held = len(gc.get_objects()) - before
        if kinds is not None:
            grown = _by_type()
            grown.subtract(kinds)
            for name, count in grown.most_common(100):
                print(f"  {count / len(agents):6.2f}  {name}")
        tg.cancel_scope.cancel()
    return held / len(agents)


async def held_in_process(n: int, *, types: bool = False) -> float:
    """Tracked objects per turn waiting on an in-process model (agentkit's frames only)."""
    model = _blocking_model()
    template = kit.make_agent(model, kit.toolkit_with(kit.step))
    warm = _conversations(template, 2)
    model.release.set()
    for agent in warm:  # first turns: lazily built caches, tool schemas
        await agent("Warm up.")
    model.release = anyio.Event()
    agents = _conversations(template, n)

    async def started() -> bool:
        return bool(model.waiting >= n + len(warm))

    return await _held(agents, started, types)


async def held_over_http(n: int, base_url: str, *, types: bool = False) -> float:
    """Tracked objects per turn waiting on the HTTP model (the ``scale`` turn's path)."""
    model = kit.openai_model("answer", base_url, stream=False)
    template = kit.make_agent(model, kit.toolkit_with(kit.step))
    try:
        agents = _conversations(template, n)
        async with anyio.create_task_group() as tg:  # n pooled connections, caches warm
            for agent in agents:
                tg.start_soon(agent, "Warm up.")
        model.model_name = "stream-forever"  # the server never answers these
        async with httpx2.AsyncClient() as client:
            base = (await client.get(base_url[: -len("/v1")] + "/stats")).json()["requests"]

            async def started() -> bool:
                stats = (await client.get(base_url[: -len("/v1")] + "/stats")).json()
                return bool(stats["requests"] - base - 1 >= n)  # less this probe's own

            agents = _conversations(template, n)
            return await _held(agents, started, types)
    finally:
        await model.aclose()


async def held_bare_loop(n: int, base_url: str, *, types: bool = False) -> float:
    """The same for the bare httpx2 loop of ``scale`` (its conversations are message dicts).

    The floor: what one ``client.post`` holds while it waits, plus the loop's own frame.
    """
    from benchmarks.baselines import SYSTEM, tool_schema

    url = base_url + "/chat/completions"
    tools = [tool_schema("step")]
    conversations = [
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Hello, I am user {i}."},
            {"role": "assistant", "content": _TEMPLATE_TEXT},
        ]
        for i in range(n)
    ]
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(timeout=None, limits=limits) as client:
        model = ["answer"]

        async def turn(messages: list[dict[str, Any]], text: str) -> None:
            messages.append({"role": "user", "content": text})
            payload = {"model": model[0], "messages": messages, "tools": tools}
            response = await client.post(url, json=payload)
            response.raise_for_status()
            messages.append(response.json()["choices"][0]["message"])

        async with anyio.create_task_group() as tg:  # n pooled connections
            for messages in conversations:
                tg.start_soon(turn, messages, "Warm up.")
        model[0] = "stream-forever"
        stats_url = base_url[: -len("/v1")] + "/stats"
        base = (await client.get(stats_url)).json()["requests"]

        async def started() -> bool:
            stats = (await client.get(stats_url)).json()
            return bool(stats["requests"] - base - 1 >= n)

        class Agent:  # the probe starts ``agent(text)``: a conversation's turn
            def __init__(self, messages: list[dict[str, Any]]) -> None:
                self.messages = messages

            async def __call__(self, text: str) -> None:
                await turn(self.messages, text)

        agents = [Agent(messages) for messages in conversations]
        return await _held(agents, started, types)


class _Collections:
    """Collections per generation, counted through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]

    def __enter__(self) -> _Collections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            self.counts[info["generation"]] += 1


async def collections(cfg: Config, small: int) -> list[tuple[int, list[int]]]:
    """Collections per generation in ``scale``'s phases: ``(held, [gen0, gen1, gen2])``."""
    model = kit.openai_model("answer", cfg.base_url, stream=False)
    template = kit.make_agent(model, kit.toolkit_with(kit.step))
    agents: list[Any] = []

    async def turn_on(index: int) -> None:
        await agents[index]("One more question.")

    turns = cfg.active * 4
    out = []
    try:
        agents[:] = _conversations(template, small)
        await _phase(turn_on, small, cfg.active, cfg.active)  # warm-up: connections, caches
        for held in (small, cfg.conversations):
            agents[len(agents) :] = _conversations(template, held)[len(agents) :]
            gc.collect()
            with _Collections() as meter:
                await _phase(turn_on, held, turns, cfg.active)
            out.append((held, meter.counts))
    finally:
        await model.aclose()
    return out


async def _main(args: argparse.Namespace) -> None:
    print(f"gc thresholds {gc.get_threshold()}")
    in_process = await held_in_process(args.active, types=args.types)
    print(f"held per waiting turn, in-process model: {in_process:.1f} gc-tracked objects")
    with MockServerProcess() as server:
        over_http = await held_over_http(args.active, server.base_url, types=args.types)
        print(f"held per waiting turn, OpenAIChatModel over HTTP: {over_http:.1f}")
        bare = await held_bare_loop(args.active, server.base_url, types=args.types)
        print(f"held per waiting turn, the bare httpx2 loop: {bare:.1f}")
        cfg = Config(base_url=server.base_url, conversations=args.held, active=args.active)
        for held, (young, middle, full) in await collections(cfg, args.small):
            print(
                f"{cfg.active * 4} turns, {cfg.active} in flight, {held} held: "
                f"gen-0 {young}, gen-1 {middle}, gen-2 {full} collections"
            )


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: ``python -m benchmarks.gc_probe``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--active", type=int, default=500, help="turns in flight")
    parser.add_argument("--small", type=int, default=1000, help="held in the first phase")
    parser.add_argument("--held", type=int, default=10_000, help="held in the second phase")
    parser.add_argument("--types", action="store_true", help="list what a waiting turn holds")
    anyio.run(_main, parser.parse_args(argv))


if __name__ == "__main__":
    main()

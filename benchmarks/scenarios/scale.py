"""Scale in one process: many live conversations (agents with memory), a few active at a time.

Two figures:

* memory per idle conversation beyond its messages: ``N`` agents made from one template
  (``template.copy()``), each after one in-process turn (a ``FunctionModel``, so no HTTP
  client state is counted), measured with tracemalloc as everything the conversations hold
  minus their messages (the messages are kept alive while the agents are dropped);
* p99 turn latency over HTTP (mock server, one shared ``OpenAIChatModel``) with ``active``
  turns in flight on randomly chosen idle conversations, first with ``small`` conversations
  alive, then with ``N``: flat means the number of idle conversations costs the active
  ones nothing.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from benchmarks import kit
from benchmarks.baselines import SYSTEM, tool_schema
from benchmarks.common import Config, NotAvailable, Row, percentile, require
from benchmarks.mock_server import openai_completion, plan_turn


def _conversation_model() -> Any:
    """A ``FunctionModel`` playing the mock server's ``steps-1``: one tool call, then an answer."""
    (function_model, tool_use) = require("agentkit.testing", "FunctionModel", "tool_use")

    def answer(messages: Any, info: Any) -> Any:
        results = sum(len(m.get_blocks("tool_result")) for m in messages)
        plan = plan_turn("steps-1", results, "step")
        return [tool_use(n, cid, **args) for cid, n, args in plan.calls] or plan.text

    return function_model(answer)


def _raw_conversation(prompt: str) -> list[dict[str, Any]]:
    """What the bare httpx2 loop holds after the same turn: its OpenAI message dicts.

    The assistant messages are parsed from the mock server's own response bytes, as
    ``response.json()["choices"][0]["message"]`` gives them to the loop.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": prompt},
    ]
    while True:
        results = sum(m["role"] == "tool" for m in messages)
        plan = plan_turn("steps-1", results, "step")
        body = {"model": "steps-1", "messages": messages}
        message = json.loads(openai_completion(body, plan))["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return messages
        for call in message["tool_calls"]:
            i = json.loads(call["function"]["arguments"])["i"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"step {i} ok"})


def _traced(make: Any, n: int) -> tuple[list[Any], float]:
    """``n`` objects from ``make(i)`` and the tracemalloc bytes they hold, per object."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = [make(i) for i in range(n)]
    gc.collect()
    size = (tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(kept)) / n
    tracemalloc.stop()
    return kept, size


async def _idle_bytes(n: int) -> tuple[float, float, float]:
    """Bytes per idle conversation after one tool-calling turn: (agentkit in all, beyond its
    messages, the bare httpx2 loop's message list)."""
    model = _conversation_model()
    template = kit.make_agent(model, kit.toolkit_with(kit.step))
    await template("warm-up")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    agents = [template.copy() for _ in range(n)]
    for i, agent in enumerate(agents):
        await agent(f"Please remember the number {i}.")
    model.requests.clear()  # the test model's own log, not the conversations'
    gc.collect()
    total = tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(agents)
    messages = [m for a in agents for m in a.memory.messages]
    held = sys.getsizeof(messages)
    del agents
    gc.collect()
    only_messages = tracemalloc.get_traced_memory()[0] - base - held
    tracemalloc.stop()
    del messages
    raw, raw_size = _traced(lambda i: _raw_conversation(f"Please remember the number {i}."), n)
    del raw
    return total / n, (total - only_messages) / n, raw_size


@dataclass
class _Phase:
    """One measured batch of turns."""

    p50: float
    p99: float
    cpu_per_turn: float  # seconds of this process's CPU (the mock server is another process)
    gc_per_turn: float  # seconds the collector ran, all generations
    full_collections: int
    longest_full: float


class _GcMeter:
    """Times the collector's runs through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.total = 0.0
        self.full: list[float] = []
        self._start = 0.0

    def __enter__(self) -> _GcMeter:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        pause = time.perf_counter() - self._start
        self.total += pause
        if info["generation"] == 2:
            self.full.append(pause)


async def _phase(
    turn_on: Callable[[int], Awaitable[object]], count: int, turns: int, active: int
) -> _Phase:
    """``turns`` turns, ``active`` at a time, on random idle conversations among the first
    ``count``."""
    busy: set[int] = set()
    latencies: list[float] = []
    left = [turns]
    rng = random.Random(7)

    # ``active`` workers taking turns until ``turns`` are done: no task waits in line holding
    # objects of its own (2,000 queued tasks held more gc-tracked objects than the turns).
    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            index = rng.randrange(count)
            while index in busy:
                index = rng.randrange(count)
            busy.add(index)
            start = time.perf_counter()
            try:
                await turn_on(index)
            finally:
                latencies.append(time.perf_counter() - start)
                busy.discard(index)

    cpu = time.process_time()
    with _GcMeter() as meter:
        async with anyio.create_task_group() as tg:
            for _ in range(min(active, turns)):
                tg.start_soon(worker)
    cpu = time.process_time() - cpu
    return _Phase(
        percentile(latencies, 0.5), percentile(latencies, 0.99), cpu / turns,
        meter.total / turns, len(meter.full), max(meter.full, default=0.0),
    )  # fmt: skip


def _tracked_per_object(make: Callable[[int], object], n: int) -> float:
    """Objects the garbage collector tracks per object ``make(i)`` builds (kept alive)."""
    gc.collect()
    before = len(gc.get_objects())
    kept = [make(i) for i in range(n)]
    gc.collect()  # untracks the dicts and tuples that hold only atomic values
    tracked = len(gc.get_objects()) - before - 1
    del kept
    return tracked / n


async def _growth(
    held: list[Any],
    make: Callable[[int], Any],
    turn_on: Callable[[int], Awaitable[object]],
    small: int,
    cfg: Config,
    *,
    freeze: bool = False,
) -> tuple[_Phase, _Phase]:
    """Turns with ``small`` conversations held, then with ``cfg.conversations``.

    With ``freeze``, ``gc.freeze()`` after the conversations are built (what a server does
    after loading them): the collector never scans them again.
    """
    turns = cfg.active * 4
    held[:] = [make(i) for i in range(small)]
    await _phase(turn_on, small, cfg.active, cfg.active)  # warm-up: connections, caches
    try:
        gc.collect()
        if freeze:
            gc.freeze()
        at_small = await _phase(turn_on, small, turns, cfg.active)
        held += [make(i) for i in range(small, cfg.conversations)]
        gc.collect()
        if freeze:
            gc.freeze()
        at_n = await _phase(turn_on, cfg.conversations, turns, cfg.active)
    finally:
        gc.unfreeze()
        held.clear()
    return at_small, at_n


def _describe(name: str, small: int, a: _Phase, b: _Phase, tracked: float) -> str:
    return (
        f"{name}: p99 {a.p99 * 1e3:.0f} -> {b.p99 * 1e3:.0f} ms, p50 {a.p50 * 1e3:.0f} -> "
        f"{b.p50 * 1e3:.0f} ms, CPU per turn {a.cpu_per_turn * 1e6:.0f} -> "
        f"{b.cpu_per_turn * 1e6:.0f} us, of it gc {a.gc_per_turn * 1e6:.0f} -> "
        f"{b.gc_per_turn * 1e6:.0f} us, full collections {a.full_collections} -> "
        f"{b.full_collections} (longest {b.longest_full * 1e3:.0f} ms), "
        f"{tracked:.1f} gc-tracked objects per idle conversation"
    )


async def _latency_rows(cfg: Config, scenario: str, small: int) -> list[Row]:
    """Turns with ``small`` and then ``cfg.conversations`` idle conversations held, for
    agentkit and for the bare httpx2 loop holding the same conversations as message dicts."""
    (memory_cls,) = require("agentkit.memory", "InMemoryMemory")
    (msg_cls,) = require("agentkit.messages", "Msg")
    import httpx2

    model = kit.openai_model("answer", cfg.base_url, stream=False)
    template = kit.make_agent(model, kit.toolkit_with(kit.step))

    def live(i: int) -> Any:  # an idle conversation with a short history
        history = [
            msg_cls("user", f"Hello, I am user {i}.", "user"),
            msg_cls("bench", "Hello! How can I help?", "assistant"),
        ]
        return template.copy(memory=memory_cls(history))

    def raw_live(i: int) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Hello, I am user {i}."},
            {"role": "assistant", "content": "Hello! How can I help?"},
        ]

    url = cfg.base_url + "/chat/completions"
    tools = [tool_schema("step")]
    n = cfg.conversations
    tracked = _tracked_per_object(live, 1000), _tracked_per_object(raw_live, 1000)
    agents: list[Any] = []
    raw: list[list[dict[str, Any]]] = []
    async with httpx2.AsyncClient(timeout=60) as client:

        async def raw_turn(index: int) -> None:
            messages = raw[index]
            messages.append({"role": "user", "content": "One more question."})
            payload = {"model": "answer", "messages": messages, "tools": tools}
            response = await client.post(url, json=payload)
            response.raise_for_status()
            messages.append(response.json()["choices"][0]["message"])

        async def agent_turn(index: int) -> None:
            await agents[index]("One more question.")

        try:
            # One variant's conversations are alive at a time: each is measured on its own heap.
            ak = await _growth(agents, live, agent_turn, small, cfg)
            floor = await _growth(raw, raw_live, raw_turn, small, cfg)
            frozen = await _growth(agents, live, agent_turn, small, cfg, freeze=True)
        finally:
            await model.aclose()
    growth, raw_growth = ak[1].p99 / ak[0].p99, floor[1].p99 / floor[0].p99
    cpu_growth = ak[1].cpu_per_turn / ak[0].cpu_per_turn
    raw_cpu_growth = floor[1].cpu_per_turn / floor[0].cpu_per_turn
    note = (
        f"{cfg.active * 4} turns, {cfg.active} in flight; "
        + _describe("agentkit", small, *ak, tracked[0]) + "; "
        + _describe("bare httpx2 loop", small, *floor, tracked[1])
    )  # fmt: skip
    frozen_growth = frozen[1].p99 / frozen[0].p99
    frozen_note = _describe("agentkit after gc.freeze()", small, *frozen, tracked[0])
    return [
        Row(scenario, f"p99 turn latency, {n} conversations", ak[1].p99, "s",
            ak[0].p99, f"p99 with {small} conversations", growth, "flat (<= 1.2x)",
            growth <= 1.2),
        Row(scenario, f"p99 growth from {small} to {n} conversations", growth, "x",
            raw_growth, "the bare httpx2 loop's growth", growth / raw_growth,
            "no worse than the floor's (<= 1.0x)", growth <= raw_growth, note),
        Row(scenario, f"CPU per turn growth from {small} to {n} conversations", cpu_growth,
            "x", raw_cpu_growth, "the bare httpx2 loop's growth", cpu_growth / raw_cpu_growth,
            "no worse than the floor's (<= 1.0x)", cpu_growth <= raw_cpu_growth,
            "process CPU per turn; the mock server runs in another process"),
        Row(scenario, f"p99 growth from {small} to {n} conversations, gc.freeze() after "
            "loading them", frozen_growth, "x", raw_growth, "the bare httpx2 loop's growth",
            frozen_growth / raw_growth, "", None, frozen_note),
    ]  # fmt: skip


async def run(cfg: Config) -> list[Row]:
    """Idle-conversation memory and p99 turn latency with many live conversations."""
    scenario = f"{cfg.conversations} live conversations, {cfg.active} active"
    small = min(1000, max(cfg.conversations // 3, cfg.active))
    try:
        total, overhead, raw = await _idle_bytes(cfg.conversations)
    except NotAvailable as exc:
        return [Row(scenario, "memory per idle conversation", None, "B", note=f"n/a ({exc})")]
    ratio = total / raw
    rows = [
        Row(scenario, "memory per idle conversation (one tool-calling turn, all it holds)",
            total, "B", raw, "bare httpx2 loop's message list", ratio, "<= 1.1x",
            ratio <= 1.1, "tracemalloc; 4 messages (agentkit) / 5 dicts with the system one (raw)"),
        Row(scenario, "memory per idle conversation beyond its messages", overhead, "B",
            target="< 2048 B", met=overhead < 2048,
            note=f"the agent, its memory and lists; the messages: {total - overhead:.0f} B"),
    ]  # fmt: skip
    return rows + await _latency_rows(cfg, scenario, small)

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


class _GcMeter:
    """Counts the collector's runs per generation and their pauses, through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.runs = [0, 0, 0]
        self.pauses: list[float] = []  # seconds, full (generation 2) collections only
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
        self.runs[info["generation"]] += 1
        if info["generation"] == 2:
            self.pauses.append(time.perf_counter() - self._start)

    def summary(self) -> str:
        longest = max(self.pauses, default=0.0)
        return (
            f"gc runs per generation {self.runs[0]}/{self.runs[1]}/{self.runs[2]}, "
            f"longest full collection {longest * 1e3:.1f} ms"
        )


async def _p99(
    turn_on: Callable[[int], Awaitable[object]], count: int, turns: int, active: int
) -> tuple[float, float, str]:
    """(p50, p99 seconds, gc summary) of ``turns`` turns, ``active`` at a time, on random idle
    conversations among the first ``count``."""
    busy: set[int] = set()
    latencies: list[float] = []
    limiter = anyio.Semaphore(active)
    rng = random.Random(7)

    async def turn() -> None:
        async with limiter:
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

    with _GcMeter() as meter:
        async with anyio.create_task_group() as tg:
            for _ in range(turns):
                tg.start_soon(turn)
    return percentile(latencies, 0.5), percentile(latencies, 0.99), meter.summary()


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
    turn_on: Callable[[int], Awaitable[object]], small: int, n: int, turns: int, active: int
) -> tuple[float, float, str, str]:
    """(p99 at ``small``, p99 at ``n``, note, gc summary at ``n``)."""
    await _p99(turn_on, small, active, active)  # warm-up: connections, caches
    gc.collect()
    p50_small, p99_small, _ = await _p99(turn_on, small, turns, active)
    gc.collect()
    p50_n, p99_n, collector = await _p99(turn_on, n, turns, active)
    note = f"p50 {p50_small * 1e3:.1f} ms at {small}, {p50_n * 1e3:.1f} ms at {n}"
    return p99_small, p99_n, note, collector


async def _latency_rows(cfg: Config, scenario: str, small: int) -> list[Row]:
    """p99 turn latency with ``small`` and ``cfg.conversations`` idle conversations held, for
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
    turns, n = cfg.active * 4, cfg.conversations
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
            agents[:] = [live(i) for i in range(n)]
            ak_small, ak_n, ak_note, ak_gc = await _growth(agent_turn, small, n, turns, cfg.active)
            agents.clear()
            raw[:] = [raw_live(i) for i in range(n)]
            raw_small, raw_n, _, raw_gc = await _growth(raw_turn, small, n, turns, cfg.active)
            raw.clear()
        finally:
            await model.aclose()
    growth, raw_growth = ak_n / ak_small, raw_n / raw_small
    note = (
        f"{turns} turns, {cfg.active} in flight; {ak_note}; agentkit {ak_gc}, "
        f"{tracked[0]:.1f} gc-tracked objects per conversation; bare httpx2 loop: "
        f"p99 {raw_small * 1e3:.1f} -> {raw_n * 1e3:.1f} ms, {raw_gc}, "
        f"{tracked[1]:.1f} tracked per conversation"
    )
    return [
        Row(scenario, f"p99 turn latency, {n} conversations", ak_n, "s",
            ak_small, f"p99 with {small} conversations", growth, "flat (<= 1.2x)",
            growth <= 1.2, f"{turns} turns, {cfg.active} in flight; {ak_note}"),
        Row(scenario, f"p99 growth from {small} to {n} conversations", growth, "x",
            raw_growth, "the bare httpx2 loop's growth", growth / raw_growth,
            "no worse than the floor's (<= 1.0x)", growth <= raw_growth, note),
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

"""Long conversations: per-turn cost with a 200-message history (mixed text and tool results).

Every turn sends the whole history, so the request body grows with the conversation. The
floor is a bare ``httpx2`` loop that sends the same bodies: its history is agentkit's own
encoding of the same messages (``OpenAIChatModel.format_request``), computed once, so both
sides send the same bytes and only the framework's per-turn work differs. A run is one
conversation of ``cfg.reps`` turns (each adds a question and an answer) against the mock
server's ``answer`` model (a text answer at once, non-streaming).
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks import kit
from benchmarks.baselines import PROMPT, SYSTEM, tool_schema
from benchmarks.common import Config, NotAvailable, Row, median, paired, require
from benchmarks.model_calls import model_request
from benchmarks.scenarios.turns import http_clients, measure

# Compact UTF-8 JSON, as agentkit and the SDKs send it (same bytes on both sides).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_JSON = {"content-type": "application/json"}


def history(n: int) -> list[Any]:
    """``n`` stored messages: questions, tool calls, tool results (some long) and answers."""
    msg_cls, tool_use = (
        require("agentkit.messages", "Msg")[0],
        require("agentkit.testing", "tool_use")[0],
    )
    out: list[Any] = []
    i = 0
    while len(out) < n:
        call = f"call_{i}"
        output = f"result {i}: " + "lorem ipsum dolor sit amet " * (1 + (i % 5) * 8)
        out += [
            msg_cls("user", f"Question {i}: what does step {i} return?", "user"),
            msg_cls("bench", [{"type": "text", "text": f"Let me check {i}."},
                              tool_use("step", call, i=i)], "assistant"),
            msg_cls("bench", [{"type": "tool_result", "id": call, "name": "step",
                               "output": output}], "user"),
            msg_cls("bench", f"Step {i} returned: {output[:40]}", "assistant"),
        ]  # fmt: skip
        i += 1
    return out[:n]


SHORT = 4  # messages of history in the reference variants (the fixed per-turn cost)


def _variants(cfg: Config, model: Any, template: Any, raw: Any, n: int) -> dict[str, Any]:
    """The floor and agentkit, each one conversation of ``cfg.reps`` turns after ``n``
    messages of history."""
    (memory_cls,) = require("agentkit.memory", "InMemoryMemory")
    (msg_cls,) = require("agentkit.messages", "Msg")
    msgs = history(n)
    tools = [tool_schema("step")]
    system = msg_cls("system", SYSTEM, "system")
    wire = model.format_request(model_request([system, *msgs], tools), stream=False)["messages"]
    url = cfg.base_url + "/chat/completions"

    async def httpx_variant() -> None:
        messages = list(wire)
        for _ in range(cfg.reps):
            messages.append({"role": "user", "content": PROMPT})
            payload = {"model": "answer", "messages": messages, "tools": tools}
            response = await raw.post(url, content=_dumps(payload), headers=_JSON)
            response.raise_for_status()
            answer = response.json()["choices"][0]["message"]["content"]
            messages.append({"role": "assistant", "content": answer})

    async def agentkit_variant() -> None:
        agent = template.copy(memory=memory_cls(msgs))
        for _ in range(cfg.reps):
            await kit.ask(agent)

    return {"httpx": httpx_variant, "agentkit": agentkit_variant}


async def run(cfg: Config) -> list[Row]:
    """Per-turn time with a long history: agentkit vs the bare httpx2 loop (same bodies)."""
    scenario = f"long conversation ({cfg.history} messages of history, non-stream)"
    try:
        model = kit.openai_model("answer", cfg.base_url, stream=False)
        template = kit.make_agent(model, kit.toolkit_with(kit.step))
    except NotAvailable as exc:
        return [Row(scenario, "agentkit per turn", None, "s", note=f"n/a ({exc})")]
    sdk, raw = http_clients(cfg)
    try:
        variants = _variants(cfg, model, template, raw, cfg.history)
        short = _variants(cfg, model, template, raw, SHORT)
        variants |= {f"{k}_short": v for k, v in short.items()}
        samples = await measure(variants, cfg, cfg.reps)
        cpu = await _cpu_per_turn(variants, cfg)
    finally:
        await sdk.close()
        await raw.aclose()
        await model.aclose()
    return _rows(scenario, samples, cpu)


def _rows(scenario: str, samples: dict[str, list[float]], cpu: dict[str, list[float]]) -> list[Row]:
    r, rc = paired(samples, "agentkit", "httpx"), paired(cpu, "agentkit", "httpx")
    floor = "bare httpx2 loop, same bodies (floor)"
    grow_ak = median(cpu["agentkit"]) - median(cpu["agentkit_short"])
    grow_floor = median(cpu["httpx"]) - median(cpu["httpx_short"])
    growth = grow_ak / grow_floor if grow_floor > 0 else None
    short_ratio = paired(cpu, "agentkit_short", "httpx_short")
    return [
        Row(scenario, "agentkit per turn", median(samples["agentkit"]), "s",
            median(samples["httpx"]), floor, r, "<= 1.2x floor",
            None if r is None else r <= 1.2, "", {"samples": samples}),
        Row(scenario, "agentkit client CPU per turn", median(cpu["agentkit"]), "s",
            median(cpu["httpx"]), floor, rc, "<= 1.2x floor", None if rc is None else rc <= 1.2,
            f"process CPU of the client; with {SHORT} messages: {short_ratio or 0:.2f}x",
            {"samples": cpu}),
        # A difference of two noisy medians: it can be zero or negative on a short (--quick)
        # run, so it is reported as measured and not forced positive.
        Row(scenario, f"client CPU added per turn by the history ({SHORT} -> N messages)",
            grow_ak, "s", grow_floor if grow_floor > 0 else None,
            "the floor's (same bodies)", growth, "grows no faster than the body (<= 1.2x)",
            None if growth is None else growth <= 1.2,
            "(agentkit CPU at N - at 4) / (floor CPU at N - at 4)"),
    ]  # fmt: skip


async def _cpu_per_turn(variants: dict[str, Any], cfg: Config) -> dict[str, list[float]]:
    """Client CPU seconds per turn, interleaved by round (less noisy than wall time)."""
    out: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(cfg.rounds):
        for name, fn in variants.items():
            start = time.process_time()
            await fn()
            out[name].append((time.process_time() - start) / cfg.reps)
    return out

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


async def run(cfg: Config) -> list[Row]:
    """Per-turn time with a long history: agentkit vs the bare httpx2 loop (same bodies)."""
    scenario = f"long conversation ({cfg.history} messages of history, non-stream)"
    try:
        (memory_cls,) = require("agentkit.memory", "InMemoryMemory")
        msgs = history(cfg.history)
        model = kit.openai_model("answer", cfg.base_url, stream=False)
        template = kit.make_agent(model, kit.toolkit_with(kit.step))
    except NotAvailable as exc:
        return [Row(scenario, "agentkit per turn", None, "s", note=f"n/a ({exc})")]
    tools = [tool_schema("step")]
    system = require("agentkit.messages", "Msg")[0]("system", SYSTEM, "system")
    wire = model.format_request([system, *msgs], tools, stream=False)["messages"]
    sdk, raw = http_clients(cfg)
    url = cfg.base_url + "/chat/completions"
    body_sizes: list[int] = []

    async def httpx_variant() -> None:
        messages = list(wire)
        for _ in range(cfg.reps):
            messages.append({"role": "user", "content": PROMPT})
            payload = {"model": "answer", "messages": messages, "tools": tools}
            response = await raw.post(url, content=_dumps(payload), headers=_JSON)
            response.raise_for_status()
            body_sizes.append(len(response.request.content))
            messages.append(
                {
                    "role": "assistant",
                    "content": response.json()["choices"][0]["message"]["content"],
                }
            )

    async def agentkit_variant() -> None:
        agent = template.copy(memory=memory_cls(msgs))
        for _ in range(cfg.reps):
            await kit.ask(agent)

    variants = {"httpx": httpx_variant, "agentkit": agentkit_variant}
    try:
        samples = await measure(variants, cfg, cfg.reps)
        cpu = await _cpu_per_turn(variants, cfg)
    finally:
        await sdk.close()
        await raw.aclose()
        await model.aclose()
    r, rc = paired(samples, "agentkit", "httpx"), paired(cpu, "agentkit", "httpx")
    note = f"request body ~{median([float(s) for s in body_sizes]) / 1024:.0f} KiB"
    return [
        Row(scenario, "agentkit per turn", median(samples["agentkit"]), "s",
            median(samples["httpx"]), "bare httpx2 loop, same bodies (floor)", r,
            "<= 1.2x floor", None if r is None else r <= 1.2, note, {"samples": samples}),
        Row(scenario, "agentkit client CPU per turn", median(cpu["agentkit"]), "s",
            median(cpu["httpx"]), "bare httpx2 loop, same bodies (floor)", rc,
            "<= 1.2x floor", None if rc is None else rc <= 1.2,
            "process CPU time of the client (the mock server runs in another process)",
            {"samples": cpu}),
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

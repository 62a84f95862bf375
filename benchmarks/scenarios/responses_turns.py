"""Per-turn cost of the OpenAI Responses adapter against the raw SDK ``responses.create`` loop.

Both loops keep the conversation client-side (``store=False``) and send every reasoning item
back with its encrypted content, as a reasoning model needs; the mock server answers each
turn with a reasoning item plus the tool call (or the final message). Part of ``turns``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.baselines import PROMPT, SYSTEM, Executor, tool_schema
from benchmarks.common import Config, NotAvailable, Row, median, paired, require, timed
from benchmarks.model_calls import ask

__all__ = ["responses_rows", "responses_sdk_run"]

Variant = Callable[[], Awaitable[Any]]
_INCLUDE = ["reasoning.encrypted_content"]


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "strict": False,
            **{k: t["function"][k] for k in ("name", "description", "parameters")},
        }
        for t in tools
    ]


async def _sdk_turn(client: Any, request: dict[str, Any], stream: bool) -> Any:
    if not stream:
        return await client.responses.create(**request)
    final = None
    async for event in await client.responses.create(**request, stream=True):
        if event.type == "response.completed":
            final = event.response
    return final


async def responses_sdk_run(
    client: Any,
    model: str,
    tools: list[dict[str, Any]],
    execute: Executor,
    *,
    stream: bool,
    max_turns: int = 100,
) -> str:
    """One conversation with the raw ``openai`` SDK's Responses API; return the answer.

    The loop the OpenAI docs teach for ``store=False``: append every output item (reasoning
    included) to ``input``, then the ``function_call_output`` items, and ask again.
    """
    items: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    spec = _tools(tools)
    for _ in range(max_turns):
        request = {
            "model": model,
            "input": items,
            "tools": spec,
            "store": False,
            "include": _INCLUDE,
        }
        response = await _sdk_turn(client, request, stream)
        output = [item.model_dump(exclude_none=True) for item in response.output]
        calls = [i for i in output if i["type"] == "function_call"]
        if not calls:
            return str(response.output_text)
        items += output
        results = await asyncio.gather(
            *(execute(c["name"], json.loads(c["arguments"] or "{}")) for c in calls)
        )
        items += [
            {"type": "function_call_output", "call_id": c["call_id"], "output": r}
            for c, r in zip(calls, results, strict=True)
        ]
    raise RuntimeError("too many turns")


async def _adapter_loop(model: Any, tools: list[dict[str, Any]]) -> str:
    """The adapter without the agent: call, run the tool, append, repeat."""
    (msg_cls,) = require("agentkit.messages", "Msg")
    messages = [msg_cls("system", SYSTEM, "system"), msg_cls("user", PROMPT, "user")]
    while True:
        response = await ask(model, messages, tools)
        messages.append(msg_cls("bench", response.content, "assistant"))
        calls = [b for b in response.content if b["type"] == "tool_use"]
        if not calls:
            return str(response.get_text())
        outputs = await asyncio.gather(*(kit.step(**c["input"]) for c in calls))
        results = [
            {"type": "tool_result", "id": c["id"], "name": c["name"], "output": o}
            for c, o in zip(calls, outputs, strict=True)
        ]
        messages.append(msg_cls("bench", results, "user"))


async def _measure(variants: dict[str, Variant], cfg: Config, per: float) -> dict[str, list[float]]:
    for fn in variants.values():
        await fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(cfg.rounds):
        for name, fn in variants.items():
            samples[name].append(await timed(fn, cfg.reps, collect=not cfg.quick) / per)
    return samples


async def responses_rows(cfg: Config, stream: bool) -> list[Row]:
    """Rows: ReActAgent and the bare adapter over ``OpenAIResponsesModel`` vs the SDK loop."""
    import openai

    label = "stream" if stream else "non-stream"
    scenario = f"per turn over HTTP, OpenAI Responses ({label}, steps-{cfg.steps})"
    model_name = f"steps-{cfg.steps}"
    tools = [tool_schema("step")]
    sdk = openai.AsyncOpenAI(api_key="bench", base_url=cfg.base_url, max_retries=0)

    async def sdk_variant() -> None:
        answer = await responses_sdk_run(sdk, model_name, tools, kit.raw_step, stream=stream)
        kit.check_answer(answer, cfg.steps)

    variants: dict[str, Variant] = {"sdk": sdk_variant}
    note, model = "", None
    try:
        (cls,) = require("agentkit.models._openai_responses", "OpenAIResponsesModel")
        model = cls(model_name, api_key="bench", base_url=cfg.base_url, stream=stream)
        toolkit = kit.toolkit_with(kit.step)

        async def adapter_variant() -> None:
            kit.check_answer(await _adapter_loop(model, tools), cfg.steps)

        async def agentkit_variant() -> None:
            kit.check_answer(await kit.ask(kit.make_agent(model, toolkit)), cfg.steps)

        variants["adapter"] = adapter_variant
        variants["agentkit"] = agentkit_variant
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    try:
        samples = await _measure(variants, cfg, cfg.steps + 1)
    finally:
        await sdk.close()
        if model is not None:
            await model.aclose()
    sdk_t = median(samples["sdk"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    adapter = median(samples["adapter"]) if "adapter" in samples else None
    r_ak = paired(samples, "agentkit", "sdk")
    return [
        Row(scenario, "agentkit per turn", ak, "s", sdk_t, "raw openai SDK responses.create loop",
            r_ak, "< 1.0x SDK loop", None if r_ak is None else r_ak < 1.0, note,
            {"samples": samples}),
        Row(scenario, "OpenAIResponsesModel in a hand-written loop (no agent)", adapter, "s",
            sdk_t, "raw openai SDK responses.create loop", paired(samples, "adapter", "sdk")),
    ]  # fmt: skip

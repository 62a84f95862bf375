"""Parallel tools: the model asks for N calls in one turn, each sleeping ``tool_sleep`` seconds.

The ideal run time is one ``tool_sleep`` (all calls overlap) plus two fast HTTP round trips.
Measured for async tools (``anyio.sleep``) and blocking tools (``time.sleep``, which must run
in worker threads to overlap). The peak number of calls in flight is recorded too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks import kit
from benchmarks.baselines import sdk_run, tool_schema
from benchmarks.common import Config, NotAvailable, Row, median, paired, ratio
from benchmarks.scenarios.turns import Variant, http_clients, measure


def _sdk_executor(fn: Any, blocking: bool) -> Any:
    async def execute(name: str, args: dict[str, Any]) -> str:
        if blocking:
            return str(await asyncio.to_thread(fn, **args))
        return str(await fn(**args))

    return execute


async def _rows(cfg: Config, blocking: bool) -> list[Row]:
    kind = "blocking (time.sleep)" if blocking else "async (anyio.sleep)"
    scenario = f"parallel tools {cfg.parallel} x {cfg.tool_sleep:g} s, {kind}"
    model_name = f"parallel-{cfg.parallel}"
    sdk_meter, ak_meter = kit.InFlight(), kit.InFlight()
    sdk_fn = kit.sleep_tools(cfg.tool_sleep, sdk_meter)[1 if blocking else 0]
    sdk, raw = http_clients(cfg)
    await raw.aclose()
    execute = _sdk_executor(sdk_fn, blocking)

    async def sdk_variant() -> None:
        answer = await sdk_run(sdk, model_name, [tool_schema("wait")], execute, stream=False)
        kit.check_answer(answer, cfg.parallel)

    variants: dict[str, Variant] = {"sdk": sdk_variant}
    note, model = "", None
    try:
        model = kit.openai_model(model_name, cfg.base_url, stream=False)
        ak_fn = kit.sleep_tools(cfg.tool_sleep, ak_meter)[1 if blocking else 0]
        toolkit = kit.toolkit_with(ak_fn, name="wait")
        kit.agent_class()

        async def agentkit_variant() -> None:
            agent = kit.make_agent(model, toolkit)
            kit.check_answer(await kit.ask(agent), cfg.parallel)

        variants["agentkit"] = agentkit_variant
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    once = Config(**{**cfg.__dict__, "reps": 1})
    try:
        samples = await measure(variants, once, 1)
    finally:
        await sdk.close()
        if model is not None:
            await model.aclose()
    sdk_t = median(samples["sdk"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    ideal = cfg.tool_sleep
    extra = {"ideal": ideal, "samples": samples, "sdk_peak_in_flight": sdk_meter.peak}
    if ak is not None:
        extra["agentkit_peak_in_flight"] = ak_meter.peak
        note = f"peak in flight: agentkit {ak_meter.peak}, SDK loop {sdk_meter.peak}"
    return [
        Row(scenario, "agentkit run time (ideal = one tool)", ak, "s", sdk_t,
            "raw openai SDK loop (gather/to_thread)", paired(samples, "agentkit", "sdk"),
            "<= 1.10x ideal", None if ak is None else ak / ideal <= 1.10, note, extra),
        Row(scenario, "agentkit vs ideal", ratio(ak, ideal), "x"),
    ]  # fmt: skip


async def run(cfg: Config) -> list[Row]:
    """Async and blocking parallel tool rows."""
    return await _rows(cfg, blocking=False) + await _rows(cfg, blocking=True)

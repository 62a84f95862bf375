"""Many concurrent agents on one event loop: N conversations of steps-K at once, runs/s.

All conversations share one client (one connection pool), as a server handling many users
would. Non-streaming requests. Higher is better, so the ratio is agentkit / SDK throughput.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.baselines import httpx_run, sdk_run, tool_schema
from benchmarks.common import Config, NotAvailable, Row, median, paired
from benchmarks.scenarios.turns import connections_per_request, http_clients

Batch = Callable[[], Awaitable[Any]]


async def _throughput(batch: Batch, runs: int, collect: bool) -> tuple[float, float]:
    """(runs per second, client CPU seconds per run): the mock server is another process.

    ``collect``: a full collection first, as in ``benchmarks.common.timed``.
    """
    if collect:
        gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    await batch()
    return runs / (time.perf_counter() - start), (time.process_time() - cpu) / runs


def _churn_note(note: str, churn: dict[str, float]) -> str:
    text = ", ".join(f"{name} {value:.2f}" for name, value in churn.items())
    return "; ".join(p for p in (note, f"new TCP connections per request: {text}") if p)


async def run(cfg: Config) -> list[Row]:
    """Throughput row for ``cfg.agents`` concurrent agents doing steps-``cfg.agent_steps``."""
    scenario = f"{cfg.agents} concurrent agents x steps-{cfg.agent_steps}, one loop"
    model_name = f"steps-{cfg.agent_steps}"
    tools = [tool_schema("step")]
    sdk, raw = http_clients(cfg)

    async def one_sdk() -> None:
        answer = await sdk_run(sdk, model_name, tools, kit.raw_step, stream=False)
        kit.check_answer(answer, cfg.agent_steps)

    async def one_httpx() -> None:
        answer = await httpx_run(raw, cfg.base_url, model_name, tools, kit.raw_step, stream=False)
        kit.check_answer(answer, cfg.agent_steps)

    batches: dict[str, Batch] = {
        "sdk": lambda: asyncio.gather(*(one_sdk() for _ in range(cfg.agents))),
        "httpx": lambda: asyncio.gather(*(one_httpx() for _ in range(cfg.agents))),
    }
    note, model = "", None
    try:
        model = kit.openai_model(model_name, cfg.base_url, stream=False)
        toolkit = kit.toolkit_with(kit.step)
        kit.agent_class()

        async def one_agent() -> None:
            kit.check_answer(await kit.ask(kit.make_agent(model, toolkit)), cfg.agent_steps)

        batches["agentkit"] = lambda: asyncio.gather(*(one_agent() for _ in range(cfg.agents)))
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    samples: dict[str, list[float]] = {name: [] for name in batches}
    cpu: dict[str, list[float]] = {name: [] for name in batches}
    try:
        for batch in batches.values():  # warm-up: opens the pool's connections
            await batch()
        for _ in range(cfg.rounds):
            for name, batch in batches.items():
                rps, cpu_per_run = await _throughput(batch, cfg.agents, not cfg.quick)
                samples[name].append(rps)
                cpu[name].append(cpu_per_run)
        churn = {name: await connections_per_request(cfg, b) for name, b in batches.items()}
    finally:
        await sdk.close()
        await raw.aclose()
        if model is not None:
            await model.aclose()
    return _rows(scenario, samples, cpu, churn, note) + _cpu_rows(scenario, cpu)


def _rows(
    scenario: str,
    samples: dict[str, list[float]],
    cpu: dict[str, list[float]],
    churn: dict[str, float],
    note: str,
) -> list[Row]:
    sdk_rps, httpx_rps = median(samples["sdk"]), median(samples["httpx"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    r_ak = paired(samples, "agentkit", "sdk")
    return [
        Row(scenario, "agentkit runs/s", ak, "runs/s", sdk_rps, "raw openai SDK loop",
            r_ak, ">= 2.0x SDK loop", None if r_ak is None else r_ak >= 2.0,
            _churn_note(note, churn),
            {"samples": samples, "cpu_per_run": cpu, "new_connections_per_request": churn}),
        Row(scenario, "bare httpx2 loop runs/s (ceiling)", httpx_rps, "runs/s", sdk_rps,
            "raw openai SDK loop", paired(samples, "httpx", "sdk")),
    ]  # fmt: skip


def _cpu_rows(scenario: str, cpu: dict[str, list[float]]) -> list[Row]:
    """Client CPU time per run (steadier than wall time on a shared machine)."""
    if "agentkit" not in cpu:
        return []
    ak = median(cpu["agentkit"])
    r_sdk, r_httpx = paired(cpu, "agentkit", "sdk"), paired(cpu, "agentkit", "httpx")
    return [
        Row(scenario, "agentkit client CPU per run", ak, "s", median(cpu["sdk"]),
            "raw openai SDK loop", r_sdk, "<= 0.6x SDK loop",
            None if r_sdk is None else r_sdk <= 0.6, "time.process_time(), server excluded"),
        Row(scenario, "agentkit client CPU per run vs bare httpx2 loop", ak, "s",
            median(cpu["httpx"]), "bare httpx2 loop", r_httpx, "<= 0.7x httpx2 loop",
            None if r_httpx is None else r_httpx <= 0.7),
    ]  # fmt: skip

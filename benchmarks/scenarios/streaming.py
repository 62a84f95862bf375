"""Long streamed answers: the cost per streamed chunk when the answer is long.

``text-N`` streams an N-word answer one word per chunk; ``bigcall-N`` streams one tool call
whose ``text`` argument arrives in N chunks (a model writing a file through a tool). A
framework that rebuilds or re-parses the whole answer on every chunk is quadratic here.
The figure is the conversation's wall time divided by N.
"""

from __future__ import annotations

from typing import Any

from benchmarks import kit, ttft
from benchmarks.baselines import httpx_run, sdk_run, tool_schema
from benchmarks.common import Config, NotAvailable, Row, median, paired
from benchmarks.scenarios.turns import Variant, http_clients, measure


async def _rows(cfg: Config, kind: str) -> list[Row]:
    n = cfg.stream_chunks
    model_name = f"{kind}-{n}"
    results = 1 if kind == "bigcall" else 0
    scenario = (
        f"long streamed answer ({n} chunks of text)"
        if kind == "text"
        else f"long streamed tool arguments ({n} chunks)"
    )
    tools = [tool_schema("write")]
    tools[0]["function"]["parameters"]["properties"]["text"] = {"type": "string"}
    raw_tool = kit.raw_write
    sdk, raw = http_clients(cfg)

    def check(answer: str) -> None:
        kit.check_answer(answer[-len(f"Done: {results} tool results received.") :], results)

    async def sdk_variant() -> None:
        check(await sdk_run(sdk, model_name, tools, raw_tool, stream=True))

    async def httpx_variant() -> None:
        check(await httpx_run(raw, cfg.base_url, model_name, tools, raw_tool, stream=True))

    variants: dict[str, Variant] = {"sdk": sdk_variant, "httpx": httpx_variant}
    note, model = "", None
    try:
        model = kit.openai_model(model_name, cfg.base_url, stream=True)
        toolkit = kit.toolkit_with(kit.write)
        kit.agent_class()

        async def agentkit_variant() -> None:
            check(await kit.ask(kit.make_agent(model, toolkit)))

        variants["agentkit"] = agentkit_variant
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    once = Config(**{**cfg.__dict__, "reps": 1})
    try:
        samples = await measure(variants, once, n)
    finally:
        await sdk.close()
        await raw.aclose()
        if model is not None:
            await model.aclose()
    sdk_t, httpx_t = median(samples["sdk"]), median(samples["httpx"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    extra: dict[str, Any] = {"samples": samples}
    return [
        Row(scenario, "agentkit per chunk", ak, "s", sdk_t, "raw openai SDK loop",
            paired(samples, "agentkit", "sdk"), note=note, extra=extra),
        Row(scenario, "bare httpx2 loop per chunk (floor)", httpx_t, "s", sdk_t,
            "raw openai SDK loop", paired(samples, "httpx", "sdk")),
    ]  # fmt: skip


async def run(cfg: Config) -> list[Row]:
    """Rows for a long streamed text answer, long streamed tool arguments, and TTFT."""
    return await _rows(cfg, "text") + await _rows(cfg, "bigcall") + await ttft.rows(cfg)

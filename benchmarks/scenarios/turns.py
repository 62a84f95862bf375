"""Per-turn cost: over HTTP against the mock server (steps-N), and in-process (ScriptedModel).

A run is one conversation of N tool-calling turns plus the final answer (N + 1 model calls);
the figure is the run's wall time divided by N + 1.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.baselines import (
    PROMPT,
    SYSTEM,
    anthropic_sdk_run,
    httpx_run,
    sdk_run,
    tool_schema,
)
from benchmarks.common import Config, NotAvailable, Row, median, paired, require, timed
from benchmarks.model_calls import ask
from benchmarks.scenarios.responses_turns import responses_rows

Variant = Callable[[], Awaitable[Any]]


async def server_stats(cfg: Config) -> dict[str, int]:
    """The mock server's request and connection counters.

    A fresh client each time (one new connection, which ``connections_per_request`` takes
    off). ``verify=False``: the mock server speaks plain HTTP on 127.0.0.1, and the default
    client loads the CA bundle into a new SSL context first (20-30 ms, twice per variant).
    """
    import httpx2

    async with httpx2.AsyncClient(verify=False) as client:
        stats: dict[str, int] = (await client.get(cfg.url + "/stats")).json()
        return stats


async def connections_per_request(cfg: Config, fn: Variant) -> float:
    """New TCP connections the server saw per request while ``fn`` ran (0 = keep-alive works)."""
    before = await server_stats(cfg)
    await fn()
    after = await server_stats(cfg)
    requests = after["requests"] - before["requests"] - 1  # minus the second /stats call
    return (after["connections"] - before["connections"] - 1) / max(1, requests)


async def measure(variants: dict[str, Variant], cfg: Config, per: float) -> dict[str, list[float]]:
    """Warm every variant up once, then time them interleaved, ``cfg.rounds`` times."""
    for fn in variants.values():
        await fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(cfg.rounds):
        for name, fn in variants.items():
            samples[name].append(await timed(fn, cfg.reps, collect=not cfg.quick) / per)
    return samples


def http_clients(cfg: Config) -> tuple[Any, Any]:
    """A raw ``AsyncOpenAI`` client and an ``httpx2.AsyncClient`` with the SDK's pool limits."""
    import httpx2
    import openai

    sdk = openai.AsyncOpenAI(api_key="bench", base_url=cfg.base_url, max_retries=0)
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    raw = httpx2.AsyncClient(limits=limits, timeout=600)
    return sdk, raw


async def _http_rows(cfg: Config, stream: bool) -> list[Row]:
    label = "stream" if stream else "non-stream"
    scenario = f"per turn over HTTP ({label}, steps-{cfg.steps})"
    model_name = f"steps-{cfg.steps}"
    tools = [tool_schema("step")]
    sdk, raw = http_clients(cfg)

    async def sdk_variant() -> None:
        kit.check_answer(
            await sdk_run(sdk, model_name, tools, kit.raw_step, stream=stream), cfg.steps
        )

    async def httpx_variant() -> None:
        answer = await httpx_run(raw, cfg.base_url, model_name, tools, kit.raw_step, stream=stream)
        kit.check_answer(answer, cfg.steps)

    variants: dict[str, Variant] = {"sdk": sdk_variant, "httpx": httpx_variant}
    note = ""
    model = None
    try:
        model = kit.openai_model(model_name, cfg.base_url, stream=stream)

        async def adapter_variant() -> None:
            kit.check_answer(await _hand_loop(model, tools), cfg.steps)

        variants["adapter"] = adapter_variant
        toolkit = kit.toolkit_with(kit.step)
        kit.agent_class()

        async def agentkit_variant() -> None:
            agent = kit.make_agent(model, toolkit)
            kit.check_answer(await kit.ask(agent), cfg.steps)

        variants["agentkit"] = agentkit_variant
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    try:
        samples = await measure(variants, cfg, cfg.steps + 1)
        reuse = {name: await connections_per_request(cfg, fn) for name, fn in variants.items()}
    finally:
        await sdk.close()
        await raw.aclose()
        if model is not None:
            await model.aclose()
    sdk_t, httpx_t = median(samples["sdk"]), median(samples["httpx"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    adapter = median(samples["adapter"]) if "adapter" in samples else None
    r_ak, r_floor = paired(samples, "agentkit", "sdk"), paired(samples, "agentkit", "httpx")
    return [
        Row(scenario, "agentkit per turn", ak, "s", sdk_t, "raw openai SDK loop",
            r_ak, "<= 0.40x SDK loop", None if r_ak is None else r_ak <= 0.40,
            _reuse_note(note, reuse),
            {"samples": samples, "new_connections_per_request": reuse}),
        Row(scenario, "OpenAIChatModel in a hand-written loop (no agent)", adapter, "s", sdk_t,
            "raw openai SDK loop", paired(samples, "adapter", "sdk")),
        Row(scenario, "bare httpx2 loop per turn (floor)", httpx_t, "s", sdk_t,
            "raw openai SDK loop", paired(samples, "httpx", "sdk")),
        Row(scenario, "agentkit vs httpx2 floor", r_floor, "x", None, "", None,
            "<= 1.6x floor", None if r_floor is None else r_floor <= 1.6, note),
    ]  # fmt: skip


def _reuse_note(note: str, reuse: dict[str, float]) -> str:
    """Flag variants that open a new TCP connection per request."""
    bad = [f"{name} opens {value:.2f} new connections/request" for name, value in reuse.items()
           if value > 0.05]  # fmt: skip
    return "; ".join([note, *bad]) if note else "; ".join(bad)


def _script(steps: int) -> list[Any]:
    chat_response, chat_usage = require("agentkit.models._base", "ChatResponse", "ChatUsage")
    tool_use, text = require("agentkit.testing", "tool_use", "text")
    items = [
        chat_response([tool_use("step", f"call_{k}", i=k)], usage=chat_usage(10, 5))
        for k in range(steps)
    ]
    items.append(chat_response([text(f"Done: {steps} tool results received.")], chat_usage(10, 5)))
    return items


async def _hand_loop(model: Any, tools: list[dict[str, Any]]) -> str:
    """The least a ReAct loop over agentkit Msgs can do: call, run the tool, append, repeat."""
    (msg_cls,) = require("agentkit.messages", "Msg")
    messages = [msg_cls("system", SYSTEM, "system"), msg_cls("user", PROMPT, "user")]
    while True:
        response = await ask(model, messages, tools)
        messages.append(msg_cls("bench", response.content, "assistant"))
        calls = [b for b in response.content if b["type"] == "tool_use"]
        if not calls:
            return str(response.get_text())
        results = []
        for c in calls:
            output = await kit.step(**c["input"])
            results.append(
                {"type": "tool_result", "id": c["id"], "name": c["name"], "output": output}
            )
        messages.append(msg_cls("bench", results, "user"))


async def _inprocess_rows(cfg: Config) -> list[Row]:
    scenario = f"per turn in-process (ScriptedModel, steps-{cfg.steps})"
    (scripted,) = require("agentkit.testing", "ScriptedModel")
    tools = [tool_schema("step")]
    n = cfg.rounds * cfg.reps * 10 + 20

    hand_models = iter([scripted(_script(cfg.steps)) for _ in range(n)])

    async def hand_variant() -> None:
        kit.check_answer(await _hand_loop(next(hand_models), tools), cfg.steps)

    variants: dict[str, Variant] = {"hand": hand_variant}
    note = ""
    try:
        toolkit = kit.toolkit_with(kit.step)
        kit.agent_class()
        agent_models = iter([scripted(_script(cfg.steps)) for _ in range(n)])

        async def agentkit_variant() -> None:
            agent = kit.make_agent(next(agent_models), toolkit)
            kit.check_answer(await kit.ask(agent), cfg.steps)

        variants["agentkit"] = agentkit_variant
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    reps_cfg = Config(**{**cfg.__dict__, "reps": cfg.reps * 10})
    samples = await measure(variants, reps_cfg, cfg.steps + 1)
    hand = median(samples["hand"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    return [
        Row(scenario, "agentkit per turn", ak, "s", hand, "hand-written loop, same model",
            paired(samples, "agentkit", "hand"), "< 100 us",
            None if ak is None else ak < 100e-6, note,
            {"framework_cost_per_turn": None if ak is None else ak - hand}),
    ]  # fmt: skip


async def _sync_tool_rows(cfg: Config) -> list[Row]:
    """A trivial sync tool (microseconds) in a worker thread vs ``inline=True`` vs async."""
    scenario = f"per turn in-process, trivial sync tool (ScriptedModel, steps-{cfg.steps})"
    (scripted,) = require("agentkit.testing", "ScriptedModel")
    toolkits = {"async": kit.toolkit_with(kit.step)}
    toolkits["thread"] = kit.toolkit_with(kit.sync_step, name="step")
    try:
        inline = kit.toolkit_with()
        inline.register_tool_function(kit.sync_step, name="step", inline=True)
        toolkits["inline"] = inline
    except TypeError as exc:  # no inline=
        raise NotAvailable(f"inline sync tools: {exc}") from exc
    n = cfg.rounds * cfg.reps * 10 + 20

    def variant(toolkit: Any) -> Variant:
        models = iter([scripted(_script(cfg.steps)) for _ in range(n)])

        async def run_one() -> None:
            agent = kit.make_agent(next(models), toolkit)
            kit.check_answer(await kit.ask(agent), cfg.steps)

        return run_one

    variants = {name: variant(tk) for name, tk in toolkits.items()}
    reps_cfg = Config(**{**cfg.__dict__, "reps": cfg.reps * 10})
    samples = await measure(variants, reps_cfg, cfg.steps + 1)
    r_inline = paired(samples, "inline", "thread")
    return [
        Row(scenario, "sync tool inline=True per turn", median(samples["inline"]), "s",
            median(samples["thread"]), "same tool in a worker thread (default)", r_inline,
            "< 1x thread", None if r_inline is None else r_inline < 1, "",
            {"samples": samples}),
        Row(scenario, "sync tool inline=True vs async tool", median(samples["inline"]), "s",
            median(samples["async"]), "async tool", paired(samples, "inline", "async")),
    ]  # fmt: skip


async def _anthropic_rows(cfg: Config, stream: bool) -> list[Row]:
    import anthropic

    label = "stream" if stream else "non-stream"
    scenario = f"per turn over HTTP, Anthropic Messages ({label}, steps-{cfg.steps})"
    model_name = f"steps-{cfg.steps}"
    tools = [tool_schema("step")]
    sdk = anthropic.AsyncAnthropic(api_key="bench", base_url=cfg.url, max_retries=0)

    async def sdk_variant() -> None:
        answer = await anthropic_sdk_run(sdk, model_name, tools, kit.raw_step, stream=stream)
        kit.check_answer(answer, cfg.steps)

    variants: dict[str, Variant] = {"sdk": sdk_variant}
    note, model = "", None
    try:
        (cls,) = require("agentkit.models._anthropic", "AnthropicChatModel")
        model = cls(model_name, api_key="bench", base_url=cfg.url, stream=stream)
        toolkit = kit.toolkit_with(kit.step)
        kit.agent_class()

        async def agentkit_variant() -> None:
            kit.check_answer(await kit.ask(kit.make_agent(model, toolkit)), cfg.steps)

        variants["agentkit"] = agentkit_variant
    except NotAvailable as exc:
        note = f"n/a (not available: {exc})"
    try:
        samples = await measure(variants, cfg, cfg.steps + 1)
        reuse = {name: await connections_per_request(cfg, fn) for name, fn in variants.items()}
    finally:
        await sdk.close()
        if model is not None:
            await model.aclose()
    sdk_t = median(samples["sdk"])
    ak = median(samples["agentkit"]) if "agentkit" in samples else None
    return [
        Row(scenario, "agentkit per turn", ak, "s", sdk_t, "raw anthropic SDK loop",
            paired(samples, "agentkit", "sdk"), note=_reuse_note(note, reuse),
            extra={"samples": samples, "new_connections_per_request": reuse}),
    ]  # fmt: skip


async def _pricing_rows(cfg: Config) -> list[Row]:
    """CPU of pricing one answer on a provider's own endpoint (no request: a usage is priced).

    The mock server's URL is local, so the HTTP rows above never price an answer; a real
    endpoint does, on every answer: ``cost_of`` against ``genai_prices.calc_price`` itself.
    """
    import time

    (calc_price, usage_type) = require("genai_prices", "calc_price", "Usage")
    from agentkit.models._base import ChatUsage
    from agentkit.models._prices import cost_of

    scenario = "cost of pricing one answer (gpt-4o-mini at https://api.openai.com/v1)"
    url = "https://api.openai.com/v1"
    usage = ChatUsage(1200, 300, cache_read_tokens=1000)
    counts = usage_type(input_tokens=1200, output_tokens=300, cache_read_tokens=1000)
    calls = 200 if cfg.quick else 2000

    def agentkit_variant() -> None:
        for _ in range(calls):
            cost_of(usage, "gpt-4o-mini", "openai", url)

    def genai_variant() -> None:
        for _ in range(calls):
            calc_price(counts, "gpt-4o-mini", provider_id="openai")

    variants = {"agentkit": agentkit_variant, "calc_price": genai_variant}
    for fn in variants.values():
        fn()  # the table's import and lookups are start-up, not per answer
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(cfg.rounds):
        for name, fn in variants.items():
            start = time.process_time()
            fn()
            samples[name].append((time.process_time() - start) / calls)
    ak, genai = median(samples["agentkit"]), median(samples["calc_price"])
    return [
        Row(scenario, "agentkit cost_of per answer (CPU)", ak, "s", genai,
            "genai_prices.calc_price per answer", paired(samples, "agentkit", "calc_price"),
            extra={"samples": samples}),
    ]  # fmt: skip


async def run(cfg: Config) -> list[Row]:
    """Per-turn rows: OpenAI HTTP non-streaming and streaming, Anthropic, Responses, in-process."""
    rows = await _http_rows(cfg, stream=False)
    rows += await _http_rows(cfg, stream=True)
    rows += await _anthropic_rows(cfg, stream=False)
    rows += await _anthropic_rows(cfg, stream=True)
    if not cfg.quick:  # --quick proves the Responses rows run; one mode is enough for that
        rows += await responses_rows(cfg, stream=False)
    rows += await responses_rows(cfg, stream=True)
    rows += await _inprocess_rows(cfg)
    rows += await _sync_tool_rows(cfg)
    rows += await _pricing_rows(cfg)
    return rows

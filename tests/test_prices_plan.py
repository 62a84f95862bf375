"""A ``genai-prices`` price resolved once prices every usage as ``calc_price`` does, bit for bit.

``agentkit.models._prices`` computes a plain token price itself (``_Plan``) instead of calling
``genai_prices.calc_price`` per answer; these tests hold the two to the same float over every
model of every provider agentkit prices, across cache reads and writes, one-hour writes,
audio, tiers and usages the table refuses, and at dates where a price changes.
"""

from __future__ import annotations

import datetime
import functools
import types
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from agentkit.models import _prices
from agentkit.models._base import ChatUsage
from agentkit.models._prices import clear_prices, cost_of

genai_prices = pytest.importorskip("genai_prices")

# agentkit provider -> genai-prices provider (as in agentkit.models._prices).
PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure",
    "bedrock": "aws",
    "vertex": "google",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral",
    "openrouter": "openrouter",
}

USAGES = [
    ChatUsage(1200, 300),
    ChatUsage(0, 0),
    ChatUsage(1_000_000, 7),
    ChatUsage(5000, 40, cache_read_tokens=4000),
    ChatUsage(5000, 40, cache_write_tokens=3000),
    ChatUsage(
        9000, 40, cache_read_tokens=2000, cache_write_tokens=3000, cache_write_1h_tokens=1000
    ),
    ChatUsage(9000, 40, cache_write_tokens=300, cache_write_1h_tokens=1000),  # 1h capped
    ChatUsage(100, 40, cache_read_tokens=4000),  # more cache reads than input: refused
    ChatUsage(2000, 500, input_audio_tokens=800, output_audio_tokens=200),
    ChatUsage(2000, 500, cache_read_tokens=500, input_audio_tokens=800),
    ChatUsage(10, 5, output_audio_tokens=200),  # more audio than output: refused
    # Either side of the 128k and 200k tiers (a tier applies above its start).
    ChatUsage(128_000, 10, cache_read_tokens=1000),
    ChatUsage(128_001, 10, cache_read_tokens=1000),
    ChatUsage(200_000, 10),
    ChatUsage(200_001, 10, cache_write_tokens=5000),
    ChatUsage(1_500_000, 10),
]


@pytest.fixture(autouse=True)
def _no_user_prices() -> Iterator[None]:
    clear_prices()
    yield
    clear_prices()


def _calc_price(usage: ChatUsage, model: str, genai_id: str) -> float | None:
    """What ``cost_of`` answered before the plan: ``calc_price`` on the reported counts."""
    from genai_prices import Usage, calc_price

    counts: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }
    for key in ("cache_read_tokens", "cache_write_tokens", "input_audio_tokens",
                "output_audio_tokens"):  # fmt: skip
        if getattr(usage, key):
            counts[key] = getattr(usage, key)
    if usage.cache_write_1h_tokens:
        counts["cache_write_1h_tokens"] = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    try:
        result = calc_price(Usage(**counts), model, provider_id=genai_id)
    except Exception:
        return None
    prices = result.model_price
    if (usage.input_audio_tokens and prices.input_audio_mtok is None) or (
        usage.output_audio_tokens and prices.output_audio_mtok is None
    ):
        return None
    return float(result.total_price)


@functools.cache
def _models() -> list[tuple[str, str, str]]:
    """A model of each distinct price of each provider (the same prices price alike)."""
    from genai_prices import data

    now = datetime.datetime.now(tz=datetime.UTC)
    by_id = {entry.id: entry for entry in data.providers}
    models: dict[tuple[str, str], tuple[str, str, str]] = {}
    for provider, genai_id in PROVIDERS.items():
        for model in by_id[genai_id].models:
            shape = (provider, repr(vars(model.get_prices(now))))
            models.setdefault(shape, (provider, genai_id, model.id))
    return list(models.values())


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_model_of_the_table_costs_what_calc_price_says(provider: str) -> None:
    models = [(genai_id, model) for p, genai_id, model in _models() if p == provider]
    assert models
    checked = 0
    for genai_id, model in models:
        for usage in USAGES:
            expected = _calc_price(usage, model, genai_id)
            assert cost_of(usage, model, provider) == expected, (model, usage)
            checked += expected is not None
    assert checked  # some answers are priced at all


def test_tiers_cache_and_refusals_are_covered() -> None:
    """The table has what the comparison above is meant to exercise."""
    from genai_prices import data
    from genai_prices.types import ConditionalPrice, ModelPrice, TieredPrices

    tiered = cached_1h = dated = 0
    for entry in data.providers:
        if entry.id not in PROVIDERS.values():
            continue
        for model in entry.models:
            prices = model.prices if isinstance(model.prices, list) else [model.prices]
            dated += isinstance(model.prices, list)
            for price in prices:
                price = price.prices if isinstance(price, ConditionalPrice) else price
                assert isinstance(price, ModelPrice)
                values = vars(price)
                tiered += any(isinstance(value, TieredPrices) for value in values.values())
                cached_1h += values.get("cache_write_1h_mtok") is not None
    assert tiered and cached_1h and dated
    usage = ChatUsage(100, 40, cache_read_tokens=4000)
    assert _calc_price(usage, "gpt-4o", "openai") is None  # refused, so None is compared too
    assert cost_of(usage, "gpt-4o", "openai") is None


def test_a_price_that_changes_on_a_date_is_the_price_of_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model whose price changed on a date costs the new price after it, the old before."""
    from genai_prices import data
    from genai_prices.types import StartDateConstraint

    found = None
    for entry in data.providers:
        if entry.id not in PROVIDERS.values():
            continue
        for model in entry.models:
            if isinstance(model.prices, list) and any(
                isinstance(p.constraint, StartDateConstraint) for p in model.prices
            ):
                found = entry.id, model
                break
        if found:
            break
    assert found is not None
    genai_id, model = found
    provider = next(p for p, g in PROVIDERS.items() if g == genai_id)
    change = next(p.constraint for p in model.prices if p.constraint is not None)
    assert isinstance(change, StartDateConstraint)
    usage = ChatUsage(300_000, 1000, cache_read_tokens=2000)  # above a 200k tier
    costs = []
    for day in (change.start_date - datetime.timedelta(days=1), change.start_date):
        when = datetime.datetime.combine(day, datetime.time(12), tzinfo=datetime.UTC)
        clock = types.SimpleNamespace(
            datetime=types.SimpleNamespace(now=lambda tz=None, when=when: when.astimezone(tz)),
            UTC=datetime.UTC,
        )
        # The price of "now" is looked up per answer: that day's noon, for _prices only.
        monkeypatch.setattr(_prices, "datetime", clock)
        from genai_prices import Usage, calc_price

        counts = Usage(input_tokens=300_000, output_tokens=1000, cache_read_tokens=2000)
        result = calc_price(counts, model.id, provider_id=genai_id, genai_request_timestamp=when)
        expected = float(result.total_price)
        assert cost_of(usage, model.id, provider) == expected
        costs.append(expected)
        monkeypatch.undo()
    assert costs[0] != costs[1]


def test_unknown_models_and_refused_usages_cost_nothing_known() -> None:
    assert cost_of(ChatUsage(1000, 10), "no-such-model-xyz", "openai") is None
    assert cost_of(ChatUsage(1000, 10), "gpt-4o-mini", "openai", "https://api.openai.com/v1")
    assert cost_of(ChatUsage(10, 10, cache_read_tokens=11), "gpt-4o-mini", "openai") is None
    # Decimal arithmetic as the table's: the float is the Decimal's, not a float sum's.
    expected = float(Decimal("0.15") * 1200 / 1_000_000 + Decimal("0.6") * 300 / 1_000_000)
    assert cost_of(ChatUsage(1200, 300), "gpt-4o-mini", "openai") == expected

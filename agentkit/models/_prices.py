"""What a model call cost, in USD: a user price table first, then ``genai-prices``.

``genai-prices`` (the ``agentkit[prices]`` extra) is a maintained table of provider prices;
it is consulted only for the providers' own endpoints: OpenAI, Anthropic, Azure OpenAI, AWS
Bedrock, Google Vertex and Gemini, DeepSeek, Groq, Mistral and OpenRouter, each recognised by
the adapter's default endpoint or by the provider's URL pattern in the table. The same model
name served by another endpoint (a proxy, a local server, another vendor's OpenAI-compatible
API) may cost anything. Everything else needs an entry from :func:`set_price`. An unknown
price is None, never a guess.

Example:
    >>> from agentkit.models._prices import ModelPrice, set_price
    >>> set_price("my-llama", ModelPrice(input_per_mtok=0.2, output_per_mtok=0.6))
"""

from __future__ import annotations

import _thread
import datetime
import functools
import importlib.util
import os
import re
import threading
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit.models._base import ChatResponse, ChatUsage

__all__ = [
    "ModelPrice",
    "clear_prices",
    "cost_of",
    "fill_cost",
    "preload",
    "set_price",
    "warm_up",
]

# agentkit provider name -> genai-prices provider id (whose URL pattern says which endpoints
# are the provider's own).
_GENAI_PROVIDER = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure",
    "bedrock": "aws",
    "vertex": "google",
    "gemini": "google",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral",
    "openrouter": "openrouter",
}


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens.

    Args:
        input_per_mtok: Price of an input (prompt) token.
        output_per_mtok: Price of an output token.
        cache_read_per_mtok: Price of an input token read from the prompt cache (None:
            the input price).
        cache_write_per_mtok: Price of an input token written to the cache (None: the
            input price). Anthropic's and Bedrock's five-minute writes cost 1.25x the input
            price, reads 0.1x; OpenAI and Gemini bill no writes and reads at 0.1x-0.5x.
        cache_write_1h_per_mtok: Price of a token written to a one-hour cache (``ttl="1h"``;
            2x the input price on Anthropic). None: ``cache_write_per_mtok``.
        input_audio_per_mtok: Price of an input audio token (None: unknown, so a call
            with audio input has no cost rather than a text-priced one).
        output_audio_per_mtok: Price of an output audio token (None: unknown).
    """

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None
    cache_write_1h_per_mtok: float | None = None
    input_audio_per_mtok: float | None = None
    output_audio_per_mtok: float | None = None

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")

    def cost(self, usage: ChatUsage) -> float | None:
        """The USD cost of ``usage`` at these prices (None: audio tokens without a price)."""
        audio_in, audio_out = usage.input_audio_tokens, usage.output_audio_tokens
        if (audio_in and self.input_audio_per_mtok is None) or (
            audio_out and self.output_audio_per_mtok is None
        ):
            return None
        read, write = usage.cache_read_tokens, usage.cache_write_tokens
        plain = max(0, usage.input_tokens - read - write - audio_in)
        read_price = (
            self.input_per_mtok if self.cache_read_per_mtok is None else (self.cache_read_per_mtok)
        )
        write_price = (
            self.input_per_mtok
            if self.cache_write_per_mtok is None
            else (self.cache_write_per_mtok)
        )
        long_price = (
            write_price if self.cache_write_1h_per_mtok is None else self.cache_write_1h_per_mtok
        )
        long_writes = min(usage.cache_write_1h_tokens, write)
        total = (
            plain * self.input_per_mtok
            + read * read_price
            + (write - long_writes) * write_price
            + long_writes * long_price
            + (usage.output_tokens - audio_out) * self.output_per_mtok
            + audio_in * (self.input_audio_per_mtok or 0.0)
            + audio_out * (self.output_audio_per_mtok or 0.0)
        )
        return total / 1_000_000


_table: dict[str, ModelPrice] = {}
_lock = threading.Lock()


def set_price(model: str, price: ModelPrice | None, *, provider: str | None = None) -> None:
    """Set (or with None, remove) the price of ``model``, for one provider or for all.

    A user price wins over ``genai-prices`` and applies whatever endpoint serves the model.

    Args:
        model: The model name as given to the adapter (``"gpt-4o"``, ``"my-llama"``).
        price: Its prices, or None to remove the entry.
        provider: Only for this provider (``"openai"``, ``"anthropic"``...); None: any.
    """
    key = f"{provider}:{model}" if provider else model
    with _lock:
        if price is None:
            _table.pop(key, None)
        else:
            _table[key] = price


def clear_prices() -> None:
    """Remove every price set with :func:`set_price`."""
    with _lock:
        _table.clear()


def preload() -> bool:
    """Import the ``genai-prices`` table now (else the first priced answer does).

    Loading the table takes a noticeable fraction of a second; an application may do it at
    start-up (or in a worker thread) instead of inside its first model call.

    Returns:
        Whether ``genai-prices`` is installed.
    """
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return False
    return True


_warm_lock = threading.Lock()
_warm_started = False
_warm_done = threading.Event()


def warm_up(provider: str, base_url: str | None) -> None:
    """Load the ``genai-prices`` table in a background thread, if this model's answers need it.

    Called when a model is built. Importing the table takes 0.2-1 s; done by the first
    priced answer, it would stall the event loop that long (the first-request stall). Only for
    a provider the table prices, at an endpoint that may be the provider's own, once per
    process, and only where ``genai-prices`` is installed.
    """
    global _warm_started
    if provider not in _GENAI_PROVIDER or _local(base_url):
        return
    with _warm_lock:
        if _warm_started:
            return
        _warm_started = True
    try:
        if importlib.util.find_spec("genai_prices") is None:
            _warm_done.set()
            return
        # ``_thread``: ``threading.Thread.start`` waits for the thread to run (see ``_lean``).
        _thread.start_new_thread(_warm, ())
    except (ImportError, ValueError, RuntimeError):  # not importable, or no thread to be had
        _warm_done.set()


def _warm() -> None:
    try:
        preload()
    except Exception:  # a warm-up only: the first priced answer imports it and sees why
        return
    finally:
        _warm_done.set()


def _before_fork() -> None:
    # As in ``_lean``: a child forked mid-import would inherit a lock no thread releases.
    if _warm_started:
        _warm_done.wait(30)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)


@functools.lru_cache(maxsize=64)  # asked on every answer: the URL is parsed once
def _local(base_url: str | None) -> bool:
    """Whether ``base_url`` certainly is no provider's own endpoint, without the table.

    Every provider's endpoint is a public DNS name: a host that is an IP address,
    ``localhost`` or a name without a dot (a container's, a LAN machine's) is a local server,
    a proxy or a test double. Deciding that here keeps the table (and pydantic, which it
    loads) out of processes that only talk to such servers.
    """
    if base_url is None:
        return False
    try:
        host = urllib.parse.urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    if ":" in host or "." not in host:  # IPv6 literal, or a single-label name
        return True
    return host == "localhost" or host.endswith(".localhost") or host.replace(".", "").isdigit()


@functools.lru_cache(maxsize=64)  # asked on every priced answer; the table is static
def _official(genai_id: str, base_url: str | None) -> bool:
    """Whether ``base_url`` (None: the adapter's default) is the provider's own endpoint."""
    if base_url is None:
        return True
    from genai_prices import data

    for entry in data.providers:
        if entry.id == genai_id:
            pattern = getattr(entry, "api_pattern", None)
            return isinstance(pattern, str) and re.match(pattern, base_url) is not None
    return False


# The ``genai-prices`` price keys of the token counts agentkit reports (``_counts``), and of
# the tool calls it never reports (a count of zero: nothing to pay, nothing to subtract).
_PLAIN_KEYS = frozenset(
    {
        "input_mtok",
        "output_mtok",
        "cache_read_mtok",
        "cache_write_mtok",
        "cache_write_1h_mtok",
        "input_audio_mtok",
        "output_audio_mtok",
        "web_searches_kcount",
        "storage_searches_kcount",
    }
)
_CACHE_KEYS = ("cache_read_mtok", "cache_write_mtok", "cache_write_1h_mtok")


@dataclass(frozen=True, slots=True)
class _Plan:
    """A ``genai-prices`` price resolved once: what its ``calc_price`` rebuilds on every call.

    ``genai_prices.types.ModelPrice.calc_price`` validates the price's units against the
    unit registry and decomposes the usage into leaves on every call (about 250 us, more than
    the rest of a reply's client work). For a price of the plain token keys only, the leaves
    are a few subtractions, done here in ``Decimal`` term by term as the table does, so the
    float is the same to the last bit (``tests/test_prices_plan.py`` compares every model of
    the table). Any other price (images, audio caches, per-request fees, a key a later table
    brings) has no plan and is priced by ``calc_price``.

    Attributes:
        values: The price's keys with a price (USD per million tokens, or tiered prices).
        tiered: Whether a value is tiered: its tier is chosen by the input tokens.
    """

    values: dict[str, Any]
    tiered: bool

    def total(self, counts: dict[str, int]) -> float | None:
        """The USD cost of ``counts`` (see ``_counts``); None where the table refuses them."""
        from decimal import Decimal

        values = self.values
        write = counts.get("cache_write_tokens", 0)
        # A priced unit pays for its count less its priced descendants'; an unpriced one
        # stays in its parent's count (cache reads at the input price when unpriced...).
        leaves: list[tuple[str, int]] = []
        rest_in = counts["input_tokens"]
        if "cache_write_1h_mtok" in values:
            long_writes = counts.get("cache_write_1h_tokens", 0)
            leaves.append(("cache_write_1h_mtok", long_writes))
            write -= long_writes
            rest_in -= long_writes
        for key, count in (
            ("cache_write_mtok", write),
            ("cache_read_mtok", counts.get("cache_read_tokens", 0)),
            ("input_audio_mtok", counts.get("input_audio_tokens", 0)),
        ):
            if key in values:
                leaves.append((key, count))
                rest_in -= count
        rest_out = counts["output_tokens"]
        if "output_audio_mtok" in values:
            audio_out = counts.get("output_audio_tokens", 0)
            leaves.append(("output_audio_mtok", audio_out))
            rest_out -= audio_out
        if rest_in < 0 or rest_out < 0:  # more cache or audio tokens than input or output
            return None
        leaves.append(("input_mtok", rest_in))
        leaves.append(("output_mtok", rest_out))
        threshold = counts["input_tokens"] if self.tiered else 0
        total = Decimal(0)
        for key, count in leaves:
            value = values[key]
            if not isinstance(value, Decimal):  # tiered: every token at the highest tier reached
                tiered, value = value, value.base
                for tier in reversed(tiered.tiers):
                    if threshold > tier.start:
                        value = tier.price
                        break
            total += value * Decimal(count) / 1_000_000
        return float(total)


# id of a resolved ``genai-prices`` price -> the price (which keeps the id from being reused
# while the entry lives) and its plan (None: ``calc_price`` prices it). A table's prices live
# as long as the table; a new table (``genai_prices.UpdatePrices``) brings new price objects.
_plans: dict[int, tuple[Any, _Plan | None]] = {}


def _plan(price: Any) -> _Plan | None:
    """The plan of a ``genai-prices`` price (None: it has keys beyond the plain ones)."""
    entry = _plans.get(id(price))
    if entry is not None:
        return entry[1]
    from decimal import Decimal

    from genai_prices.types import TieredPrices

    values = {key: value for key, value in vars(price).items() if value is not None}
    keys = values.keys()
    plain = (
        keys <= _PLAIN_KEYS
        and {"input_mtok", "output_mtok"} <= keys
        # Audio and cache prices together need a join price (cache_audio_read_mtok...), a
        # one-hour write price a five-minute one: the table refuses such a price otherwise.
        and not ("input_audio_mtok" in keys and not keys.isdisjoint(_CACHE_KEYS))
        and ("cache_write_1h_mtok" not in keys or "cache_write_mtok" in keys)
        and all(
            isinstance(value, TieredPrices)
            or (isinstance(value, Decimal) and value.is_finite() and value >= 0)
            for value in values.values()
        )
    )
    tokens = {key: value for key, value in values.items() if key.endswith("_mtok")}
    plan = (
        _Plan(tokens, any(isinstance(value, TieredPrices) for value in tokens.values()))
        if plain
        else None
    )
    _plans[id(price)] = (price, plan)
    return plan


def _counts(usage: ChatUsage) -> dict[str, int]:
    """The counts of ``usage`` that ``genai-prices`` is given (a zero count is left out)."""
    counts = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.cache_read_tokens:
        counts["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        counts["cache_write_tokens"] = usage.cache_write_tokens
    if usage.cache_write_1h_tokens:  # of the writes, those priced as one-hour ones
        counts["cache_write_1h_tokens"] = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    if usage.input_audio_tokens:
        counts["input_audio_tokens"] = usage.input_audio_tokens
    if usage.output_audio_tokens:
        counts["output_audio_tokens"] = usage.output_audio_tokens
    return counts


def _from_genai_prices(
    usage: ChatUsage, provider: str, model: str, base_url: str | None
) -> float | None:
    genai_id = _GENAI_PROVIDER.get(provider)
    if genai_id is None or _local(base_url):  # decided without importing the table
        return None
    try:
        from genai_prices import Usage, data_snapshot
    except ImportError:
        return None
    if not _official(genai_id, base_url):
        return None
    try:
        # What ``genai_prices.calc_price`` does, in its steps: the lookup is cached by the
        # table; the price of now (a price may change on a date or by the hour).
        table_provider, info = data_snapshot.get_snapshot().find_provider_model(
            model, None, genai_id, None
        )
        prices = info.get_prices(datetime.datetime.now(tz=datetime.UTC))
    except Exception:  # unknown model, or a table problem: no number rather than a wrong one
        return None
    # An entry without audio prices prices audio tokens as text (many times too low).
    if (usage.input_audio_tokens and vars(prices).get("input_audio_mtok") is None) or (
        usage.output_audio_tokens and vars(prices).get("output_audio_mtok") is None
    ):
        return None
    counts = _counts(usage)
    plan = _plan(prices)
    if plan is not None:
        return plan.total(counts)
    try:
        return float(info.calc_price(Usage(**counts), table_provider).total_price)
    except Exception:  # a usage the table refuses, or a table problem
        return None


def cost_of(
    usage: ChatUsage, model: str, provider: str, base_url: str | None = None
) -> float | None:
    """The USD cost of ``usage`` on ``model``, or None when the price is unknown.

    Args:
        usage: Token counts of one call.
        model: The model name as requested.
        provider: The adapter's provider (``ChatModel.provider``).
        base_url: The endpoint the adapter talks to (None: the provider's own API).
    """
    with _lock:
        price = _table.get(f"{provider}:{model}") or _table.get(model)
    if price is not None:
        return price.cost(usage)
    return _from_genai_prices(usage, provider, model, base_url)


def fill_cost(
    response: ChatResponse, model: str, provider: str, base_url: str | None = None
) -> ChatResponse:
    """Set ``response.usage.cost`` (when the response has usage) and return the response."""
    usage = response.usage
    if usage is not None and usage.cost is None:
        usage.cost = cost_of(usage, model, provider, base_url)
    return response

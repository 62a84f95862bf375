"""Cost in USD: user price table, genai-prices for the providers' own APIs, None otherwise."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from _model_calls import ask
from _wire_server import Reply, WireServer, anthropic_message, openai_completion
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import Msg, ReActAgent
from agentkit.models import ModelRequest
from agentkit.models._anthropic import AnthropicChatModel
from agentkit.models._base import ChatUsage
from agentkit.models._openai import OpenAIChatModel
from agentkit.models._prices import ModelPrice, clear_prices, cost_of, set_price
from agentkit.observability import instrument, uninstrument
from agentkit.testing import ScriptedModel


@pytest.fixture(autouse=True)
def _clean_prices() -> Iterator[None]:
    clear_prices()
    yield
    clear_prices()


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


def test_model_price_cost_with_cache_tokens() -> None:
    price = ModelPrice(2.0, 10.0, cache_read_per_mtok=0.5, cache_write_per_mtok=2.5)
    usage = ChatUsage(1000, 200, cache_read_tokens=600, cache_write_tokens=100)
    expected = (300 * 2.0 + 600 * 0.5 + 100 * 2.5 + 200 * 10.0) / 1e6
    assert price.cost(usage) == pytest.approx(expected)
    with pytest.raises(ValueError, match="input_per_mtok"):
        ModelPrice(-1, 1)


def test_genai_prices_only_for_the_official_endpoint() -> None:
    from genai_prices import Usage, calc_price

    usage = ChatUsage(1000, 100)
    expected = float(calc_price(Usage(input_tokens=1000, output_tokens=100), "gpt-4o",
                                provider_id="openai").total_price)  # fmt: skip
    assert cost_of(usage, "gpt-4o", "openai") == pytest.approx(expected)
    assert cost_of(usage, "gpt-4o", "openai", "https://api.openai.com/v1") == pytest.approx(
        expected
    )
    # The same name on a proxy or a local server: unknown, not OpenAI's price.
    assert cost_of(usage, "gpt-4o", "openai", "http://127.0.0.1:8000/v1") is None
    assert cost_of(usage, "no-such-model-xyz", "openai") is None
    assert cost_of(usage, "gpt-4o", "scripted") is None
    # Cached prompt tokens are cheaper: a cache hit never costs more than no cache.
    cached = cost_of(ChatUsage(1000, 100, cache_read_tokens=800), "gpt-4o", "openai")
    assert cached is not None and cached < expected


@pytest.mark.parametrize(
    ("provider", "genai_id", "model", "own_url"),
    [
        ("azure", "azure", "gpt-4o", "https://acme.openai.azure.com/openai/deployments/gpt-4o"),
        ("bedrock", "aws", "anthropic.claude-3-5-sonnet-20241022-v2:0",
         "https://bedrock-runtime.us-east-1.amazonaws.com"),
        ("vertex", "google", "claude-3-5-sonnet-v2@20241022",
         "https://us-east5-aiplatform.googleapis.com/v1"),
        ("gemini", "google", "gemini-2.0-flash",
         "https://generativelanguage.googleapis.com/v1beta/openai/"),
        ("deepseek", "deepseek", "deepseek-chat", "https://api.deepseek.com"),
        ("groq", "groq", "llama-3.3-70b-versatile", "https://api.groq.com/openai/v1"),
        ("mistral", "mistral", "mistral-large-latest", "https://api.mistral.ai/v1"),
        ("openrouter", "openrouter", "openai/gpt-4o", "https://openrouter.ai/api/v1"),
    ],
)  # fmt: skip
def test_cloud_and_compatible_providers_are_priced_on_their_own_endpoints(
    provider: str, genai_id: str, model: str, own_url: str
) -> None:
    from genai_prices import Usage, calc_price

    usage = ChatUsage(1000, 100)
    expected = float(calc_price(Usage(input_tokens=1000, output_tokens=100), model,
                                provider_id=genai_id).total_price)  # fmt: skip
    assert cost_of(usage, model, provider) == pytest.approx(expected)  # the adapter's default
    assert cost_of(usage, model, provider, own_url) == pytest.approx(expected)
    # the same name behind a proxy or a local server: unknown
    assert cost_of(usage, model, provider, "http://127.0.0.1:8000/v1") is None
    assert cost_of(usage, model, provider, "https://llm-proxy.example.com/v1") is None


def test_preload_reports_the_table() -> None:
    from agentkit.models._prices import preload

    assert preload() is True  # the dev environment has the agentkit[prices] extra


def test_user_price_wins_and_applies_to_any_endpoint() -> None:
    set_price("gpt-4o", ModelPrice(1.0, 1.0), provider="openai")
    usage = ChatUsage(1_000_000, 0)
    assert cost_of(usage, "gpt-4o", "openai", "http://127.0.0.1:1/v1") == pytest.approx(1.0)
    assert cost_of(usage, "gpt-4o", "anthropic") is None  # scoped to one provider
    set_price("gpt-4o", None, provider="openai")
    assert cost_of(usage, "gpt-4o", "openai", "http://127.0.0.1:1/v1") is None


def test_sum_of_costs_is_unknown_when_one_part_is() -> None:
    total = ChatUsage()  # a run's empty starting total
    total = total + ChatUsage(10, 5, cost=0.25)
    total = total + ChatUsage(10, 5, cost=0.5)
    assert total.cost == pytest.approx(0.75)
    assert (total + ChatUsage(10, 5)).cost is None
    assert (ChatUsage() + ChatUsage()).cost is None
    assert "cost" not in ChatUsage(1, 1).to_dict()
    assert ChatUsage(1, 1, cost=0.1).to_dict()["cost"] == 0.1


async def test_cost_per_request_and_per_run_over_the_wire(server: WireServer) -> None:
    set_price("local-llm", ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0))
    server.script(
        Reply(json=openai_completion(tool_calls=[("c1", "missing", "{}")], usage=(1000, 100))),
        Reply(json=openai_completion(text="done", usage=(2000, 50))),
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(tracer_provider=provider)
    model = OpenAIChatModel("local-llm", api_key="k", base_url=server.openai_url, stream=False)
    try:
        reply = await ReActAgent("a", "s", model, print_hint=False)("go")
    finally:
        uninstrument()
        await model.aclose()
    first = (1000 * 3.0 + 100 * 15.0) / 1e6
    second = (2000 * 3.0 + 50 * 15.0) / 1e6
    assert reply.metadata["usage"]["cost"] == pytest.approx(first + second)
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat local-llm"]
    costs = [s.attributes["agentkit.usage.cost"] for s in chats]  # type: ignore[index]
    assert costs == [pytest.approx(first), pytest.approx(second)]
    run = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent a")
    assert run.attributes["agentkit.usage.cost"] == pytest.approx(first + second)  # type: ignore[index]


async def test_unknown_model_reports_no_cost(server: WireServer) -> None:
    server.script(Reply(json=anthropic_message([{"type": "text", "text": "hi"}])))
    model = AnthropicChatModel(
        "claude-local", api_key="k", base_url=server.anthropic_url, stream=False
    )
    try:
        response = await ask(model, [Msg("user", "hi", "user")])
    finally:
        await model.aclose()
    assert response.usage is not None and response.usage.cost is None  # type: ignore[union-attr]


async def test_scripted_runs_have_no_cost() -> None:
    reply = await ReActAgent("a", "s", ScriptedModel(["hi"]), print_hint=False)("go")
    assert "cost" not in reply.metadata["usage"]


async def test_audio_tokens_are_priced_as_audio_or_not_at_all(server: WireServer) -> None:
    """Audio tokens cost many times text tokens: priced as text, the cost was far too low."""
    body = openai_completion(text="hi", usage=(1000, 100))
    body["usage"]["prompt_tokens_details"] = {"audio_tokens": 600, "cached_tokens": 0}
    body["usage"]["completion_tokens_details"] = {"audio_tokens": 80}
    server.script(Reply(json=body), Reply(json=body))
    model = OpenAIChatModel("local-audio", api_key="k", base_url=server.openai_url, stream=False)
    try:
        set_price("local-audio", ModelPrice(input_per_mtok=2.5, output_per_mtok=10.0))
        response = await model.request(ModelRequest([Msg("user", "hi", "user")]))
        assert response.usage is not None
        assert response.usage.input_audio_tokens == 600
        assert response.usage.output_audio_tokens == 80
        assert response.usage.cost is None  # text prices only: the audio's is unknown
        audio = ModelPrice(2.5, 10.0, input_audio_per_mtok=40.0, output_audio_per_mtok=80.0)
        set_price("local-audio", audio)
        response = await model.request(ModelRequest([Msg("user", "hi", "user")]))
        assert response.usage is not None
        expected = (400 * 2.5 + 600 * 40.0 + 20 * 10.0 + 80 * 80.0) / 1e6
        assert response.usage.cost == pytest.approx(expected)
    finally:
        await model.aclose()
    usage = ChatUsage(1000, 100, input_audio_tokens=600, output_audio_tokens=80)
    assert (usage + usage).input_audio_tokens == 1200
    assert usage.to_dict()["output_audio_tokens"] == 80
    # genai-prices: only a model whose entry has audio prices gets a number.
    assert cost_of(usage, "gpt-4o-audio-preview", "openai") is None
    with_audio = cost_of(usage, "gpt-audio", "openai")
    assert with_audio == pytest.approx((400 * 2.5 + 600 * 32 + 20 * 10 + 80 * 64) / 1e6)
    assert cost_of(ChatUsage(1000, 100), "gpt-4o-audio-preview", "openai") is not None

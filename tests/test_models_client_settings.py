"""A model's connection settings changed after its first request are used by the next one.

``HTTPChatModel`` builds its transport (the lean ``httpx2`` client or the SDK client) once and
keeps it; ``api_key``, ``base_url`` and ``client_kwargs`` are public attributes, and a server
that rotates a key or moves a tenant to another endpoint sets them on a live model. Both
transports, over real HTTP to two local servers.
"""

from __future__ import annotations

import asyncio

import pytest
from _model_calls import ask

from agentkit.messages import Msg
from agentkit.models._openai import OpenAIChatModel
from tests._wire_server import Reply, WireServer, openai_completion


@pytest.fixture(params=["auto", "sdk"])
def transport(request: pytest.FixtureRequest) -> str:
    """Both request paths: the lean one (``auto``) and the openai SDK client."""
    return str(request.param)


def _model(url: str, transport: str) -> OpenAIChatModel:
    return OpenAIChatModel(
        "m",
        api_key="k1",
        base_url=url,
        stream=False,
        transport=transport,  # type: ignore[arg-type]
        client_kwargs={"default_headers": {"X-Tenant": "t1"}},
    )


HI = [Msg("user", "hi", "user")]


async def test_a_changed_key_url_and_headers_are_used_next(transport: str) -> None:
    async with WireServer() as first, WireServer() as second:
        first.script(Reply(json=openai_completion("a")))
        second.script(Reply(json=openai_completion("b")))
        model = _model(first.openai_url, transport)
        assert (await ask(model, HI)).get_text() == "a"
        model.api_key = "k2"
        model.base_url = second.openai_url
        model.client_kwargs["default_headers"] = {"X-Tenant": "t2"}
        assert (await ask(model, HI)).get_text() == "b"
        await model.aclose()
    assert [len(first.requests), len(second.requests)] == [1, 1]
    sent = second.requests[0].headers
    assert sent["authorization"] == "Bearer k2"
    assert sent["x-tenant"] == "t2"


def test_one_model_in_two_event_loops_with_a_setting_changed_between(transport: str) -> None:
    model = _model("http://127.0.0.1:9/v1", transport)
    keys = []

    async def turn(key: str, text: str) -> None:
        async with WireServer() as server:
            server.script(Reply(json=openai_completion(text)))
            model.api_key, model.base_url = key, server.openai_url
            assert (await ask(model, HI)).get_text() == text
            await model.aclose()
            keys.append(server.requests[0].headers["authorization"])

    asyncio.run(turn("k1", "a"))
    asyncio.run(turn("k2", "b"))
    assert keys == ["Bearer k1", "Bearer k2"]


async def test_a_key_changed_before_every_request_keeps_few_transports_open(
    transport: str,
) -> None:
    async with WireServer() as server:
        server.script(*[Reply(json=openai_completion(str(i))) for i in range(12)])
        model = _model(server.openai_url, transport)
        for i in range(12):
            model.api_key = f"k{i}"  # a key per request (extra_headers is the cheap way)
            assert (await ask(model, HI)).get_text() == str(i)
        assert len(model._retired) <= 5
        await model.aclose()
    keys = [r.headers["authorization"] for r in server.requests]
    assert keys == [f"Bearer k{i}" for i in range(12)]

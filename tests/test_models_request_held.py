"""What a model request holds while it waits for its answer: the body's bytes, not the body.

The body's dicts and lists are tracked by the cycle collector; 500 requests in flight holding
them made young collections more frequent (#34, docs/benchmarks.md Round 6).
"""

from __future__ import annotations

import weakref
from typing import Any

import httpx2
import pytest
from _model_calls import request_of

from agentkit.messages import Msg
from agentkit.models._lean import LeanHTTP
from agentkit.models._openai import OpenAIChatModel

ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


class _Body(dict[str, object]):
    """A request body that a weak reference can follow (a plain dict cannot)."""


async def test_the_body_is_gone_while_the_request_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    model = OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    bodies: list[weakref.ref[_Body]] = []
    format_request = model.format_request

    def tracked(request: Any, *, stream: bool | None = None) -> dict[str, object]:
        body = _Body(format_request(request, stream=stream))
        bodies.append(weakref.ref(body))
        return body

    alive_at_wait: list[bool] = []

    async def post(self: LeanHTTP, loop: object, path: str, body: bytes, **_: Any) -> Any:
        alive_at_wait.append(bodies[-1]() is not None)  # where the request waits
        return httpx2.Response(200, json=ANSWER)

    monkeypatch.setattr(model, "format_request", tracked)
    monkeypatch.setattr(LeanHTTP, "post", post)
    answer = await model.request(request_of([Msg("user", "Hello", "user")]))
    assert answer.content == [{"type": "text", "text": "Hi."}]
    assert alive_at_wait == [False]
    await model.aclose()

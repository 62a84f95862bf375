"""Helpers of the serve tests: a real uvicorn server in the test's event loop, SSE parsing,
and strict AG-UI validation of every event."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import uvicorn
from ag_ui.core import Event
from pydantic import BaseModel, TypeAdapter

EVENT = TypeAdapter(Event)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1; yield its base URL.

    The socket is bound here (port 0) and handed to uvicorn, so no other process on a busy
    machine can take the port between choosing and binding it.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


def _no_extras(model: BaseModel, path: str = "event") -> None:
    """The models allow unknown fields; a conformant producer sends none."""
    assert not model.model_extra, f"{path} has fields outside the AG-UI schema: {model.model_extra}"
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, BaseModel):
                _no_extras(item, f"{path}.{name}")


def validate(data: dict[str, Any]) -> Any:
    """Validate one event against the ag-ui-protocol models (strictly: no extra fields)."""
    event = EVENT.validate_python(data)
    _no_extras(event)
    return event


async def sse_events(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of an SSE response, each validated."""
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            data = json.loads(line[6:])
            validate(data)
            yield data


async def run_events(
    client: httpx2.AsyncClient, url: str, body: Any, **kw: Any
) -> list[dict[str, Any]]:
    """POST and collect the whole SSE stream (raises on a non-200 answer)."""
    async with client.stream("POST", url, json=body, **kw) as response:
        if response.status_code != 200:
            await response.aread()
            raise AssertionError(f"{response.status_code}: {response.text}")
        return [e async for e in sse_events(response)]


def user(text: str, msg_id: str | None = None) -> dict[str, Any]:
    import os

    return {"id": msg_id or os.urandom(8).hex(), "role": "user", "content": text}


def run_input(thread: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    import os

    return {
        "threadId": thread,
        "runId": os.urandom(8).hex(),
        "messages": list(messages),
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def stream_into(
    client: httpx2.AsyncClient, url: str, body: Any, sink: list[dict[str, Any]]
) -> None:
    """POST and append the events to ``sink`` as they arrive (for tests acting mid-run)."""
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for event in sse_events(response):
            sink.append(event)


async def wait_for(sink: list[dict[str, Any]], kind: str) -> None:
    """Wait until an event of type ``kind`` arrived in ``sink`` (the test timeout bounds it)."""
    while not any(e["type"] == kind for e in sink):
        await anyio.sleep(0.01)

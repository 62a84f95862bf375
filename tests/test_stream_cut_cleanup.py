"""A streamed answer cut anywhere leaves nothing for the garbage collector to close.

An async generator dropped unfinished is closed by the event loop's finalizer hook in a task
of its own, after the reply has ended: an orphaned task per interrupt. The cut here lands
outside the network read (a listener interrupts from the run's own task on the first text),
so the model's stream is closed from outside, layer by layer; so does a consumer of the
model's own stream that stops mid-answer.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from agentkit import ReActAgent
from agentkit.events import AgentEvent, TextDelta
from agentkit.messages import Msg
from agentkit.models import ModelRequest, OpenAIChatModel
from tests._wire_server import Stream, WireServer, openai_chunks


@contextmanager
def finalized_generators() -> Iterator[list[str]]:
    """Names of the async generators the running loop's finalizer hook gets, meanwhile."""
    seen: list[str] = []
    firstiter, finalizer = sys.get_asyncgen_hooks()

    def record(agen: AsyncGenerator[Any, Any]) -> None:
        seen.append(agen.ag_code.co_qualname)
        if finalizer is not None:
            finalizer(agen)

    sys.set_asyncgen_hooks(firstiter, record)
    try:
        yield seen
    finally:
        sys.set_asyncgen_hooks(firstiter, finalizer)


async def test_an_interrupt_from_a_listener_closes_every_stream_layer() -> None:
    async with WireServer() as server:
        stream = Stream(events=openai_chunks("Hello there world", done=False), then="hang")
        server.script(stream)
        model = OpenAIChatModel("gpt", api_key="k", base_url=server.openai_url, stream=True)
        agent = ReActAgent(name="a", sys_prompt="s", model=model, print_hint=False)

        def listen(event: AgentEvent) -> None:
            if isinstance(event, TextDelta):
                agent.interrupt_threadsafe()  # from the run's own task: cut at once

        agent.add_event_listener(listen)
        with finalized_generators() as finalized:
            with anyio.fail_after(5):  # a hang guard, not a measurement
                reply = await agent("hi")
            gc.collect()
        assert (reply.metadata or {}).get("interrupted") is True
        assert finalized == []
        with anyio.fail_after(5):
            await stream.closed.wait()  # the connection was closed, not pooled half-read
        memory = await agent.memory.get_memory()
        assert [m.role for m in memory] == ["user", "assistant"]
        await model.aclose()


async def test_a_consumer_that_stops_mid_answer_closes_every_stream_layer() -> None:
    async with WireServer() as server:
        stream = Stream(events=openai_chunks("Hello there world", done=False), then="hang")
        server.script(stream)
        model = OpenAIChatModel("gpt", api_key="k", base_url=server.openai_url, stream=True)
        with finalized_generators() as finalized:
            chunks = model.request_stream(ModelRequest([Msg("user", "hi", "user")]))
            with anyio.fail_after(5):  # a hang guard, not a measurement
                async for chunk in chunks:
                    assert chunk.get_text()
                    break
                await chunks.aclose()
            gc.collect()
        assert finalized == []
        with anyio.fail_after(5):
            await stream.closed.wait()
        await model.aclose()

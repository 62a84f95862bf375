"""A progress notification that arrives after its call ended never raises in the callback."""

from __future__ import annotations

import anyio

from agentkit.mcp._calls import progress_sender
from agentkit.tools import ToolResponse


async def test_progress_after_the_final_result_is_dropped() -> None:
    send, receive = anyio.create_memory_object_stream[ToolResponse](10)
    progress = progress_sender(send)
    await progress(1, 2, "half")
    send.close()  # the call's final result went out: the stream is closed
    await progress(2, 2, "late")  # must not raise ClosedResourceError
    with receive:
        chunks = [chunk async for chunk in receive]
    assert [(c.metadata or {}).get("progress") for c in chunks] == [1]


async def test_progress_after_the_caller_stopped_reading_is_dropped() -> None:
    send, receive = anyio.create_memory_object_stream[ToolResponse](10)
    progress = progress_sender(send)
    receive.close()  # the consumer left the iteration
    await progress(1, None, None)  # must not raise BrokenResourceError
    send.close()

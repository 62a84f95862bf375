"""End to end: ReActAgent -> OpenAIChatModel (real SDK) -> local wire-compatible server."""

from __future__ import annotations

import json

import anyio

from agentkit.models._openai import OpenAIChatModel
from agentkit.tools import INTERRUPTED_TEXT
from tests._agent_helpers import Recorder, agent_for, checked_memory, results_of, shape
from tests._waiting import eventually
from tests._wire_server import Stream, WireServer, openai_chunks


async def test_parallel_tool_calls_through_the_openai_adapter():
    rec = Recorder()
    async with WireServer() as server:
        server.script(
            Stream(
                openai_chunks(
                    text="Running both.",
                    tool_calls=[
                        ("call_a", "sleep", json.dumps({"label": "a", "seconds": 0.2})),
                        ("call_b", "sleep", json.dumps({"label": "b", "seconds": 0.2})),
                    ],
                    interleave=True,
                )
            ),
            Stream(openai_chunks(text="Both slept.")),
        )
        model = OpenAIChatModel("gpt-test", api_key="k", base_url=server.openai_url)
        agent = agent_for(model, rec)
        reply = await agent("sleep twice")
        await model.aclose()
        requests = list(server.requests)
    assert reply.get_text() == "Both slept."
    assert rec.max_in_flight == 2  # the two tools overlapped
    assert reply.metadata["usage"]["input_tokens"] == 20
    memory = await checked_memory(agent)
    assert shape(memory) == [
        ("user", ["text:sleep twice"]),
        ("assistant", ["text:Running both.", "use:call_a", "use:call_b"]),
        ("user", ["result:call_a", "result:call_b"]),
        ("assistant", ["text:Both slept."]),
    ]
    second = requests[1].json
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]
    assert second["messages"][0] == {"role": "system", "content": "You are a test bot."}
    assert {t["function"]["name"] for t in second["tools"]} >= {"sleep", "add"}


async def test_interrupt_closes_the_http_stream():
    async with WireServer() as server:
        hanging = Stream(
            openai_chunks(text="Partial answer", done=False, usage=None)[:-1], then="hang"
        )
        server.script(hanging)
        model = OpenAIChatModel("gpt-test", api_key="k", base_url=server.openai_url)
        agent = agent_for(model)
        result = []
        partial_read = anyio.Event()

        async def run() -> None:
            # Streamed, so that the test sees when the partial answer has reached the agent.
            text = ""
            async for event in agent.stream("talk"):
                if event.type == "text_delta":
                    text += event.delta
                    if text == "Partial answer":
                        partial_read.set()
                elif event.type == "reply_finished":
                    result.append(event.reply)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(10):
                await partial_read.wait()
            await agent.interrupt()  # the body never ends: only the interrupt ends this run
        with anyio.fail_after(5):
            await hanging.closed.wait()
        await model.aclose()
    reply = result[0]
    assert reply.metadata["interrupted"] is True
    assert reply.get_text() == "Partial answer"
    memory = await checked_memory(agent)
    assert shape(memory) == [("user", ["text:talk"]), ("assistant", ["text:Partial answer"])]
    assert INTERRUPTED_TEXT not in json.dumps([m.to_dict() for m in memory])
    assert results_of(memory) == {}


async def test_interrupt_cancels_an_mcp_tool_call_on_the_server():
    from agentkit.mcp import MCPClient, register_mcp_client
    from agentkit.testing import ScriptedModel, tool_use
    from tests._mcp_helpers import children, py_stdio, stats_with, wait_no_new_children

    before = children()
    async with MCPClient("py", py_stdio()) as client:
        agent = agent_for(ScriptedModel([[tool_use("slow", "m1", seconds=20)]]))
        await register_mcp_client(agent.toolkit, client, enable_funcs=["slow", "stats"])
        result = []

        async def run() -> None:
            result.append(await agent("go"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await eventually(lambda: stats_with(client, "started=1"), "the call on the server")
            await agent.interrupt()
        # the 20 s call ended as interrupted: the run did not wait for the server's answer
        assert result[0].metadata["interrupted"] is True
        assert results_of(await checked_memory(agent))["m1"] == (INTERRUPTED_TEXT, True)
        stats = await eventually(lambda: stats_with(client, "cancelled=1"), "the server's cancel")
        assert stats == "started=1 cancelled=1 finished=0"
    assert wait_no_new_children(before) == set()

"""MCPClient against the Python MCPServer test server over stdio, in both protocol eras.

``protocol="auto"`` negotiates 2026-07-28 with an mcp 2.x server; ``protocol="legacy"``
forces the 2025-11-25 handshake, so every feature here is checked in both eras.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator

import anyio
import pytest

from agentkit.exceptions import MCPCallInterrupted, MCPConnectionError, MCPError
from agentkit.mcp import MCPClient, StdioServer
from agentkit.testing import ScriptedModel
from tests._mcp_helpers import PYTHON, children, py_stdio, stats_with, wait_no_new_children
from tests._waiting import eventually

ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@pytest.fixture(autouse=True)
async def no_leaks() -> AsyncIterator[None]:
    before = children()
    yield
    assert wait_no_new_children(before) == set(), "an MCP server process was left behind"
    leftover = [t for t in asyncio.all_tasks() if t.get_name().startswith("agentkit-mcp-")]
    assert [t for t in leftover if not t.done()] == []


@pytest.fixture(params=list(ERAS))
async def client(request: pytest.FixtureRequest) -> AsyncIterator[MCPClient]:
    async with MCPClient("py", py_stdio(), protocol=request.param) as c:
        assert c.protocol_version == ERAS[request.param]
        yield c


async def test_list_and_call(client: MCPClient) -> None:
    names = [t.name for t in await client.list_tools()]
    assert {"echo", "add", "slow", "progress", "weather", "media"} <= set(names)
    result = await client.call_tool("add", {"a": 2, "b": 3})
    assert not result.is_error and result.get_text() == "5"
    assert result.metadata and result.metadata["mcp_server"] == "py"


async def test_structured_content_kept(client: MCPClient) -> None:
    result = await client.call_tool("weather", {"city": "Oslo"})
    assert result.metadata is not None
    assert result.metadata["structured_content"] == {"city": "Oslo", "temperature": 21}
    assert '"temperature": 21' in result.get_text()


async def test_content_conversion(client: MCPClient) -> None:
    result = await client.call_tool("media")
    kinds = [b["type"] for b in result.content]
    assert kinds == ["image", "text", "audio", "text", "text"]
    image, embedded, audio, link, plain = result.content
    assert image["source"]["media_type"] == "image/png"  # type: ignore[typeddict-item]
    assert embedded["text"] == "[resource test://doc]\nembedded text"  # type: ignore[typeddict-item]
    assert audio["source"]["media_type"] == "audio/wav"  # type: ignore[typeddict-item]
    assert "test://readme" in link["text"]  # type: ignore[typeddict-item]
    assert plain["text"] == "plain"  # type: ignore[typeddict-item]


async def test_is_error_becomes_error_response(client: MCPClient) -> None:
    result = await client.call_tool("fail", {"message": "boom"})
    assert result.is_error and "boom" in result.get_text()


async def test_unknown_tool_is_an_error_response(client: MCPClient) -> None:
    result = await client.call_tool("nope", {})
    assert result.is_error


async def test_progress_streams_as_chunks(client: MCPClient) -> None:
    chunks = [c async for c in client.call_tool_stream("progress", {"steps": 3})]
    assert [c.is_last for c in chunks] == [False, False, False, True]
    assert chunks[0].get_text() == "step 1 (1/3)"
    assert chunks[1].metadata == {"progress": 2.0, "total": 3.0, "message": "step 2"}
    assert chunks[-1].get_text() == "done 3"


async def test_cancellation_reaches_server_quickly(client: MCPClient) -> None:
    started = time.monotonic()
    with anyio.move_on_after(0.3):
        async for _ in client.call_tool_stream("slow", {"seconds": 20}):
            pass
    assert time.monotonic() - started < 10  # the call sleeps 20 s
    # The server saw notifications/cancelled: its handler was cancelled, not finished.
    stats = await eventually(lambda: stats_with(client, "cancelled=1"), "the server's cancel")
    assert stats == "started=1 cancelled=1 finished=0"


async def test_breaking_out_of_the_stream_cancels_the_call(client: MCPClient) -> None:
    stream = client.call_tool_stream("progress", {"steps": 200})
    async for chunk in stream:
        assert not chunk.is_last
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert (await client.call_tool("echo", {"text": "still fine"})).get_text() == "still fine"


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_request_timeout_is_an_error_and_cancels(protocol: str) -> None:
    async with MCPClient("py", py_stdio(), protocol=protocol, timeout=0.5) as c:  # type: ignore[arg-type]
        started = time.monotonic()
        result = await c.call_tool("slow", {"seconds": 20})
        assert result.is_error and "timed out" in result.get_text()
        assert time.monotonic() - started < 5
        await eventually(lambda: stats_with(c, "cancelled=1"), "the server's cancel")


async def test_concurrent_calls_share_the_session(client: MCPClient) -> None:
    results: list[str] = []

    async def one(i: int) -> None:
        results.append((await client.call_tool("slow", {"seconds": 3})).get_text())

    async def counters() -> dict[str, int]:
        text = (await client.call_tool("stats", {})).get_text()
        return {k: int(v) for k, v in (part.split("=") for part in text.split())}

    base = await counters()
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(one, i)

        # Watch until all five have started or one has finished: queued calls would finish
        # one before the next starts, concurrent ones all start first.
        async def all_started_or_one_finished() -> dict[str, int] | None:
            now = await counters()
            if now["started"] == base["started"] + 5 or now["finished"] > base["finished"]:
                return now
            return None

        now = await eventually(all_started_or_one_finished, "five starts or a finish")
        assert now["started"] - base["started"] == 5 and now["finished"] == base["finished"]
    assert results == ["slept 3.0"] * 5


async def test_crash_mid_call_then_reconnect(client: MCPClient) -> None:
    first_pid = (await client.call_tool("pid")).get_text()
    fn = await client.get_callable_function("echo")
    with pytest.raises(MCPCallInterrupted, match="may or may not have run"):
        await client.call_tool("crash")  # the server died running it: not sent again
    second_pid = (await client.call_tool("pid")).get_text()
    assert second_pid != first_pid
    assert client.reconnects == 1
    # A callable taken before the crash uses the new session.
    assert (await fn(text="after crash")).get_text() == "after crash"


async def test_server_killed_between_calls_reconnects(client: MCPClient) -> None:
    import psutil

    pid = int((await client.call_tool("pid")).get_text())
    psutil.Process(pid).kill()
    await eventually(lambda: not client.is_connected, "the client to see the server gone")
    assert (await client.call_tool("echo", {"text": "back"})).get_text() == "back"


async def test_reconnect_attempts_are_bounded(tmp_path: os.PathLike[str]) -> None:
    flag = os.path.join(tmp_path, "broken")
    # A wrapper that runs the server until the flag file exists, then fails to start.
    script = os.path.join(tmp_path, "start.sh")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\n[ -e "{flag}" ] && exit 1\nexec "{PYTHON}" "$@"\n')
    os.chmod(script, 0o755)
    from tests._mcp_helpers import PY_SERVER

    server = StdioServer(script, [str(PY_SERVER), "stdio"])
    async with MCPClient("py", server, max_reconnects=2, connect_timeout=10) as c:
        open(flag, "w").close()
        with pytest.raises(MCPCallInterrupted):
            await c.call_tool("crash")
        started = time.monotonic()
        with pytest.raises(MCPConnectionError, match="2 reconnects failed"):
            await c.call_tool("echo", {"text": "x"})
        assert time.monotonic() - started < 15
        os.remove(flag)
        assert (await c.call_tool("echo", {"text": "x"})).get_text() == "x"


async def test_close_from_another_task() -> None:
    before = children()
    c = MCPClient("py", py_stdio())
    await c.connect()
    pid = int((await c.call_tool("pid")).get_text())
    assert pid in children()

    async def closer() -> None:
        await c.close()

    async with anyio.create_task_group() as tg:  # a different task than connect()
        tg.start_soon(closer)
    assert not c.is_connected
    assert wait_no_new_children(before, timeout=5) == set()
    with pytest.raises(MCPConnectionError):
        await c.call_tool("echo", {"text": "x"})


async def test_connect_from_one_task_close_from_another() -> None:
    c = MCPClient("py", py_stdio())
    async with anyio.create_task_group() as tg:
        tg.start_soon(c.connect)
    assert c.is_connected
    assert (await c.call_tool("echo", {"text": "x"})).get_text() == "x"
    await c.close()


async def test_close_during_a_call_returns_error_and_does_not_hang() -> None:
    c = MCPClient("py", py_stdio())
    await c.connect()
    results = []

    async def call() -> None:
        results.append(await c.call_tool("slow", {"seconds": 30}))

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        # Close once the server is running the call, so that the close cuts it mid-way.
        await eventually(lambda: stats_with(c, "started=1"), "the call to reach the server")
        await c.close()
    assert time.monotonic() - started < 10
    assert results[0].is_error


async def test_connect_timeout_leaves_no_child() -> None:
    c = MCPClient(
        "silent", StdioServer(PYTHON, ["-c", "import time; time.sleep(60)"]), connect_timeout=0.5
    )
    with pytest.raises(MCPConnectionError, match="did not start"):
        await c.connect()
    await c.close()


async def test_bad_command_raises_connection_error() -> None:
    c = MCPClient("missing", StdioServer("/nonexistent/server"))
    with pytest.raises(MCPConnectionError):
        await c.connect()


async def test_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTKIT_SECRET_TEST_KEY", "s3cret")
    async with MCPClient("py", py_stdio(env={"EXTRA": "1"})) as c:
        result = await c.call_tool("env_keys")
    assert result.metadata is not None
    keys = result.metadata["structured_content"]["result"]
    assert "EXTRA" in keys and "PATH" in keys
    assert "AGENTKIT_SECRET_TEST_KEY" not in keys


async def test_stderr_goes_to_the_logger(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentkit.mcp.py")
    async with MCPClient("py", py_stdio()) as c:
        await c.call_tool("fail", {"message": "to-stderr"})
        await eventually(
            lambda: any("to-stderr" in r.getMessage() for r in caplog.records), "the stderr line"
        )
    assert any(
        r.name == "agentkit.mcp.py"
        and "stderr:" in r.getMessage()
        and "to-stderr" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_logging_notifications(protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentkit.mcp.py")
    server = py_stdio(stderr="devnull")
    async with MCPClient("py", server, protocol=protocol, log_level="info") as c:  # type: ignore[arg-type]
        assert (await c.call_tool("log", {"message": "hello-log"})).get_text() == "logged"
        await eventually(
            lambda: any("hello-log" in r.getMessage() for r in caplog.records), "the log record"
        )
    records = [r for r in caplog.records if "hello-log" in r.getMessage()]
    assert (
        records and records[0].levelno == logging.WARNING and records[0].name == "agentkit.mcp.py"
    )


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_sampling_served_by_chat_model(protocol: str) -> None:
    model = ScriptedModel(["forty-two"])
    approvals = []

    async def approve(messages: list[object]) -> bool:
        approvals.append(messages)
        return True

    async with MCPClient(
        "py",
        py_stdio(),
        protocol=protocol,
        sampling_model=model,
        sampling_approval=approve,  # type: ignore[arg-type]
    ) as c:
        result = await c.call_tool("sample", {"prompt": "What is 6 x 7?"})
    assert result.get_text() == "model said: forty-two", result
    assert model.requests[0].messages[-1].get_text() == "What is 6 x 7?"
    assert len(approvals) == 1


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_sampling_refused_by_approval(protocol: str) -> None:
    model = ScriptedModel(["never"])
    async with MCPClient(
        "py",
        py_stdio(),
        protocol=protocol,
        sampling_model=model,
        sampling_approval=lambda m: False,
    ) as c:
        result = await c.call_tool("sample", {"prompt": "hi"})
    assert result.is_error
    assert model.requests == []


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_elicitation_callback(protocol: str) -> None:
    asked = []

    async def answer(message: str, schema: dict[str, object]) -> dict[str, object]:
        asked.append((message, schema))
        return {"name": "Ada", "age": 36}

    async with MCPClient("py", py_stdio(), protocol=protocol, elicitation_callback=answer) as c:  # type: ignore[arg-type]
        result = await c.call_tool("greet", {})
    assert result.get_text() == "hello Ada (36)"
    assert asked[0][0] == "Who are you?"
    assert set(asked[0][1]["properties"]) == {"name", "age"}  # type: ignore[call-overload]


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_elicitation_declined(protocol: str) -> None:
    async with MCPClient(
        "py",
        py_stdio(),
        protocol=protocol,
        elicitation_callback=lambda m, s: None,
    ) as c:
        result = await c.call_tool("greet", {})
    assert result.is_error


async def test_resources_and_prompts(client: MCPClient) -> None:
    resources = await client.list_resources()
    assert [str(r.uri) for r in resources] == ["test://static/readme"]
    templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates] == ["test://items/{item}"]
    assert (await client.read_resource("test://static/readme"))[0] == {
        "type": "text",
        "text": "[resource test://static/readme]\nread me",
    }
    blocks = await client.read_resource("test://items/42")
    assert "item 42" in blocks[0]["text"]  # type: ignore[typeddict-item]
    with pytest.raises(MCPError, match="refused resources/read"):
        await client.read_resource("test://nowhere")
    prompts = await client.list_prompts()
    assert [p.name for p in prompts] == ["review"]
    msgs = await client.get_prompt("review", {"code": "x = 1"})
    assert msgs[0].role == "user" and msgs[0].get_text() == "Please review: x = 1"


async def test_get_callable_function(client: MCPClient) -> None:
    fn = await client.get_callable_function("add")
    assert fn.json_schema["function"]["name"] == "add"
    assert set(fn.parameters["properties"]) == {"a", "b"}
    assert (await fn(a=40, b=2)).get_text() == "42"
    with pytest.raises(MCPError):
        await client.get_callable_function("missing")


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_tools_list_changed_invalidates_cache(protocol: str) -> None:
    async with MCPClient("py", py_stdio(), protocol=protocol) as c:  # type: ignore[arg-type]
        seen = anyio.Event()

        async def changed(client: MCPClient) -> None:
            seen.set()

        c.events.on_tools_changed(changed)
        assert "doubler" not in [t.name for t in await c.list_tools()]
        await c.call_tool("add_tool", {"name": "doubler"})
        with anyio.fail_after(10):
            await seen.wait()
        assert "doubler" in [t.name for t in await c.list_tools()]
        assert (await c.call_tool("doubler", {"x": 21})).get_text() == "42"


async def test_cancelled_connect_leaves_no_child() -> None:
    before = children()
    spawned: set[int] = set()
    c = MCPClient("py", py_stdio())
    with anyio.CancelScope() as scope:

        async def cut_once_spawned() -> None:
            # Cut the connect only once the server process exists, so that the cut
            # really leaves a child for close() to stop (a fixed delay may cut too early).
            def spawn() -> bool:
                spawned.update(children() - before)
                return bool(spawned)

            await eventually(spawn, "the server process", interval=0.005)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cut_once_spawned)
            await c.connect()
            tg.cancel_scope.cancel()  # connected before the cut: still a valid run
    assert spawned, "the server process never started"
    await c.close()
    assert not c.is_connected
    assert wait_no_new_children(before) == set(), "close() left the server process running"


async def test_close_is_bounded_for_a_server_ignoring_sigterm() -> None:
    stubborn = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.stdin.close()\n"
        "time.sleep(60)\n"
    )
    c = MCPClient("stubborn", StdioServer(PYTHON, ["-c", stubborn]), connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(MCPConnectionError):
        await c.connect()
    assert time.monotonic() - started < 15


async def test_grandchildren_are_stopped_too() -> None:
    from tests._mcp_helpers import PY_SERVER

    # `sh` runs the server as its child (the trailing command prevents an exec).
    wrapped = StdioServer("sh", ["-c", f'"{PYTHON}" "{PY_SERVER}" stdio; true'])
    async with MCPClient("wrapped", wrapped) as c:
        assert (await c.call_tool("echo", {"text": "x"})).get_text() == "x"
        assert len(children()) >= 2


@pytest.mark.parametrize("protocol", list(ERAS))
async def test_roots(protocol: str, tmp_path: os.PathLike[str]) -> None:
    async with MCPClient(
        "py",
        py_stdio(),
        protocol=protocol,
        roots=[tmp_path, "file:///srv/data"],
    ) as c:
        result = await c.call_tool("roots", {})
    assert result.metadata is not None
    assert result.metadata["structured_content"]["result"] == [
        f"file://{os.fspath(tmp_path)}",
        "file:///srv/data",
    ]

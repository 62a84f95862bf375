"""Running tools: threads, concurrency, cancellation, streaming, return values, limits."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import enum
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing

import anyio
import pytest
from pydantic import BaseModel

from agentkit.messages import ImageBlock, TextBlock
from agentkit.testing import tool_use
from agentkit.tools import (
    INTERRUPTED_TEXT,
    ToolContext,
    Toolkit,
    ToolResponse,
    interrupted_response,
)
from tests._waiting import eventually


async def collect(tk: Toolkit, name: str, **args: object) -> list[ToolResponse]:
    return [c async for c in tk.call_tool_function(tool_use(name, **args))]


async def final_of(tk: Toolkit, name: str, **args: object) -> ToolResponse:
    chunks = await collect(tk, name, **args)
    assert [c.is_last for c in chunks].count(True) == 1
    assert chunks[-1].is_last
    return chunks[-1]


# ----------------------------------------------------------------- threads and concurrency


async def test_sync_tools_run_in_threads_concurrently_and_the_loop_stays_responsive() -> None:
    tk = Toolkit()
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    # All eight calls must be blocked in their threads at once (a barrier of 8 only opens
    # then), and while they are, the event loop must keep running (it sets `loop_ran` after
    # the barrier opened). Serial calls or a blocked loop break the barrier or time out.
    together = threading.Barrier(8, timeout=20)
    loop_ran = threading.Event()
    lock = threading.Lock()
    passed: list[int] = []

    @tk.tool
    def nap() -> str:
        """Block until every call is running, then until the event loop has run."""
        threads.add(threading.get_ident())
        together.wait()
        with lock:
            passed.append(1)
        return "rested" if loop_ran.wait(20) else "the loop was blocked"

    results: list[ToolResponse] = []

    async def ticker() -> None:
        # The loop runs this poll while all eight threads are blocked in the tool.
        await eventually(
            lambda: len(passed) == 8 or together.broken, "all eight calls past the barrier"
        )
        loop_ran.set()

    async def one() -> None:
        results.append(await final_of(tk, "nap"))

    async with anyio.create_task_group() as outer:
        outer.start_soon(ticker)
        async with anyio.create_task_group() as calls:
            for _ in range(8):
                calls.start_soon(one)

    assert [r.get_text() for r in results] == ["rested"] * 8
    assert len(threads) == 8 and loop_thread not in threads


async def test_async_tool_runs_on_the_loop() -> None:
    tk = Toolkit()
    seen: list[int] = []

    @tk.tool
    async def where() -> str:
        """Report the thread."""
        seen.append(threading.get_ident())
        return "ok"

    assert (await final_of(tk, "where")).get_text() == "ok"
    assert seen == [threading.get_ident()]


# ----------------------------------------------------------------- cancellation


async def test_cancelled_sync_tool_is_abandoned_and_its_late_result_discarded() -> None:
    tk = Toolkit()
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tk.tool
    def slow() -> str:
        """Block until released, then return."""
        entered.set()
        release.wait(10)
        finished.set()
        return "late result"

    chunks: list[ToolResponse] = []

    async def consume() -> None:
        async for chunk in tk.call_tool_function(tool_use("slow")):
            chunks.append(chunk)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.to_thread.run_sync(entered.wait, 10)  # the tool is running
            scope.cancel()

    assert scope.cancelled_caught  # the cancellation propagated out of the call
    assert chunks == []
    # The call returned while the tool's thread was still blocked: it did not wait for it.
    assert not finished.is_set()
    release.set()
    # The thread runs to its end; its result goes nowhere and nothing is reported.
    await anyio.to_thread.run_sync(finished.wait, 5)
    assert finished.is_set()
    await anyio.sleep(0)  # let the abandoned call's last callbacks run
    assert chunks == []
    assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left running


async def test_cancelled_context_tool_leaves_no_task_behind() -> None:
    tk = Toolkit()
    state: list[str] = []

    @tk.tool
    async def job(ctx: ToolContext) -> str:
        """Report, then wait."""
        await ctx.report_progress("working")
        try:
            await anyio.sleep(30)
        finally:
            state.append("stopped")
        return "never"

    got: list[str] = []
    with anyio.move_on_after(0.1) as scope:
        async with aclosing(tk.call_tool_function(tool_use("job"))) as calls:
            async for chunk in calls:
                got.append(chunk.get_text())
    assert scope.cancelled_caught
    assert (got, state) == (["working"], ["stopped"])
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelled_async_tool_is_cancelled_and_cleans_up() -> None:
    tk = Toolkit()
    events: list[str] = []
    running = anyio.Event()

    @tk.tool
    async def wait() -> str:
        """Wait for long."""
        running.set()
        try:
            await anyio.sleep(30)
        finally:
            events.append("cleanup")
        return "late"

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            async for _ in tk.call_tool_function(tool_use("wait")):
                events.append("chunk")

        tg.start_soon(run)
        with anyio.fail_after(10):
            await running.wait()
        tg.cancel_scope.cancel()
    assert events == ["cleanup"]


async def test_cancelled_sync_generator_is_abandoned() -> None:
    tk = Toolkit()
    blocked, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tk.tool
    def ticks() -> Iterator[str]:
        """Yield, then block."""
        yield "first"
        blocked.set()
        release.wait(10)
        finished.set()
        yield "second"

    got: list[str] = []

    async def consume() -> None:
        async for chunk in tk.call_tool_function(tool_use("ticks")):
            got.append(chunk.get_text())

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.to_thread.run_sync(blocked.wait, 10)  # the generator is blocked
            scope.cancel()
    assert scope.cancelled_caught
    assert got == ["first"]
    release.set()
    # The abandoned thread finishes quietly: its second item goes nowhere.
    await anyio.to_thread.run_sync(finished.wait, 5)
    assert finished.is_set()
    await anyio.sleep(0)  # let the abandoned call's last callbacks run
    assert got == ["first"]


def test_interrupted_response_shape() -> None:
    partial = [TextBlock(type="text", text="half")]
    resp = interrupted_response("search", partial)
    assert resp.is_last and resp.is_error and resp.is_interrupted
    assert resp.metadata == {"error": "interrupted", "tool": "search"}
    assert resp.content == [partial[0], TextBlock(type="text", text=INTERRUPTED_TEXT)]
    bare = interrupted_response("x")
    assert bare.get_text() == INTERRUPTED_TEXT


# ----------------------------------------------------------------- streaming


async def test_async_generator_streams_progress_then_concatenated_final() -> None:
    tk = Toolkit()

    @tk.tool
    async def count(n: int) -> AsyncIterator[str]:
        """Count."""
        for i in range(n):
            yield f"{i},"

    chunks = await collect(tk, "count", n=3)
    assert [(c.get_text(), c.is_last) for c in chunks] == [
        ("0,", False),
        ("1,", False),
        ("2,", False),
        ("0,1,2,", True),
    ]
    assert len(chunks[-1].content) == 1  # adjacent text merged into one block


async def test_sync_generator_runs_in_threads() -> None:
    tk = Toolkit()
    seen: set[int] = set()

    @tk.tool
    def lines() -> Iterator[str]:
        """Produce lines."""
        for word in ("a\n", "b\n"):
            seen.add(threading.get_ident())
            yield word

    chunks = await collect(tk, "lines")
    assert [c.get_text() for c in chunks] == ["a\n", "b\n", "a\nb\n"]
    assert threading.get_ident() not in seen


async def test_generator_may_yield_its_own_final_response() -> None:
    tk = Toolkit()
    after: list[str] = []

    @tk.tool
    async def job() -> AsyncIterator[ToolResponse]:
        """Report progress, then a summary."""
        yield ToolResponse.text("working", is_last=False, metadata={"pct": 50})
        try:
            yield ToolResponse.text("summary", metadata={"rows": 3})
            after.append("resumed")
        finally:
            after.append("closed")

    chunks = await collect(tk, "job")
    assert [(c.get_text(), c.is_last) for c in chunks] == [("working", False), ("summary", True)]
    assert chunks[0].metadata == {"pct": 50}
    assert chunks[1].metadata == {"rows": 3}
    assert after == ["resumed", "closed"]  # run to its end: nothing after a final is lost


async def test_empty_generator_says_done() -> None:
    tk = Toolkit()

    @tk.tool
    async def nothing() -> AsyncIterator[str]:
        """Yield nothing."""
        return
        yield ""  # pragma: no cover

    assert (await final_of(tk, "nothing")).get_text() == "Done."


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_consumer_closing_early_runs_the_generators_cleanup(kind: str) -> None:
    tk = Toolkit()
    cleaned = threading.Event()

    async def agen() -> AsyncIterator[str]:
        """Stream forever."""
        try:
            while True:
                yield "x"
                await anyio.sleep(0)
        finally:
            cleaned.set()

    def sgen() -> Iterator[str]:
        """Stream forever."""
        try:
            while True:
                yield "x"
        finally:
            cleaned.set()

    tk.register_tool_function(agen if kind == "async" else sgen, name="stream")
    async with aclosing(tk.call_tool_function(tool_use("stream"))) as calls:
        async for chunk in calls:
            assert chunk.get_text() == "x"
            break
    assert cleaned.is_set()


async def test_context_progress_streams_live_while_the_tool_runs() -> None:
    tk = Toolkit()
    go_on = anyio.Event()
    seen_ctx: list[ToolContext] = []

    @tk.tool
    async def job(steps: int, ctx: ToolContext) -> str:
        """Work in steps."""
        seen_ctx.append(ctx)
        await ctx.report_progress("half way", progress=1, total=steps)
        await go_on.wait()  # only the consumer, having seen the progress, releases us
        return "finished"

    assert "ctx" not in tk.get_tool("job").parameters["properties"]  # type: ignore[union-attr]
    chunks: list[ToolResponse] = []
    block = tool_use("job", "call_7", steps=2)
    with anyio.fail_after(5):
        async with aclosing(tk.call_tool_function(block, context={"agent": "a1"})) as calls:
            async for chunk in calls:
                chunks.append(chunk)
                if not chunk.is_last:
                    go_on.set()
    assert [(c.get_text(), c.is_last) for c in chunks] == [
        ("half way", False),
        ("finished", True),
    ]
    assert chunks[0].metadata == {"progress": 1, "total": 2}
    ctx = seen_ctx[0]
    assert (ctx.call_id, ctx.tool_name, ctx.toolkit, ctx.data) == (
        "call_7",
        "job",
        tk,
        {"agent": "a1"},
    )


async def test_context_tool_closed_early_is_cancelled() -> None:
    tk = Toolkit()
    state: list[str] = []

    @tk.tool
    async def job(ctx: ToolContext) -> str:
        """Work."""
        try:
            await ctx.report_progress("started")
            await anyio.sleep(30)
        finally:
            state.append("cancelled")
        return "never"

    with anyio.fail_after(5):
        async with aclosing(tk.call_tool_function(tool_use("job"))) as calls:
            async for chunk in calls:
                assert chunk.get_text() == "started"
                break
    assert state == ["cancelled"]


async def test_context_tool_timeout_and_error() -> None:
    tk = Toolkit()

    @tk.tool(timeout=0.1)
    async def hang(ctx: ToolContext) -> str:
        """Hang."""
        await ctx.report_progress("p")
        await anyio.sleep(30)
        return "never"

    @tk.tool
    def fail(ctx: ToolContext) -> str:
        """Fail in a thread."""
        raise RuntimeError("nope")

    chunks = await collect(tk, "hang")
    assert [c.is_last for c in chunks] == [False, True]
    assert chunks[-1].metadata == {"error": "timeout"}
    final = await final_of(tk, "fail")
    assert final.metadata == {"error": "tool_error"}
    assert "RuntimeError: nope" in final.get_text()


# ----------------------------------------------------------------- arguments


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Size:
    w: int
    h: int


class Query(BaseModel):
    text: str
    limit: int = 10


async def test_arguments_are_converted_to_annotated_types() -> None:
    tk = Toolkit()
    got: dict[str, object] = {}

    @tk.tool
    def convert(
        color: Color, size: Size, query: Query, pair: tuple[int, str], tags: set[str]
    ) -> str:
        """Receive rich types."""
        got.update(color=color, size=size, query=query, pair=pair, tags=tags)
        return "ok"

    final = await final_of(
        tk,
        "convert",
        color="blue",
        size={"w": 1, "h": 2},
        query={"text": "q"},
        pair=[1, "a"],
        tags=["x", "y"],
    )
    assert final.get_text() == "ok", final.get_text()
    assert got == {
        "color": Color.BLUE,
        "size": Size(1, 2),
        "query": Query(text="q", limit=10),
        "pair": (1, "a"),
        "tags": {"x", "y"},
    }


async def test_json_native_arguments_are_passed_as_is_with_defaults_and_presets() -> None:
    tk = Toolkit()
    got: list[object] = []

    def fetch(url: str, api_key: str, retries: int = 2, *, verbose: bool = False) -> str:
        """Fetch."""
        got.append((url, api_key, retries, verbose))
        return "ok"

    tool = tk.register_tool_function(fetch, preset_kwargs={"api_key": "secret"})
    assert set(tool.parameters["properties"]) == {"url", "retries", "verbose"}
    await final_of(tk, "fetch", url="u")
    await final_of(tk, "fetch", url="u", retries=5, verbose=True)
    assert got == [("u", "secret", 2, False), ("u", "secret", 5, True)]
    final = await final_of(tk, "fetch", url="u", api_key="stolen")
    assert final.metadata == {"error": "invalid_arguments"}


async def test_positional_only_and_var_keyword() -> None:
    tk = Toolkit()

    def mixed(a: int, /, b: int, **extra: object) -> str:
        """Mix parameter kinds."""
        return f"{a} {b} {sorted(extra.items())}"

    tool = tk.register_tool_function(mixed)
    assert "additionalProperties" not in tool.parameters  # **extra accepts more
    final = await final_of(tk, "mixed", a=1, b=2, z=3)
    assert final.get_text() == "1 2 [('z', 3)]"


async def test_method_and_callable_object_tools() -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def bump(self, by: int = 1) -> int:
            """Bump the counter."""
            self.n += by
            return self.n

        async def __call__(self, text: str) -> str:
            """Echo."""
            return text

    counter = Counter()
    tk = Toolkit()
    tk.register_tool_function(counter.bump)
    tk.register_tool_function(counter, name="echo")
    assert (await final_of(tk, "bump", by=2)).get_text() == "2"
    assert (await final_of(tk, "echo", text="hi")).get_text() == "hi"
    assert tk.get_tool("echo").description == "Echo."  # type: ignore[union-attr]


# ----------------------------------------------------------------- return values

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@dataclasses.dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", [TextBlock(type="text", text="plain")]),
        (None, [TextBlock(type="text", text="Done.")]),
        (42, [TextBlock(type="text", text="42")]),
        (True, [TextBlock(type="text", text="true")]),
        ({"a": [1, "é"]}, [TextBlock(type="text", text='{"a": [1, "é"]}')]),
        ([1, 2], [TextBlock(type="text", text="[1, 2]")]),
        (Point(1, 2), [TextBlock(type="text", text='{"x": 1, "y": 2}')]),
        (Query(text="q"), [TextBlock(type="text", text='{"text":"q","limit":10}')]),
        (
            {"c": Color.RED, "p": Point(0, 1)},
            [TextBlock(type="text", text='{"c": "red", "p": {"x": 0, "y": 1}}')],
        ),
        (
            PNG,
            [
                ImageBlock(
                    type="image",
                    source={
                        "type": "base64",
                        "media_type": "image/png",
                        "data": base64.b64encode(PNG).decode(),
                    },
                )
            ],
        ),
        (b"\xff\xd8\xff\xe0rest", "image/jpeg"),
        (b"GIF89a....", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (
            b"\x00\x01binary",
            [
                TextBlock(
                    type="text",
                    text="[the tool returned 8 bytes of binary data that is not an image "
                    "(PNG, JPEG, GIF or WEBP); binary data cannot be shown]",
                )
            ],
        ),
        (
            [
                TextBlock(type="text", text="a"),
                ImageBlock(type="image", source={"type": "url", "url": "u"}),
            ],
            [
                TextBlock(type="text", text="a"),
                ImageBlock(type="image", source={"type": "url", "url": "u"}),
            ],
        ),
        (Color.RED, [TextBlock(type="text", text="Color.RED")]),
    ],
)
async def test_return_values(value: object, expected: object) -> None:
    tk = Toolkit()
    tk.register_tool_function(lambda: value, name="ret", description="Return a value.")
    final = await final_of(tk, "ret")
    assert not final.is_error
    if isinstance(expected, str):
        block = final.content[0]
        assert block["type"] == "image"
        assert block["source"]["media_type"] == expected  # type: ignore[typeddict-item]
    else:
        assert final.content == expected


async def test_tool_response_return_keeps_metadata() -> None:
    tk = Toolkit()

    @tk.tool
    async def rich() -> ToolResponse:
        """Return a response."""
        return ToolResponse.text("body", metadata={"k": 1}, is_last=False)

    final = await final_of(tk, "rich")
    assert (final.get_text(), final.metadata, final.is_last) == ("body", {"k": 1}, True)


async def test_output_is_truncated_with_a_note() -> None:
    tk = Toolkit(max_output_chars=10)
    tk.register_tool_function(lambda: "x" * 50, name="long", description="Long output.")
    tk.register_tool_function(lambda: "y" * 10, name="fits", description="Fits.")
    text = (await final_of(tk, "long")).get_text()
    assert text.startswith("x" * 10 + "\n\n[output truncated: showing the first 10 of 50 ")
    assert text.count("x") == 10
    assert (await final_of(tk, "fits")).get_text() == "y" * 10
    unlimited = Toolkit(max_output_chars=None)
    unlimited.register_tool_function(lambda: "z" * 200_000, name="huge", description="Huge.")
    assert len((await final_of(unlimited, "huge")).get_text()) == 200_000


async def test_postprocess_sync_and_async() -> None:
    tk = Toolkit()
    seen: list[str] = []

    def upper(block: object, resp: ToolResponse) -> ToolResponse:
        seen.append(block["id"])  # type: ignore[index]
        return ToolResponse.text(resp.get_text().upper())

    async def keep(block: object, resp: ToolResponse) -> None:
        return None

    tk.register_tool_function(lambda: "hi", name="a", description="A.", postprocess=upper)
    tk.register_tool_function(lambda: "hi", name="b", description="B.", postprocess=keep)
    chunks = [c async for c in tk.call_tool_function(tool_use("a", "id1"))]
    assert chunks[-1].get_text() == "HI" and chunks[-1].is_last
    assert seen == ["id1"]
    assert (await final_of(tk, "b")).get_text() == "hi"


async def test_sync_tool_reports_progress_from_its_thread() -> None:
    tk = Toolkit()
    go_on = threading.Event()

    @tk.tool
    def job(ctx: ToolContext) -> str:
        """Work in a thread."""
        ctx.emit_progress("step 1", progress=1, total=2)
        assert go_on.wait(5), "progress was not delivered live"
        return "finished"

    chunks: list[ToolResponse] = []
    with anyio.fail_after(10):
        async with aclosing(tk.call_tool_function(tool_use("job"))) as calls:
            async for chunk in calls:
                chunks.append(chunk)
                go_on.set()
    assert [(c.get_text(), c.is_last) for c in chunks] == [("step 1", False), ("finished", True)]


async def test_progress_after_the_call_ended_is_dropped() -> None:
    tk = Toolkit()
    saved: list[ToolContext] = []

    @tk.tool
    async def quick(ctx: ToolContext) -> str:
        """Return at once."""
        saved.append(ctx)
        return "ok"

    chunks = [c async for c in tk.call_tool_function(tool_use("quick"))]
    assert [c.get_text() for c in chunks] == ["ok"]
    saved[0].emit_progress("late")  # no error, goes nowhere
    await saved[0].report_progress("later")


async def test_execute_returns_the_final_response_and_forwards_progress() -> None:
    tk = Toolkit()

    @tk.tool
    async def count() -> AsyncIterator[str]:
        """Count."""
        yield "1"
        yield "2"

    seen: list[str] = []

    async def on_progress(chunk: ToolResponse) -> None:
        seen.append(chunk.get_text())

    final = await tk.execute(tool_use("count"), on_progress=on_progress)
    assert (final.get_text(), final.is_last, seen) == ("12", True, ["1", "2"])
    sync_seen: list[str] = []
    await tk.execute(tool_use("count"), on_progress=lambda c: sync_seen.append(c.get_text()))
    assert sync_seen == ["1", "2"]
    error = await tk.execute(tool_use("nope"))
    assert error.is_error and error.metadata == {"error": "unknown_tool"}

"""MCP tool-call overhead against one local stdio server (``benchmarks/mcp_server.py``).

Baseline: the raw ``mcp.ClientSession`` (``initialize()`` handshake, ``call_tool``). Also
shown: the high-level ``mcp.Client`` (which agentkit's client builds on; it negotiates the
2026-07-28 protocol with mcp 2.x servers), agentkit's ``MCPClient.call_tool`` and a call through
``Toolkit.call_tool_function`` (validation + result conversion included).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.common import ROOT, Config, NotAvailable, Row, median, paired, require

SERVER = str(ROOT / "benchmarks" / "mcp_server.py")
Call = Callable[[int], Awaitable[Any]]
Count = Callable[[], Awaitable[int]]


def _text(result: Any) -> str:
    """The text of an mcp ``CallToolResult`` or an agentkit ``ToolResponse``."""
    blocks = getattr(result, "content", None) or []
    return "".join(str(getattr(b, "text", None) or b.get("text", "")) for b in blocks)


async def _per_call(call: Call, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await call(i)
    return (time.perf_counter() - start) / n


async def _open_raw(stack: contextlib.AsyncExitStack, counts: dict[str, Count]) -> dict[str, Call]:
    import mcp

    params = mcp.StdioServerParameters(command=sys.executable, args=[SERVER])
    read, write = await stack.enter_async_context(mcp.stdio_client(params))
    session = await stack.enter_async_context(mcp.ClientSession(read, write))
    # The second server starts (and its handshake waits, about 1 s of importing mcp) while the
    # first one's interpreter is still starting too: set-up, not measured.
    client = await stack.enter_async_context(mcp.Client(params))
    await session.initialize()
    await session.list_tools()  # call_tool validates output against the listed schema

    async def raw_call(i: int) -> Any:
        result = await session.call_tool("echo", {"i": i})
        assert not result.is_error, result
        return result

    counts["session"] = lambda: _count(session.call_tool("list_count", {}))
    counts["client"] = lambda: _count(client.call_tool("list_count", {}))

    async def client_call(i: int) -> Any:
        result = await client.call_tool("echo", {"i": i})
        assert not result.is_error, result
        return result

    return {"session": raw_call, "client": client_call}


async def _count(call: Awaitable[Any]) -> int:
    return int(_text(await call))


def _agentkit_client() -> Any:
    """agentkit's ``MCPClient`` of the benchmark server, not connected yet."""
    mcp_client, stdio_server = require("agentkit.mcp", "MCPClient", "StdioServer")
    return mcp_client("bench", stdio_server(sys.executable, [SERVER]))


async def _open_agentkit(
    stack: contextlib.AsyncExitStack, counts: dict[str, Count], client: Any
) -> dict[str, Call]:
    (register_mcp_client,) = require("agentkit.mcp", "register_mcp_client")
    (tool_use,) = require("agentkit.testing", "tool_use")

    await stack.enter_async_context(client)

    async def direct(i: int) -> Any:
        return await client.call_tool("echo", {"i": i})

    calls: dict[str, Call] = {"agentkit": direct}
    counts["agentkit"] = counts["agentkit_toolkit"] = lambda: _count(
        client.call_tool("list_count", {})
    )
    try:
        toolkit = kit.toolkit_with()
        await register_mcp_client(toolkit, client)
    except NotAvailable:
        return calls

    async def via_toolkit(i: int) -> Any:
        final = None
        async for chunk in toolkit.call_tool_function(tool_use("echo", f"c{i}", i=i)):
            final = chunk
        assert final is not None
        assert not final.is_error, final
        return final

    calls["agentkit_toolkit"] = via_toolkit
    return calls


async def run(cfg: Config) -> list[Row]:
    """Per-call rows for the raw session, mcp.Client and agentkit."""
    scenario = "MCP tools/call over stdio (MCPServer, one trivial tool)"
    note = ""
    counts: dict[str, Count] = {}
    lists: dict[str, float] = {}
    async with contextlib.AsyncExitStack() as stack:
        connecting: asyncio.Task[None] | None = None
        try:
            client = _agentkit_client()
            # Its server starts while the raw clients' do (each interpreter imports mcp for
            # about 1 s): set-up, not measured. ``close`` is idempotent; registered first, it
            # also stops the server if the raw side fails.
            stack.push_async_callback(client.close)
            connecting = asyncio.create_task(client.connect())
        except NotAvailable as exc:
            note = f"n/a (not available: {exc})"
        try:
            calls = await _open_raw(stack, counts)
        finally:
            if connecting is not None:
                await connecting
        try:
            if connecting is not None:
                calls |= await _open_agentkit(stack, counts, client)
        except NotAvailable as exc:
            note = f"n/a (not available: {exc})"
        for call in calls.values():  # warm-up
            for i in range(5):
                await call(i)
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(cfg.rounds):
            for name, call in calls.items():
                samples[name].append(await _per_call(call, cfg.mcp_calls))
        for name, call in calls.items():  # tools/list requests per call, after warm-up
            before = await counts[name]()
            await _per_call(call, cfg.mcp_calls)
            lists[name] = (await counts[name]() - before) / cfg.mcp_calls
    med = {name: median(v) for name, v in samples.items()}
    base = med["session"]
    ak, tk = med.get("agentkit"), med.get("agentkit_toolkit")
    listed = ", ".join(f"{name} {value:.2f}" for name, value in lists.items())
    note = "; ".join(p for p in (note, f"tools/list requests per call: {listed}") if p)
    ak_lists = max((lists.get(n, 0.0) for n in ("agentkit", "agentkit_toolkit")), default=0.0)
    extra = {"samples": samples, "tools_list_per_call": lists}
    return [
        Row(scenario, "agentkit MCPClient.call_tool per call", ak, "s", base,
            "raw mcp.ClientSession.call_tool", paired(samples, "agentkit", "session"),
            "no per-call tools/list", None if ak is None else ak_lists < 0.05, note, extra),
        Row(scenario, "agentkit Toolkit.call_tool_function per call", tk, "s", base,
            "raw mcp.ClientSession.call_tool", paired(samples, "agentkit_toolkit", "session")),
        Row(scenario, "raw mcp.Client.call_tool per call (reference)", med["client"], "s",
            base, "raw mcp.ClientSession.call_tool", paired(samples, "client", "session")),
    ]  # fmt: skip

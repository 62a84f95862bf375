"""MCP tool-call overhead against one local stdio server (``benchmarks/mcp_server.py``).

Baseline: the raw ``mcp.ClientSession`` (``initialize()`` handshake, ``call_tool``). Also
shown: the high-level ``mcp.Client`` (which agentkit's client builds on; it negotiates the
2026-07-28 protocol with mcp 2.x servers), agentkit's ``MCPClient.call_tool`` and a call through
``Toolkit.call_tool_function`` (validation + result conversion included).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import kit
from benchmarks.common import ROOT, Config, NotAvailable, Row, median, ratio, require

SERVER = str(ROOT / "benchmarks" / "mcp_server.py")
Call = Callable[[int], Awaitable[Any]]


async def _per_call(call: Call, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await call(i)
    return (time.perf_counter() - start) / n


async def _open_raw(stack: contextlib.AsyncExitStack) -> dict[str, Call]:
    import mcp

    params = mcp.StdioServerParameters(command=sys.executable, args=[SERVER])
    read, write = await stack.enter_async_context(mcp.stdio_client(params))
    session = await stack.enter_async_context(mcp.ClientSession(read, write))
    await session.initialize()
    await session.list_tools()  # call_tool validates output against the listed schema

    async def raw_call(i: int) -> Any:
        result = await session.call_tool("echo", {"i": i})
        assert not result.is_error, result
        return result

    client = await stack.enter_async_context(mcp.Client(params))

    async def client_call(i: int) -> Any:
        result = await client.call_tool("echo", {"i": i})
        assert not result.is_error, result
        return result

    return {"session": raw_call, "client": client_call}


async def _open_agentkit(stack: contextlib.AsyncExitStack) -> dict[str, Call]:
    mcp_client, stdio_server = require("agentkit.mcp", "MCPClient", "StdioServer")
    (tool_use,) = require("agentkit.testing", "tool_use")

    client = mcp_client("bench", stdio_server(sys.executable, [SERVER]))
    await stack.enter_async_context(client)

    async def direct(i: int) -> Any:
        return await client.call_tool("echo", {"i": i})

    calls: dict[str, Call] = {"agentkit": direct}
    try:
        toolkit = kit.toolkit_with()
        await toolkit.register_mcp_client(client)
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
    async with contextlib.AsyncExitStack() as stack:
        calls = await _open_raw(stack)
        try:
            calls |= await _open_agentkit(stack)
        except NotAvailable as exc:
            note = f"n/a (not available: {exc})"
        for call in calls.values():  # warm-up
            for i in range(5):
                await call(i)
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(cfg.rounds):
            for name, call in calls.items():
                samples[name].append(await _per_call(call, cfg.mcp_calls))
    med = {name: median(v) for name, v in samples.items()}
    base = med["session"]
    ak, tk = med.get("agentkit"), med.get("agentkit_toolkit")
    return [
        Row(scenario, "agentkit MCPClient.call_tool per call", ak, "s", base,
            "raw mcp.ClientSession.call_tool", ratio(ak, base), note=note),
        Row(scenario, "agentkit Toolkit.call_tool_function per call", tk, "s", base,
            "raw mcp.ClientSession.call_tool", ratio(tk, base), note=note),
        Row(scenario, "raw mcp.Client.call_tool per call (reference)", med["client"], "s",
            base, "raw mcp.ClientSession.call_tool", ratio(med["client"], base)),
    ]  # fmt: skip

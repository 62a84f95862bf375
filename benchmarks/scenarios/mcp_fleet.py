"""Ten real stdio MCP servers of 20 tools each: request tokens and first-call latency.

The servers are ``benchmarks/manifest_server.py`` processes (the mcp SDK's low-level
``Server``), each serving one manifest of ``tests/fixtures/mcp_manifests.json`` (tools
modelled on filesystem, git, github, slack, postgres, fetch, time, memory, puppeteer and
sentry: real names, descriptions and schemas), registered with ``prefix=`` their name.

Tokens: a ``ScriptedModel`` agent files a GitHub issue, once with every tool offered
(two requests: call, answer) and once with ``ToolSearch()`` (three: search, call, answer).
Counted are the tool definitions each request carries (the ``tools`` list, in OpenAI's
form, as JSON) and the whole run's input (tools plus messages, summed over its requests).
Tokens are ``tiktoken``'s ``o200k_base`` when it is installed, else an estimate of UTF-8
bytes / 4 (the row's note says which); the reduction is a ratio, so the estimate serves.

Latency (wall clock, from nothing running to the first tool result): eager (all servers
started and their tools listed at registration, connected concurrently) against
``register_mcp_client(..., defer=True)`` (tools from the cached manifests, no process; the
first call starts the one server it needs). The manifest cache (a temporary
``XDG_CACHE_HOME``) is primed from the first eager round's running servers, and the token
runs use that round's toolkit, so a round starts N + 1 processes. ``--quick``: 3 servers,
one round (4 server processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from typing import Any

import anyio

from benchmarks.common import ROOT, Config, Row, median, require

SERVER = str(ROOT / "benchmarks" / "manifest_server.py")
MANIFESTS = ROOT / "tests" / "fixtures" / "mcp_manifests.json"
CALL = ("github_create_issue", {"owner": "o", "repo": "r", "title": "Bug"})


def _counter() -> tuple[Any, str]:
    """Tokens of a text, and how they are counted."""
    try:
        import tiktoken  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return (lambda text: len(text.encode()) / 4), "estimate: UTF-8 bytes / 4"
    encoding = tiktoken.get_encoding("o200k_base")
    return (lambda text: len(encoding.encode(text))), "tiktoken o200k_base"


def _servers(cfg: Config) -> list[str]:
    names = list(json.loads(MANIFESTS.read_text())["servers"])
    return names if not cfg.quick else ["github", *[n for n in names if n != "github"][:2]]


def _clients(names: list[str]) -> list[Any]:
    mcp_client, stdio_server = require("agentkit.mcp", "MCPClient", "StdioServer")
    return [mcp_client(n, stdio_server(sys.executable, [SERVER, n])) for n in names]


async def _register(toolkit: Any, clients: list[Any], *, defer: bool) -> None:
    (register,) = require("agentkit.mcp", "register_mcp_client")
    if defer:
        for client in clients:
            await register(toolkit, client, prefix=client.name, defer=True)
        return
    async with anyio.create_task_group() as tg:  # eager at its best: all started at once
        for client in clients:
            tg.start_soon(client.connect)
    for client in clients:
        await register(toolkit, client, prefix=client.name)


async def _first_call(toolkit: Any) -> None:
    (tool_use,) = require("agentkit.testing", "tool_use")
    final = None
    async for chunk in toolkit.call_tool_function(tool_use(CALL[0], "c1", **CALL[1])):
        final = chunk
    assert final is not None
    assert not final.is_error, final


def _children() -> int:
    import psutil

    return sum(1 for p in psutil.Process().children(recursive=True) if p.is_running())


async def _round(names: list[str], *, defer: bool, then: Any = None) -> dict[str, float]:
    """One timed start: registration and first call; ``then(toolkit, clients)`` after it."""
    (toolkit_cls,) = require("agentkit", "Toolkit")
    clients = _clients(names)
    before = _children()  # the runner's own (the mock LLM server)
    try:
        start = time.perf_counter()
        toolkit = toolkit_cls()
        await _register(toolkit, clients, defer=defer)
        registered = time.perf_counter()
        await _first_call(toolkit)
        done = time.perf_counter()
        figures = {
            "setup": registered - start,
            "first_call": done - registered,
            "total": done - start,
            "processes": float(_children() - before),
        }
        if then is not None:
            await then(toolkit, clients)
        return figures
    finally:
        for client in clients:
            await client.close()


async def _tokens(toolkit: Any, count: Any) -> dict[str, float]:
    react, tool_search = require("agentkit", "ReActAgent", "ToolSearch")
    scripted, tool_use = require("agentkit.testing", "ScriptedModel", "tool_use")
    eager = scripted([tool_use(CALL[0], "c1", **CALL[1]), "Filed."])
    await react("a", "sys", eager, toolkit, print_hint=False).run("File a bug")
    search = scripted(
        [
            tool_use("search_tools", "s1", query="create a github issue"),
            tool_use(CALL[0], "c1", **CALL[1]),
            "Filed.",
        ]
    )
    agent = react("a", "sys", search, toolkit, capabilities=[tool_search()], print_hint=False)
    await agent.run("File a bug")

    def tools(request: Any) -> float:
        # The tools as the OpenAI wire carries them (what a request pays for).
        return float(count(json.dumps([t.to_openai() for t in request.tools or ()])))

    def whole(request: Any) -> float:
        messages = json.dumps([m.to_dict() for m in request.messages], default=str)
        return tools(request) + float(count(messages))

    assert search.requests[0].tool_names == ["search_tools"]
    return {
        "tools_all": max(tools(r) for r in eager.requests),
        "tools_search": max(tools(r) for r in search.requests),
        "run_all": sum(whole(r) for r in eager.requests),
        "run_search": sum(whole(r) for r in search.requests),
        "offered_all": float(len(eager.requests[0].tools or [])),
    }


async def run(cfg: Config) -> list[Row]:
    """Token and latency rows, deferred against eager."""
    (register,) = require("agentkit.mcp", "register_mcp_client")
    (toolkit_cls,) = require("agentkit", "Toolkit")
    names = _servers(cfg)
    count, how = _counter()
    scenario = f"MCP fleet: {len(names)} stdio servers x 20 tools"
    tokens: dict[str, float] = {}

    async def measure_and_prime(toolkit: Any, clients: list[Any]) -> None:
        tokens.update(await _tokens(toolkit, count))
        for client in clients:  # the manifest cache, from the running servers' listings
            await register(toolkit_cls(), client, prefix=client.name, defer=True)

    rounds = 1 if cfg.quick else min(cfg.rounds, 3)
    samples: dict[str, list[dict[str, float]]] = {"eager": [], "cold": []}
    with tempfile.TemporaryDirectory() as cache, _env("XDG_CACHE_HOME", cache):
        for i in range(rounds):
            then = measure_and_prime if i == 0 else None
            samples["eager"].append(await _round(names, defer=False, then=then))
            samples["cold"].append(await _round(names, defer=True))
    med = {
        kind: {key: median([s[key] for s in runs]) for key in runs[0]}
        for kind, runs in samples.items()
    }
    eager, cold = med["eager"], med["cold"]
    drop = 1 - tokens["tools_search"] / tokens["tools_all"]
    notes = f"tokens: {how}; {int(tokens['offered_all'])} tools offered without search"
    split = (
        f"eager: setup {eager['setup']:.3f} s + first call {eager['first_call']:.3f} s, "
        f"{int(eager['processes'])} servers running; defer=True: setup {cold['setup']:.3f} s "
        f"+ first call {cold['first_call']:.3f} s, {int(cold['processes'])} running"
    )
    extra = {"tokens": tokens, "latency": samples, "counter": how, "servers": names}
    return [
        Row(scenario, "tool-definition tokens per request, ToolSearch()",
            tokens["tools_search"], "tokens", tokens["tools_all"], "every tool offered",
            tokens["tools_search"] / tokens["tools_all"], ">= 80% fewer", drop >= 0.8, notes,
            extra),
        Row(scenario, "input tokens of the run (search, call, answer), ToolSearch()",
            tokens["run_search"], "tokens", tokens["run_all"],
            "every tool offered (call, answer)", tokens["run_search"] / tokens["run_all"]),
        Row(scenario, "time to the first tool result, defer=True (cold)", cold["total"], "s",
            eager["total"], "eager (all servers started at registration)",
            cold["total"] / eager["total"], "", None, split),
        Row(scenario, "first call's own latency, defer=True (starts its server)",
            cold["first_call"], "s", eager["first_call"], "eager (server already up)",
            cold["first_call"] / eager["first_call"]),
    ]  # fmt: skip


@contextlib.contextmanager
def _env(name: str, value: str) -> Any:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old

"""Cold start: what ``import agentkit`` and a first OpenAI-compatible run load (issue #20).

Checked by inspecting ``sys.modules`` in fresh interpreters, never by timing; the times are in
``benchmarks/scenarios/startup.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _model_calls import ask
from _wire_server import Reply, Stream, WireServer, openai_chunks, openai_completion, openai_error

from agentkit.exceptions import BadRequestError
from agentkit.messages import Msg
from agentkit.models import OpenAIChatModel, RetryPolicy
from agentkit.models._lean import LeanHTTP

ROOT = Path(__file__).resolve().parents[1]

# What ``import agentkit`` must leave for first use: provider SDKs, the HTTP stack, pydantic,
# the MCP SDK, OpenTelemetry, schema validation.
HEAVY = (
    "openai",
    "anthropic",
    "httpx2",
    "httpcore2",
    "httpx",
    "pydantic",
    "pydantic_core",
    "mcp",
    "opentelemetry",
    "jsonschema",
    "docstring_parser",
)

_LOADED = f"sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))"


async def _python(code: str, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS", "OPENAI_ADMIN_KEY"):
        env.pop(name, None)
    result = await anyio.run_process([sys.executable, "-c", code, *args], env=env, check=False)
    assert result.returncode == 0, result.stderr.decode()
    loaded: list[str] = json.loads(result.stdout.decode().strip().splitlines()[-1])
    return loaded


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with WireServer() as srv:
        yield srv


async def test_import_agentkit_loads_no_heavy_module() -> None:
    code = f"import sys, json\nimport agentkit\nprint(json.dumps({_LOADED}))"
    assert await _python(code) == []


async def test_public_names_still_resolve_lazily() -> None:
    # Touching a lazy name loads its module then, and only then.
    code = (
        "import sys, json\nimport agentkit\nbefore = 'agentkit.mcp' in sys.modules\n"
        "from agentkit import StdioServer, from_string\n"
        "print(json.dumps([before, 'agentkit.mcp' in sys.modules, callable(from_string)]))"
    )
    assert await _python(code) == [False, True, True]


async def test_first_openai_run_imports_no_provider_sdk(server: WireServer) -> None:
    # Build an agent and run it to its answer: the lean path needs httpx2, not the SDKs.
    server.script(Reply(json=openai_completion(text="hello there")))
    code = (
        "import sys, json, asyncio\n"
        "from agentkit import ReActAgent, Toolkit\n"
        "from agentkit.models import OpenAIChatModel\n"
        "model = OpenAIChatModel('m', api_key='k', base_url=sys.argv[1], stream=False)\n"
        f"built = {_LOADED}\n"
        "agent = ReActAgent(name='a', sys_prompt='s', model=model, toolkit=Toolkit())\n"
        "reply = asyncio.run(agent('hi'))\n"
        "assert reply.get_text() == 'hello there', reply.get_text()\n"
        f"print(json.dumps([built, {_LOADED}]))"
    )
    built, ran = await _python(code, server.openai_url)
    assert "openai" not in built and "anthropic" not in built
    assert "openai" not in ran and "anthropic" not in ran and "httpx2" in ran
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == "Bearer k"


async def test_first_run_with_a_json_typed_tool_loads_no_pydantic_nor_price_table(
    server: WireServer,
) -> None:
    # A tool whose parameters are JSON's own types gets its schema without pydantic, and an
    # answer from a local server (no provider's own endpoint) is priced without the table.
    server.script(Reply(json=openai_completion(text="done")))
    code = (
        "import sys, json, asyncio\n"
        "from agentkit import ReActAgent, Toolkit\n"
        "from agentkit.models import OpenAIChatModel\n"
        "def look(query: str, limit: int = 5, tags: list[str] | None = None) -> str:\n"
        "    return query\n"
        "toolkit = Toolkit()\n"
        "toolkit.register_tool_function(look)\n"
        "model = OpenAIChatModel('gpt-4o', api_key='k', base_url=sys.argv[1], stream=False)\n"
        "agent = ReActAgent(name='a', sys_prompt='s', model=model, toolkit=toolkit)\n"
        "reply = asyncio.run(agent('hi'))\n"
        "assert reply.get_text() == 'done', reply.get_text()\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "print(json.dumps(sorted(loaded & {'pydantic', 'pydantic_core', 'genai_prices'})))"
    )
    assert await _python(code, server.openai_url) == []
    body = json.loads(server.requests[0].body)
    assert body["tools"][0]["function"]["parameters"]["required"] == ["query"]


async def test_first_tool_call_with_valid_arguments_loads_no_jsonschema(server: WireServer) -> None:
    # Arguments the fast path proves valid need no validator: the first tool call of a
    # process does not import jsonschema on the event loop.
    server.script(
        Reply(json=openai_completion(tool_calls=[("c1", "look", '{"query": "q", "limit": 2}')])),
        Reply(json=openai_completion(text="done")),
    )
    code = (
        "import sys, json, asyncio\n"
        "from agentkit import ReActAgent, Toolkit\n"
        "from agentkit.models import OpenAIChatModel\n"
        "seen = []\n"
        "def look(query: str, limit: int = 5) -> str:\n"
        "    seen.append((query, limit))\n"
        "    return query\n"
        "toolkit = Toolkit()\n"
        "toolkit.register_tool_function(look)\n"
        "model = OpenAIChatModel('m', api_key='k', base_url=sys.argv[1], stream=False)\n"
        "agent = ReActAgent(name='a', sys_prompt='s', model=model, toolkit=toolkit)\n"
        "reply = asyncio.run(agent('hi'))\n"
        "assert reply.get_text() == 'done' and seen == [('q', 2)], (reply.get_text(), seen)\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "print(json.dumps(sorted(loaded & {'jsonschema', 'pydantic'})))"
    )
    assert await _python(code, server.openai_url) == []
    assert len(server.requests) == 2


async def test_a_model_of_a_priced_endpoint_loads_the_price_table_in_the_background() -> None:
    # Built for the provider's own endpoint, the model starts loading the table at once, so
    # that its first answer does not stall the event loop importing it.
    pytest.importorskip("genai_prices")
    code = (
        "import sys, json\n"
        "from agentkit.models import OpenAIChatModel\n"
        "from agentkit.models import _prices\n"
        "OpenAIChatModel('gpt-4o', api_key='k')\n"
        "assert _prices._warm_done.wait(60)\n"
        "print(json.dumps(['genai_prices' in sys.modules]))"
    )
    assert await _python(code) == [True]


async def test_lean_and_sdk_paths_send_the_same_request(server: WireServer) -> None:
    user = [Msg("user", "hi", "user")]
    lean = OpenAIChatModel(
        "m",
        api_key="k",
        base_url=server.openai_url,
        stream=False,
        client_kwargs={"organization": "org-1", "project": "p-1", "default_headers": {"X-A": "1"}},
    )
    # ``default_query`` is a setting only the SDK client reproduces: that model keeps the SDK.
    sdk = OpenAIChatModel(
        "m",
        api_key="k",
        base_url=server.openai_url,
        stream=False,
        client_kwargs={
            "organization": "org-1",
            "project": "p-1",
            "default_headers": {"X-A": "1"},
            "default_query": {},
        },
    )
    server.script(Reply(json=openai_completion(text="a")), Reply(json=openai_completion(text="a")))
    for model in (lean, sdk):
        await ask(model, user)
        await model.aclose()
    first, second = server.requests
    assert first.body == second.body
    assert first.path == second.path
    for name in ("authorization", "content-type", "openai-organization", "openai-project", "x-a"):
        assert first.headers[name] == second.headers[name], name
    assert not any(h.startswith("x-stainless") for h in first.headers)  # no SDK on the lean path
    assert any(h.startswith("x-stainless") for h in second.headers)


async def test_sdk_only_environment_keeps_the_sdk(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OPENAI_CUSTOM_HEADERS is interpreted by the SDK only: such a process keeps the SDK path.
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Env: yes")
    server.script(Reply(json=openai_completion(text="a")))
    model = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False)
    await ask(model, [Msg("user", "hi", "user")])
    await model.aclose()
    assert server.requests[0].headers["x-env"] == "yes"


def test_lean_client_is_per_event_loop() -> None:
    # A script calling asyncio.run() twice: the second loop gets its own connection pool.
    lean = LeanHTTP("http://127.0.0.1:9/v1", {})

    async def get() -> object:
        loop = asyncio.get_running_loop()
        pools = lean.pools(loop)
        assert lean.pools(loop) is pools
        return pools

    first = asyncio.run(get())
    second = asyncio.run(get())
    assert first is not second


async def test_lean_stream_error_answer_is_retried_on_the_same_connection(
    server: WireServer,
) -> None:
    # A streamed request answered 500: the error body is read and the connection reused.
    server.script(
        openai_error(500, "boom"), Stream(openai_chunks(text="ok")), openai_error(400, "bad")
    )
    model = OpenAIChatModel(
        "m", api_key="k", base_url=server.openai_url, retry=RetryPolicy(initial_delay=0.001)
    )
    chunks = [c async for c in await ask(model, [Msg("user", "hi", "user")])]  # type: ignore[union-attr]
    assert chunks[-1].get_text() == "ok"
    with pytest.raises(BadRequestError, match="bad"):
        await ask(model, [Msg("user", "hi", "user")])
    await model.aclose()
    assert len(server.requests) == 3
    assert server.connections == 1


def test_lean_timeouts_are_the_sdk_clients() -> None:
    # Explicit None is "no timeout" for the SDK too; unset is the SDK's 600 s / 5 s connect.
    for kwargs in ({"timeout": None}, {}, {"timeout": 7.0}):
        model = OpenAIChatModel("m", api_key="k", client_kwargs=kwargs)
        lean = model._lean
        assert lean is not None

        assert lean.timeout == httpx2.Timeout(model.client.timeout), kwargs


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
async def test_fork_waits_for_the_warm_up() -> None:
    # A worker forked right after the first model is built must not inherit a half-done
    # import (its lock held by a thread that does not exist in the child).
    code = (
        "import os, sys, json\n"
        "from agentkit.models import OpenAIChatModel\n"
        "before = 'h11' in sys.modules\n"
        "OpenAIChatModel('m', api_key='k', base_url='http://127.0.0.1:9/v1')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    import h11, httpcore2\n"
        "    os._exit(0 if 'anyio._backends._asyncio' in sys.modules else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(json.dumps([before, os.waitstatus_to_exitcode(status)]))"
    )
    assert await _python(code) == [False, 0]


async def test_lean_path_reads_organization_and_project_from_the_environment(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-env")
    server.script(Reply(json=openai_completion(text="a")))
    kwargs: dict[str, Any] = {"organization": None}  # None: the environment's, as the SDK does
    model = OpenAIChatModel(
        "m", api_key="k", base_url=server.openai_url, stream=False, client_kwargs=kwargs
    )
    await ask(model, [Msg("user", "hi", "user")])
    await model.aclose()
    headers = server.requests[0].headers
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-env", "proj-env")
    assert not any(h.startswith("x-stainless") for h in headers)


async def test_transport_sdk_always_goes_through_the_sdk(server: WireServer) -> None:
    server.script(Reply(json=openai_completion(text="a")))
    model = OpenAIChatModel(
        "m", api_key="k", base_url=server.openai_url, stream=False, transport="sdk"
    )
    await ask(model, [Msg("user", "hi", "user")])
    await model.aclose()
    assert any(h.startswith("x-stainless") for h in server.requests[0].headers)
    with pytest.raises(ValueError, match="transport"):
        OpenAIChatModel("m", api_key="k", transport="raw")  # type: ignore[arg-type]


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_an_environment_proxy_is_honoured(
    server: WireServer, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # The lean path hands requests to its own pools (no client to mount proxies from the
    # environment): with a proxy set, the model takes the SDK's client, which honours it.
    # The wire server is the proxy; the API's host does not even resolve.
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv(variable, server.url)
    server.script(Reply(json=openai_completion(text="via proxy")))
    model = OpenAIChatModel(
        "m", api_key="k", base_url="http://api.agentkit-proxy-test.invalid/v1", stream=False
    )
    answer = await ask(model, [Msg("user", "hi", "user")])
    await model.aclose()
    assert answer.content[0]["text"] == "via proxy"  # type: ignore[typeddict-item]
    assert len(server.requests) == 1

"""Served MCP over HTTP: bind policy, bearer token, Host/Origin checks (issue 13 item 4).

Real uvicorn servers on loopback addresses; a real ``python -m toolkits.shell`` process for
the command-line refusal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest

from agentkit.exceptions import MCPConnectionError
from agentkit.mcp import HttpServer, MCPClient, serve
from agentkit.mcp._http_auth import TOKEN_ENV, security_settings
from tests._mcp_helpers import ROOT, free_port
from tests._mcp_serve_demo import build

pytestmark = pytest.mark.anyio
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
PY_TOOLKIT = [sys.executable, "-m", "toolkits.python"]
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def served(host: str, **kwargs: object) -> AsyncIterator[str]:
    port = free_port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(build(), "streamable_http", host=host, port=port, **kwargs))  # type: ignore[arg-type]
        with anyio.fail_after(20):
            while True:
                try:
                    await (await anyio.connect_tcp(host, port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        yield f"http://{host}:{port}/mcp"
        tg.cancel_scope.cancel()


async def test_token_required_on_loopback_when_set(capsys: pytest.CaptureFixture[str]) -> None:
    async with served("127.0.0.1", token="s3cret") as url:
        async with httpx2.AsyncClient() as http:
            bare = await http.post(url, json=INIT, headers=HEADERS)
            wrong = await http.post(
                url, json=INIT, headers={**HEADERS, "Authorization": "Bearer nope"}
            )
        assert bare.status_code == 401 and wrong.status_code == 401
        assert bare.headers["www-authenticate"].startswith("Bearer")
        with pytest.raises(MCPConnectionError):
            await MCPClient("x", HttpServer(url), connect_timeout=10).connect()
        auth = HttpServer(url, headers={"Authorization": "Bearer s3cret"})
        async with MCPClient("demo", auth, timeout=30) as client:
            assert "add" in {t.name for t in await client.list_tools()}
    err = capsys.readouterr().err
    assert url in err and "bearer token required" in err


async def test_loopback_without_token_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    os.environ.pop(TOKEN_ENV, None)
    async with served("127.0.0.1") as url, MCPClient("demo", HttpServer(url)) as client:
        assert await client.list_tools()
    err = capsys.readouterr().err
    assert url in err and "auth: none" in err


async def test_host_header_checked_on_other_loopback_addresses() -> None:
    # Before: the SDK only protected 127.0.0.1/localhost/::1; on 127.0.0.2 any Host passed.
    async with served("127.0.0.2") as url, httpx2.AsyncClient() as http:
        evil = await http.post(url, json=INIT, headers={**HEADERS, "Host": "evil.example"})
        origin = await http.post(
            url, json=INIT, headers={**HEADERS, "Origin": "http://evil.example"}
        )
        fine = await http.post(url, json=INIT, headers=HEADERS)
    assert evil.status_code == 421
    assert origin.status_code == 403
    assert fine.status_code == 200


def test_wildcard_bind_keeps_host_checks_on() -> None:
    settings = security_settings("0.0.0.0", ["proxy.internal"])
    assert settings.enable_dns_rebinding_protection
    assert "proxy.internal:*" in settings.allowed_hosts
    assert not any(h.startswith("evil") for h in settings.allowed_hosts)
    assert "http://proxy.internal:*" in settings.allowed_origins


async def test_non_loopback_bind_without_token_is_refused() -> None:
    os.environ.pop(TOKEN_ENV, None)
    with pytest.raises(ValueError, match="without a token"):
        await serve(build(), "streamable_http", host="0.0.0.0", port=free_port())


def test_cli_refuses_public_bind_without_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [*PY_TOOLKIT, "--transport", "streamable_http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "without a token" in proc.stderr and "--token" in proc.stderr

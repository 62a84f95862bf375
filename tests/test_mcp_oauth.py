"""OAuth for remote MCP servers, end to end against a real OAuth-protected server.

The server (``tests/_oauth_server.py``) is the mcp SDK's authorization server + resource
server on 127.0.0.1. No human: the "browser" is httpx2 fetching the authorization URL and
following the authorization server's redirect to agentkit's loopback listener.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.exceptions import MCPConnectionError
from agentkit.mcp import FileTokenStorage, HttpServer, MCPClient, OAuth
from agentkit.mcp._loopback import LoopbackError, wait_for_redirect
from tests._mcp_helpers import ROOT, free_port

SERVER = ROOT / "tests" / "_oauth_server.py"


class Browser:
    """A browser whose user approves at once: fetch the URL, follow the redirects."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.landed: list[int] = []

    async def __call__(self, url: str) -> None:
        self.opened.append(url)
        async with httpx2.AsyncClient(follow_redirects=True, timeout=30) as http:
            response = await http.get(url)
        self.landed.append(response.status_code)


def _no_browser(url: str) -> None:
    raise AssertionError(f"the browser flow ran again: {url}")


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the OAuth test server did not start")
        time.sleep(0.05)


def _serve(*ttl: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), str(port), *ttl],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        _wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def oauth_server() -> Iterator[str]:
    """The URL of an OAuth-protected MCP server (shared: tests compare stats deltas)."""
    yield from _serve()


@pytest.fixture
def short_lived_server() -> Iterator[str]:
    """One whose access tokens expire after a second."""
    yield from _serve("1")


def stats(url: str, since: dict[str, Any] | None = None) -> dict[str, int]:
    """The server's event counters (minus those of ``since``)."""
    data = httpx2.get(url.removesuffix("/mcp") + "/_stats").json()
    before = since or {}
    counts = {k: v - before.get(k, 0) for k, v in data.items() if isinstance(v, int)}
    return {k: v for k, v in counts.items() if v}


async def whoami(url: str, oauth: OAuth) -> str:
    async with MCPClient("secured", HttpServer(url, oauth=oauth)) as client:
        result = await client.call_tool("whoami", {})
    assert not result.is_error, result.get_text()
    return result.get_text()


async def test_login_registers_authorizes_and_stores_tokens_0600(
    oauth_server: str, tmp_path: Path
) -> None:
    before = stats(oauth_server)
    store = FileTokenStorage.for_server(oauth_server, tmp_path / "tokens")
    browser = Browser()
    text = await whoami(
        oauth_server, OAuth(client_name="pytest", token_store=store, browser=browser)
    )
    assert text.startswith("test-user via ")
    assert len(browser.opened) == 1 and browser.landed == [200]  # our listener answered
    params = dict(p.split("=", 1) for p in browser.opened[0].split("?", 1)[1].split("&"))
    assert params["code_challenge_method"] == "S256" and params["response_type"] == "code"
    assert params["redirect_uri"].startswith("http%3A%2F%2F127.0.0.1%3A")
    seen = stats(oauth_server, before)
    assert (seen["register"], seen["authorize"], seen["token:authorization_code"]) == (1, 1, 1)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    saved = json.loads(store.path.read_text())
    assert saved["server_url"] == oauth_server
    assert saved["tokens"]["refresh_token"] and saved["client_info"]["client_id"]
    assert saved["token_expires_at"] > time.time()


async def test_a_restarted_client_reuses_stored_tokens(oauth_server: str, tmp_path: Path) -> None:
    before = stats(oauth_server)
    store = FileTokenStorage(tmp_path / "t.json")
    await whoami(oauth_server, OAuth(token_store=store, browser=Browser()))
    # A new process: a new client, a new provider, only the file in common.
    again = FileTokenStorage(tmp_path / "t.json")
    await whoami(oauth_server, OAuth(token_store=again, browser=_no_browser))
    seen = stats(oauth_server, before)
    assert (seen["register"], seen["authorize"]) == (1, 1)
    assert "token:refresh_token" not in seen


async def test_an_expired_token_is_refreshed_after_a_restart(
    oauth_server: str, tmp_path: Path
) -> None:
    before = stats(oauth_server)
    path = tmp_path / "t.json"
    await whoami(oauth_server, OAuth(token_store=FileTokenStorage(path), browser=Browser()))
    saved = json.loads(path.read_text())
    saved["token_expires_at"] = time.time() - 1  # as if the process came back an hour later
    path.write_text(json.dumps(saved))
    old_access = saved["tokens"]["access_token"]

    await whoami(oauth_server, OAuth(token_store=FileTokenStorage(path), browser=_no_browser))
    seen = stats(oauth_server, before)
    assert seen["token:refresh_token"] == 1
    assert (seen["authorize"], seen["register"]) == (1, 1)  # no second login
    assert "rejected_access_token" not in seen  # the expired token was never sent
    renewed = json.loads(path.read_text())
    assert renewed["tokens"]["access_token"] != old_access
    assert renewed["token_expires_at"] > time.time()


async def test_a_token_that_expires_mid_session_is_refreshed(
    short_lived_server: str, tmp_path: Path
) -> None:
    oauth = OAuth(token_store=FileTokenStorage(tmp_path / "t.json"), browser=Browser())
    async with MCPClient("secured", HttpServer(short_lived_server, oauth=oauth)) as client:
        assert not (await client.call_tool("whoami", {})).is_error
        await anyio.sleep(1.5)  # past the access token's lifetime (not a timing assertion)
        assert not (await client.call_tool("whoami", {})).is_error
    seen = stats(short_lived_server)
    assert seen["token:refresh_token"] >= 1 and seen["authorize"] == 1


async def test_a_revoked_token_falls_back_to_a_new_login(oauth_server: str, tmp_path: Path) -> None:
    before = stats(oauth_server)
    path = tmp_path / "t.json"
    await whoami(oauth_server, OAuth(token_store=FileTokenStorage(path), browser=Browser()))
    saved = json.loads(path.read_text())
    saved["tokens"]["access_token"] = "forged-or-revoked"
    path.write_text(json.dumps(saved))
    browser = Browser()
    await whoami(oauth_server, OAuth(token_store=FileTokenStorage(path), browser=browser))
    seen = stats(oauth_server, before)
    assert len(browser.opened) == 1 and seen["authorize"] == 2
    assert seen["register"] == 1  # the stored registration (and its redirect port) is reused


async def test_a_denied_login_fails_the_connection_with_the_reason(
    oauth_server: str, tmp_path: Path
) -> None:
    async def deny(url: str) -> None:
        # The user clicks "deny": the authorization server redirects with error=access_denied.
        async with httpx2.AsyncClient() as http:
            response = await http.get(url)
            location = httpx2.URL(response.headers["location"])
            state = location.params["state"]
            denied = location.copy_with(
                query=f"error=access_denied&error_description=no+thanks&state={state}".encode()
            )
            await http.get(denied)

    client = MCPClient(
        "secured",
        HttpServer(
            oauth_server, oauth=OAuth(token_store=FileTokenStorage(tmp_path / "t"), browser=deny)
        ),
    )
    with pytest.raises(MCPConnectionError, match="access_denied: no thanks"):
        await client.connect()
    assert not (tmp_path / "t").exists() or "tokens" not in json.loads((tmp_path / "t").read_text())


def test_auth_and_oauth_are_exclusive() -> None:
    with pytest.raises(ValueError, match="either auth= or oauth="):
        HttpServer("http://127.0.0.1:1/mcp", auth=httpx2.BasicAuth("a", "b"), oauth=OAuth())


# -- the loopback listener -------------------------------------------------------------


async def test_the_listener_ignores_strangers_until_the_real_redirect() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    statuses: list[int] = []

    async def browser() -> None:
        async with httpx2.AsyncClient() as http:
            for path in (
                "/favicon.ico",
                "/callback?code=stolen&state=guessed",  # a local process guessing
                "/callback?state=s3cret",  # no code
                "/callback?code=the-code&state=s3cret&iss=http%3A%2F%2Fas",
            ):
                statuses.append((await http.get(base + path)).status_code)

    with anyio.fail_after(30):
        result = await wait_for_redirect("127.0.0.1", port, "/callback", "s3cret", browser)
    assert (result.code, result.state, result.iss) == ("the-code", "s3cret", "http://as")
    assert statuses == [404, 400, 400, 200]


async def test_a_login_nobody_completes_times_out_with_the_fix(
    oauth_server: str, tmp_path: Path
) -> None:
    opened: list[str] = []
    oauth = OAuth(
        token_store=FileTokenStorage(tmp_path / "t"), browser=opened.append, login_timeout=0.5
    )
    client = MCPClient("secured", HttpServer(oauth_server, oauth=oauth))
    with pytest.raises(MCPConnectionError, match=r"no authorization arrived within 0.5s"):
        await client.connect()
    assert len(opened) == 1


async def test_a_busy_redirect_port_is_a_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        async def nothing() -> None:
            return None

        with pytest.raises(LoopbackError, match=f"cannot listen .*:{port}.*redirect_port"):
            await wait_for_redirect("127.0.0.1", port, "/callback", "s", nothing)


# -- the token file --------------------------------------------------------------------


async def test_token_file_survives_garbage_and_fixes_loose_permissions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp.shared.auth import OAuthToken

    path = tmp_path / "t.json"
    path.write_text("{not json")
    store = FileTokenStorage(path)
    assert await store.get_tokens() is None  # reported, treated as empty
    assert "not valid JSON" in caplog.text
    await store.set_tokens(OAuthToken(access_token="a", expires_in=60, refresh_token="r"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    tokens = await store.get_tokens()
    assert tokens is not None and tokens.access_token == "a"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left
    assert await store.clear() and not path.exists() and not await store.clear()


def test_default_token_file_is_per_server_under_the_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    a = FileTokenStorage.for_server("https://mcp.example.com/mcp")
    b = FileTokenStorage.for_server("https://mcp.example.com/other")
    assert a.path.parent == tmp_path / "agentkit" / "mcp-oauth"
    assert a.path != b.path and a.path.name.startswith("mcp.example.com-")
    assert isinstance(OAuth().storage_for("https://x/mcp"), FileTokenStorage)


# -- the CLI ---------------------------------------------------------------------------


def _cli(*args: str, config: Path, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentkit", "mcp", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(config)},
        **kwargs,
    )


def test_cli_login_prints_the_url_stores_tokens_then_tools_and_logout_use_them(
    oauth_server: str, tmp_path: Path
) -> None:
    before = stats(oauth_server)
    login = _cli("login", oauth_server, "--client-name", "cli-test", config=tmp_path)
    assert login.stderr is not None
    printed = []
    for line in login.stderr:  # the URL is printed, indented, after a one-line explanation
        printed.append(line)
        if line.startswith("  http://"):
            break
    url = printed[-1].strip()
    assert "open this URL in a browser" in "".join(printed) and "/authorize?" in url
    landed = httpx2.get(url, follow_redirects=True, timeout=30)  # the user clicks "allow"
    assert landed.status_code == 200 and "Authorized" in landed.text
    out, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    assert "logged in to " + oauth_server in out and "(oauth-demo)" in out
    (token_file,) = (tmp_path / "agentkit" / "mcp-oauth").iterdir()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert str(token_file) in out

    tools = _cli("tools", "--http", oauth_server, "--oauth", "--json", config=tmp_path)
    out, err = tools.communicate(timeout=60)
    assert tools.returncode == 0, err
    assert [t["name"] for t in json.loads(out)] == ["whoami"]
    assert "open this URL" not in err  # the stored tokens were used: no second login

    again = _cli("login", oauth_server, config=tmp_path)
    out, _ = again.communicate(timeout=60)
    assert again.returncode == 0 and "already logged in" in out
    seen = stats(oauth_server, before)
    assert (seen["register"], seen["authorize"]) == (1, 1)

    logout = _cli("logout", oauth_server, config=tmp_path)
    out, _ = logout.communicate(timeout=60)
    assert logout.returncode == 0 and "logged out" in out and not token_file.exists()


def test_cli_oauth_needs_an_http_server(tmp_path: Path) -> None:
    proc = _cli("tools", "--stdio", "true", "--oauth", config=tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--oauth needs an --http server" in err

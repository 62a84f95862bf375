"""MCP Apps in the served app: trusted servers only, a sandboxed frame, calls as the model's.

Against a real MCP server with ext-apps UIs (``tests._mcp_app_server``) over stdio; the
browser test runs ext-apps' own App SDK in the frame, in headless Chromium.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.memory import check_memory_invariant
from agentkit.serve import create_app
from agentkit.serve._apps import BURST, AppSessions
from agentkit.session import SQLiteSession
from tests._mcp_apps_web import app_agent
from tests._serve_helpers import running
from tests._serve_process import ROOT, require_node_modules, run_node, stop_server


async def flood(app: Any, path: str, n: int) -> list[httpx2.Response]:
    """``n`` calls at once (50 in flight), straight into the app (no sockets)."""
    answers: list[httpx2.Response] = []
    limiter = anyio.CapacityLimiter(50)
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://a", headers=ALICE) as c:

        async def one() -> None:
            async with limiter:
                answers.append(await c.post(path, json={"name": "count"}))

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
    return answers


TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


async def test_trusted_app_is_sandboxed_and_its_calls_follow_the_models_rules(
    tmp_path: Path,
) -> None:
    db = SQLiteSession(tmp_path / "t.db")
    async with app_agent() as agent:
        app = create_app(agent, sessions=db, auth_token=TOKENS)
        app.state.mcp_apps = AppSessions(clock=lambda: 1000.0)  # no refill: counts exact
        async with running(app) as base, httpx2.AsyncClient(base_url=base, headers=ALICE) as c:
            assert (await c.get("/apps")).json() == {"tools": ["get-time", "hostile"]}
            thread = (await c.post("/threads")).json()["threadId"]
            opened = await c.post(f"/threads/{thread}/apps", json={"toolName": "get-time"})
            assert opened.status_code == 200, opened.text
            session = opened.json()["session"]

            # The frame's document: no bearer token needed, its own sandboxing CSP.
            frame = await c.get(f"/{opened.json()['frame']}", headers={"Authorization": ""})
            assert frame.status_code == 200
            assert "Get Time App" in frame.text
            csp = frame.headers["content-security-policy"]
            assert "sandbox allow-scripts" in csp and "allow-same-origin" not in csp
            assert "connect-src 'none'" in csp and "frame-ancestors 'self'" in csp
            # The page may frame it (frame-src 'self'); nothing may frame the page.
            page_csp = (await c.get("/")).headers["content-security-policy"]
            assert "frame-src 'self'" in page_csp and "frame-ancestors 'none'" in page_csp

            calls = f"/apps/{session}/calls"
            # get-time needs approval (as for the model): nothing runs before the decision.
            asked = (await c.post(calls, json={"name": "get-time", "arguments": {}})).json()
            assert asked["status"] == "approval_required"
            # Another user cannot decide on (or even see) alice's app.
            other = await c.post(
                f"{calls}/{asked['toolCallId']}", json={"approved": True}, headers=BOB
            )
            assert other.status_code == 404
            done = await c.post(f"{calls}/{asked['toolCallId']}", json={"approved": True})
            assert done.json()["status"] == "done", done.text
            assert "time" in done.json()["result"]["structuredContent"]
            denied_ask = (await c.post(calls, json={"name": "get-time"})).json()
            denied = await c.post(f"{calls}/{denied_ask['toolCallId']}", json={"approved": False})
            assert denied.json()["status"] == "denied"
            assert denied.json()["result"]["isError"] is True
            # Only the app's own server's tools, and only real ones.
            missing = await c.post(calls, json={"name": "nope", "arguments": {}})
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_tool"

            # 1,000 rapid calls: a burst runs, the rest fail with a clear 429.
            answers = await flood(app, f"{calls}", 1000)
            ok = [a for a in answers if a.status_code == 200]
            limited = [a for a in answers if a.status_code == 429]
            assert len(ok) == BURST - 3 and len(limited) == 1000 - len(ok)  # 3 calls above
            assert limited[0].json()["error"]["code"] == "app_rate_limited"
            assert "too many tool calls" in limited[0].json()["error"]["message"]
            assert int(limited[0].headers["retry-after"]) >= 1

            # Every call that ran (or was denied) is in the thread, as the model's are.
            messages = (await c.get(f"/threads/{thread}")).json()["messages"]
            called = [t["function"]["name"] for m in messages for t in m.get("toolCalls") or []]
            assert called == ["get-time", "get-time", *["count"] * len(ok)]
            results = [m for m in messages if m["role"] == "tool"]
            assert results[-1]["content"] == str(len(ok))  # the server counted exactly those
        # The stored thread is a valid conversation (each tool_use answered once).
        [key] = [k for k in await db.list_ids() if k.endswith(thread)]
        state = await db.load_state(key)
        assert state is not None
        fresh = agent.copy()
        assert isinstance(state["agent"], dict)
        fresh.load_state_dict(state["agent"])
        check_memory_invariant(await fresh.memory.get_memory(), [])


async def test_untrusted_servers_apps_are_never_rendered(tmp_path: Path) -> None:
    async with app_agent("untrusted") as agent:
        app = create_app(agent, sessions=SQLiteSession(tmp_path / "t.db"), auth_token=TOKENS)
        async with running(app) as base, httpx2.AsyncClient(base_url=base, headers=ALICE) as c:
            assert (await c.get("/apps")).json() == {"tools": []}
            thread = (await c.post("/threads")).json()["threadId"]
            opened = await c.post(f"/threads/{thread}/apps", json={"toolName": "get-time"})
            assert opened.status_code == 404 and opened.json()["error"]["code"] == "no_app"
            assert (await c.get("/apps/frame/guessed")).status_code == 404
            assert (await c.post("/apps/guessed/calls", json={"name": "count"})).status_code == 404


def _start_apps_server(db: Path, token: str) -> tuple[subprocess.Popen[str], int]:
    """``tests._mcp_apps_web`` in its own process; its port once ``/healthz`` answers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests._mcp_apps_web", "0", str(db), token]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("port "), first
    port = int(first.split()[1])
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(300):
        with contextlib.suppress(httpx2.TransportError):
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", headers=headers).status_code == 200:
                return proc, port
        time.sleep(0.1)  # polling a starting process: nothing to wait on but the port
    stop_server(proc)
    raise AssertionError("the server did not start")


@pytest.mark.timeout(240)
def test_ext_apps_example_renders_and_calls_a_tool_in_chromium(tmp_path: Path) -> None:
    require_node_modules("playwright-core", "@sparticuz/chromium", "@modelcontextprotocol/ext-apps")
    token = "apps-browser-token"
    shot = tmp_path / "mcp_app.png"
    server, port = _start_apps_server(tmp_path / "threads.db", token)
    try:
        steps = run_node("mcp_apps_browser.mjs", f"http://127.0.0.1:{port}", token, str(shot))
    finally:
        stop_server(server)
    assert steps == [
        "app rendered",
        "app call approved in the page",
        "app call in the thread",
        "hostile app ran",
        "hostile app contained",
        "done",
    ]
    assert shot.stat().st_size > 1000


def test_app_host_script_builds_no_html() -> None:
    """The page's app host takes frame messages as data: no HTML sink, no eval."""
    from importlib import resources

    js = resources.files("agentkit.serve").joinpath("static", "apps.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js

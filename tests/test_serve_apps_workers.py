"""MCP Apps across workers: an app rendered by one worker calls tools through another.

App sessions live in the thread store, so a frame, its calls, its call budget and its
approvals work through any worker on the store: two real worker processes
(``tests._mcp_apps_web``) on one SQLite file, driven over HTTP as a balancer would.
Expiry, and the sweep of expired sessions, on the store directly (two workers' views of
one SQLite file) with a clock the test moves.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.serve._apps import BURST, SESSION_SECONDS, SWEEP_SECONDS, AppSessions
from agentkit.serve._convert import ClientInputError
from agentkit.session import JSONSession, Session, SQLiteSession
from tests._serve_process import ROOT, stop_server

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


@contextlib.contextmanager
def two_workers(db: Path) -> Iterator[tuple[str, str]]:
    """Two ``tests._mcp_apps_web`` processes on ``db`` (apps' clock frozen); their URLs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tokens = ",".join(f"{t}={u}" for t, u in TOKENS.items())
    cmd = [sys.executable, "-m", "tests._mcp_apps_web", "0", str(db), tokens, "frozen"]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        urls = []
        for proc in procs:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first.startswith("port "), first
            urls.append(f"http://127.0.0.1:{int(first.split()[1])}")
        for url in urls:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx2.TransportError):
                    if httpx2.get(f"{url}/healthz", headers=ALICE).status_code == 200:
                        break
                assert time.monotonic() < deadline, "the worker did not start"
                time.sleep(0.05)  # polling a starting process: nothing to wait on but the port
        yield urls[0], urls[1]
    finally:
        for proc in procs:
            proc.terminate()  # both shut down at once; stop_server then waits for each
        for proc in procs:
            stop_server(proc)


async def test_an_app_rendered_by_one_worker_calls_tools_through_another(
    tmp_path: Path,
) -> None:
    with two_workers(tmp_path / "threads.db") as (a, b):
        async with httpx2.AsyncClient(headers=ALICE, timeout=60) as c:
            thread = (await c.post(f"{a}/threads")).json()["threadId"]
            opened = await c.post(f"{a}/threads/{thread}/apps", json={"toolName": "get-time"})
            assert opened.status_code == 200, opened.text
            session = opened.json()["session"]

            # The frame's document from the other worker (no token: the session admits it).
            frame = await c.get(f"{b}/apps/frame/{session}", headers={"Authorization": ""})
            assert frame.status_code == 200 and "Get Time App" in frame.text
            assert "sandbox allow-scripts" in frame.headers["content-security-policy"]
            assert (await c.get(f"{b}/apps/frame/guessed")).status_code == 404

            # Asked through B, decided through A; bob's token opens nothing of alice's.
            asked = await c.post(f"{b}/apps/{session}/calls", json={"name": "get-time"})
            assert asked.json()["status"] == "approval_required", asked.text
            call = asked.json()["toolCallId"]
            for url in (a, b):
                as_bob = await c.post(
                    f"{url}/apps/{session}/calls/{call}", json={"approved": True}, headers=BOB
                )
                assert as_bob.status_code == 404
                assert as_bob.json()["error"]["code"] == "unknown_app"
                bob_call = await c.post(
                    f"{url}/apps/{session}/calls", json={"name": "count"}, headers=BOB
                )
                assert bob_call.status_code == 404
            done = await c.post(f"{a}/apps/{session}/calls/{call}", json={"approved": True})
            assert done.json()["status"] == "done", done.text
            again = await c.post(f"{b}/apps/{session}/calls/{call}", json={"approved": True})
            assert again.status_code == 404 and again.json()["error"]["code"] == "unknown_call"
            # One decision sent to both workers at once: the call runs once.
            asked = await c.post(f"{a}/apps/{session}/calls", json={"name": "get-time"})
            call = asked.json()["toolCallId"]
            decisions: list[httpx2.Response] = []

            async def decide(url: str) -> None:
                sent = {"approved": True}
                decisions.append(await c.post(f"{url}/apps/{session}/calls/{call}", json=sent))

            async with anyio.create_task_group() as tg:
                tg.start_soon(decide, a)
                tg.start_soon(decide, b)
            assert sorted(d.status_code for d in decisions) == [200, 404], decisions

            # One budget for the app, whichever worker a call reaches: 60 calls at once,
            # alternating between the workers, run exactly what is left of it.
            answers: list[httpx2.Response] = []
            limiter = anyio.CapacityLimiter(40)

            async def one(url: str) -> None:
                async with limiter:
                    answers.append(await c.post(f"{url}/apps/{session}/calls", json=COUNT))

            async with anyio.create_task_group() as tg:
                for i in range(60):
                    tg.start_soon(one, (a, b)[i % 2])
            ok = [r for r in answers if r.status_code == 200]
            limited = [r for r in answers if r.status_code == 429]
            assert len(ok) == BURST - 2  # the approval requests spent two
            assert len(limited) == 60 - len(ok)
            assert {r.json()["error"]["code"] for r in limited} == {"app_rate_limited"}

            # Every call that ran is in the thread once, whichever worker ran it.
            messages = (await c.get(f"{b}/threads/{thread}")).json()["messages"]
            called = [t for m in messages for t in m.get("toolCalls") or []]
            names = [t["function"]["name"] for t in called]
            assert names == ["get-time", "get-time", *["count"] * len(ok)]
            results = {m["toolCallId"] for m in messages if m["role"] == "tool"}
            assert results == {t["id"] for t in called}


COUNT: dict[str, Any] = {"name": "count", "arguments": {}}


@pytest.mark.parametrize("kind", ["sqlite", "json"])
async def test_an_expired_app_session_is_unknown_on_every_worker_and_swept(
    tmp_path: Path, kind: str
) -> None:
    # Two workers' views of one store (each its own store object), on a clock the test moves.
    now = [1000.0]
    first, second = AppSessions(clock=lambda: now[0]), AppSessions(clock=lambda: now[0])

    def store() -> Session:
        return SQLiteSession(tmp_path / "t.db") if kind == "sqlite" else JSONSession(tmp_path)

    db, other_db = store(), store()
    sid = await first.open(db, "alice", "t1", "examples", "<p>app</p>")
    again = await first.open(db, "alice", "t1", "examples", "<p>app</p>")
    stored = await db.list_ids()
    assert len(stored) == 3  # two sessions, one copy of their document
    assert not any(sid in key or again in key for key in stored)  # no usable capability
    await second.spend(other_db, sid, "alice")
    assert (await first.load(db, sid))[0].tokens == BURST - 1  # one budget
    assert (await first.load(db, again))[0].tokens == BURST  # per app session
    with pytest.raises(ClientInputError) as other_user:
        await first.spend(db, sid, "bob")
    assert other_user.value.status == 404 and other_user.value.code == "unknown_app"

    now[0] += SESSION_SECONDS - 1  # alive just before the hour ...
    assert await second.html(other_db, sid) == "<p>app</p>"
    now[0] += 1  # ... and unknown from it on, through every worker and every endpoint
    for sessions, where in ((second, other_db), (first, db)):
        for attempt in (
            sessions.html(where, sid),
            sessions.load(where, sid),
            sessions.spend(where, sid, "alice"),
        ):
            with pytest.raises(ClientInputError) as expired:
                await attempt
            assert expired.value.status == 404 and expired.value.code == "unknown_app"

    # What expired is swept when an app is opened, also what nobody asked for again; the
    # document stays while a session opened in its period could still show it.
    now[0] += SWEEP_SECONDS
    fresh = await second.open(other_db, "bob", "t2", "examples", "<p>other</p>")
    assert len(await db.list_ids()) == 3  # the new session, its document, the old document
    assert await first.html(db, fresh) == "<p>other</p>"
    with pytest.raises(ClientInputError):
        await first.load(db, again)
    now[0] += 2 * SESSION_SECONDS
    last = await second.open(other_db, "bob", "t2", "examples", "<p>other</p>")
    assert len(await db.list_ids()) == 2  # only the newest session and its document
    assert await first.html(db, last) == "<p>other</p>"


@pytest.mark.parametrize("kind", ["sqlite", "json"])
async def test_two_workers_spending_one_apps_budget_at_once_grant_exactly_it(
    tmp_path: Path, kind: str
) -> None:
    def store() -> Session:
        return SQLiteSession(tmp_path / "t.db") if kind == "sqlite" else JSONSession(tmp_path)

    workers = [(AppSessions(clock=lambda: 1000.0), store()) for _ in range(2)]
    sid = await workers[0][0].open(workers[0][1], "alice", "t1", "examples", "<p>app</p>")
    granted: list[int] = []
    refused: list[str] = []

    async def spend(i: int) -> None:
        sessions, where = workers[i % 2]
        try:
            await sessions.spend(where, sid, "alice")
            granted.append(i)
        except ClientInputError as exc:
            refused.append(exc.code)

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(spend, i)
    assert len(granted) == BURST  # not BURST per worker
    assert refused == ["app_rate_limited"] * (60 - BURST)
    assert (await workers[1][0].load(workers[1][1], sid))[0].tokens == 0

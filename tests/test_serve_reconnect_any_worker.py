"""Reconnecting to a served run from a worker that does not hold it (``Last-Event-ID``).

Two uvicorn worker processes on one store (a SQLite file: the file mailbox; Postgres:
``LISTEN``/``NOTIFY``): a run is started on worker A, the client reads some events and
drops, then reconnects to worker B, which relays the run from A. Every later event must
arrive exactly once and in order, and the relayed stream must end with the run.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests._serve_helpers import run_events, run_input, user, validate
from tests._serve_workers import Worker, start_workers

pytestmark = pytest.mark.anyio

LEASE = 1.0  # seconds: a killed holder frees its thread within the test
SLOW = 'call slow_task {"topic": "t"}'  # runs a minute, a progress event every 0.5 s
# Part of the thread's history, so the replayed snapshot is larger than one NOTIFY
# (8000 bytes) and escapes to more bytes than it has characters.
BIG = "hello " + 'é🙂"<tag>\\ ' * 1500

Event = tuple[str, dict[str, Any]]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path_factory.mktemp('any') / 'threads.db'}"
    return f"postgres:{request.getfixturevalue('postgres_url')}"


@pytest.fixture(scope="module")
def workers(store: str) -> Iterator[list[Worker]]:
    started = start_workers(store, 2, LEASE)
    yield started
    for worker in started:
        worker.stop()


async def read(
    c: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    last: str | None = None,
    body: Any = None,
    limit: int | None = None,
    until: str | None = None,
    sink: list[Event] | None = None,
) -> list[Event]:
    """``[(id, event)]`` of an SSE response; the connection is dropped after ``limit``
    events, or after the first event of type ``until`` (appended to ``sink`` as they come)."""
    headers = {"Last-Event-ID": last} if last else {}
    out: list[Event] = [] if sink is None else sink
    async with c.stream(method, url, headers=headers, json=body) as response:
        assert response.status_code == 200, await response.aread()
        event_id = ""
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                validate(data)
                out.append((event_id, data))
                if len(out) == limit or data["type"] == until:  # (a sink starts empty)
                    break
    return out


def progress(events: list[Event]) -> int:
    return sum(1 for _, e in events if e["type"] == "CUSTOM")


async def test_a_reconnect_to_another_worker_gets_every_later_event_once_in_order(
    workers: list[Worker],
) -> None:
    a, b = workers
    thread = secrets.token_hex(8)
    async with httpx2.AsyncClient(timeout=60) as c:
        await run_events(c, f"{a.url}/agui", run_input(thread, user(BIG)))
        # The run goes on on A after its client dropped (at the first progress event).
        body = run_input(thread, user(SLOW))
        first = await read(c, "POST", f"{a.url}/agui", body=body, until="CUSTOM")
        relayed: list[Event] = []
        replayed: list[Event] = []
        async with anyio.create_task_group() as tg:

            async def replay() -> None:  # no Last-Event-ID: the whole run, from B
                replayed.extend(await read(c, "GET", f"{b.url}/threads/{thread}/events"))

            tg.start_soon(replay)
            # Reconnect to B after the cut; drop again after two events; reconnect to B.
            url = f"{b.url}/threads/{thread}/events"
            relayed += await read(c, "GET", url, last=first[-1][0], limit=2)
            while progress(first + relayed) < 4:  # a few relays, each a new reconnect
                relayed += await read(c, "GET", url, last=(first + relayed)[-1][0], limit=1)
            # The last reconnect follows the run to its end: stopped from B meanwhile.
            tail: list[Event] = []

            async def follow(last: str) -> None:
                await read(c, "GET", url, last=last, sink=tail)

            tg.start_soon(follow, (first + relayed)[-1][0])
            with anyio.fail_after(30):
                while not tail:  # the relay is up (it has an event)
                    await anyio.sleep(0.01)
            stop = await c.post(f"{b.url}/threads/{thread}/interrupt")
            assert stop.json()["status"] == "stopped"
        relayed += tail
        # The holder's own record of the run (it keeps a finished run for reconnects).
        run_id = first[0][1]["runId"]
        held = await read(c, "GET", f"{a.url}/threads/{thread}/events", last=f"{run_id}:0")
        full = first[:1] + held
        assert [i for i, _ in full] == [f"{run_id}:{n}" for n in range(len(full))]
        assert full[-1][1]["type"] == "RUN_FINISHED"
        assert first + relayed == full  # every event once, in order, the end included
        assert replayed == full
        snapshot = replayed[1][1]
        assert snapshot["messages"][0]["content"] == BIG
        assert len(json.dumps(snapshot)) > 8000  # it went in parts
        after = (await c.get(f"{b.url}/threads/{thread}")).json()
        assert after["running"] is False
        assert [m["content"] for m in after["messages"] if m["role"] == "user"][-1] == SLOW
        idle = await c.get(url, headers={"Last-Event-ID": full[-2][0]})
        assert idle.status_code == 204  # ended: B has nothing kept; the thread read has it


async def test_a_relay_from_a_holder_that_died_ends_and_the_thread_shows_what_was_committed(
    tmp_path: Path,
) -> None:
    # The holder's death looks the same from every store; a SQLite file is the cheap one.
    victim, b = start_workers(f"sqlite:{tmp_path / 'threads.db'}", 2, LEASE)
    thread = secrets.token_hex(8)
    try:
        async with httpx2.AsyncClient(timeout=60) as c:
            await run_events(c, f"{victim.url}/agui", run_input(thread, user("hello")))
            first = await read(
                c, "POST", f"{victim.url}/agui", body=run_input(thread, user(SLOW)), limit=4
            )
            url = f"{b.url}/threads/{thread}/events"
            relayed: list[Event] = []
            async with c.stream("GET", url, headers={"Last-Event-ID": first[-1][0]}) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        relayed.append(("", json.loads(line[6:])))
                        if relayed[-1][1]["type"] == "CUSTOM":
                            victim.proc.kill()  # mid-run, mid-relay: no cleanup runs
            # The stream ended without the run's end (nobody will send it).
            kinds = [e["type"] for _, e in relayed]
            assert "CUSTOM" in kinds and not {"RUN_FINISHED", "RUN_ERROR"} & set(kinds)
            with anyio.fail_after(4 * LEASE + 10):  # 204 at the latest once the lease expired
                again = await c.get(url, headers={"Last-Event-ID": first[-1][0]})
            assert again.status_code == 204
            thread_now = (await c.get(f"{b.url}/threads/{thread}")).json()
            assert thread_now["running"] is False
            texts = [m["content"] for m in thread_now["messages"] if m["role"] == "user"]
            assert texts == ["hello"]  # the committed state: the killed turn is not there
    finally:
        victim.stop()
        b.stop()

"""Served threads on several uvicorn workers sharing one store (SQLite file, Postgres, Redis).

Each worker is its own process (``tests._serve_worker_app``), as behind a load balancer;
the client picks the worker per request. The threads are read back through the API and
checked with :func:`agentkit.serve.check_served_threads`' rules.
"""

from __future__ import annotations

import secrets
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agentkit.serve import check_served_threads
from agentkit.session import interrupt_session
from tests._serve_helpers import run_events, run_input, sse_events, user
from tests._serve_worker_app import store_for
from tests._serve_workers import Worker, start_workers

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent
LEASE = 1.0  # seconds: short, so a dead holder frees its thread within the test
SLOW = 'call slow_task {"topic": "t"}'  # a tool that runs a minute, reporting progress


@pytest.fixture(scope="module", params=["sqlite", "postgres", "redis"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path_factory.mktemp('mw') / 'threads.db'}"
    if request.param == "postgres":
        return f"postgres:{request.getfixturevalue('postgres_url')}"
    return f"redis:{request.getfixturevalue('redis_url')}"


@pytest.fixture(scope="module")
def workers(store: str) -> Iterator[list[Worker]]:
    started = start_workers(store, 2, LEASE)
    yield started
    for worker in started:
        worker.stop()


def thread_id() -> str:
    return secrets.token_hex(8)


async def post_run(
    client: httpx2.AsyncClient, url: str, body: dict[str, Any], sink: list[dict[str, Any]]
) -> int:
    """POST a run; append its events to ``sink``; return the HTTP status."""
    async with client.stream("POST", f"{url}/agui", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            sink.append(response.json())
            return response.status_code
        async for event in sse_events(response):
            sink.append(event)
    return 200


async def until(sink: list[dict[str, Any]], kind: str) -> None:
    with anyio.fail_after(30):
        while not any(e.get("type") == kind for e in sink):
            await anyio.sleep(0.01)


async def stored(client: httpx2.AsyncClient, url: str, thread: str) -> dict[str, Any]:
    got = await client.get(f"{url}/threads/{thread}")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


def paired(messages: list[dict[str, Any]]) -> bool:
    calls = {
        c["id"] for m in messages if m["role"] == "assistant" for c in m.get("toolCalls") or []
    }
    return calls == {m["toolCallId"] for m in messages if m["role"] == "tool"}


async def test_one_run_per_thread_and_stop_from_the_other_worker(workers: list[Worker]) -> None:
    a, b = workers
    async with httpx2.AsyncClient(timeout=60) as c:
        for _ in range(3):  # the claim race, a few times
            thread = thread_id()
            sinks: list[list[dict[str, Any]]] = [[], []]
            codes: list[int] = [0, 0]

            async def run(
                i: int, url: str, thread: str, codes: list[int], sinks: list[list[Any]]
            ) -> None:
                codes[i] = await post_run(c, url, run_input(thread, user(SLOW)), sinks[i])

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, 0, a.url, thread, codes, sinks)
                tg.start_soon(run, 1, b.url, thread, codes, sinks)
                with anyio.fail_after(30):
                    while codes == [0, 0]:  # the refused one answers at once
                        await anyio.sleep(0.01)
                loser = 0 if codes[0] else 1
                winner = 1 - loser
                assert codes[loser] == 409
                assert sinks[loser][0]["error"]["code"] == "run_in_progress"
                await until(sinks[winner], "CUSTOM")  # exactly one runs
                here, there = (a, b) if winner == 0 else (b, a)
                running = await stored(c, there.url, thread)
                assert running["running"] is True
                # Stop from the worker that does not hold the run.
                stop = await c.post(f"{there.url}/threads/{thread}/interrupt")
                answer = stop.json()
                assert answer["status"] == "stopped"
                assert f"-{here.proc.pid}-" in answer["worker"]
            events = sinks[winner]
            assert events[-1]["type"] == "RUN_FINISHED"
            assert events[-1]["outcome"] == {"type": "cancelled"}
            after = await stored(c, there.url, thread)
            assert after["running"] is False
            assert paired(after["messages"])  # the cut call got its result
            tool = next(m for m in after["messages"] if m["role"] == "tool")
            assert tool["metadata"]["status"] == "interrupted"
            idle = (await c.post(f"{there.url}/threads/{thread}/interrupt")).json()
            assert idle["status"] == "no_run" and idle["worker"] is None


async def test_round_robin_turns_are_all_stored(workers: list[Worker]) -> None:
    report = await check_served_threads([w.url for w in workers], conversations=6, turns=3)
    assert report.problems == []
    assert report.sent == report.succeeded == 18


async def test_a_paused_holder_is_fenced_and_a_killed_one_frees_its_thread(
    store: str, workers: list[Worker]
) -> None:
    victim = start_workers(store, 1, LEASE)[0]
    thread = thread_id()
    try:
        async with httpx2.AsyncClient(timeout=60) as c:
            await run_events(c, f"{victim.url}/agui", run_input(thread, user("hello")))
            sink: list[dict[str, Any]] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(post_run, c, victim.url, run_input(thread, user(SLOW)), sink)
                await until(sink, "CUSTOM")
                victim.proc.send_signal(signal.SIGSTOP)  # paused past its lease
                with anyio.fail_after(4 * LEASE + 10):
                    while True:
                        events: list[dict[str, Any]] = []
                        body = run_input(thread, user("weather in Lima"))
                        if await post_run(c, workers[0].url, body, events) == 200:
                            break
                        await anyio.sleep(0.1)
                assert events[-1]["outcome"] == {"type": "success"}
                victim.proc.send_signal(signal.SIGCONT)
            # The resumed holder found another run's claim: it stopped and saved nothing.
            assert sink[-1]["type"] == "RUN_ERROR" and sink[-1]["code"] == "lease_lost"
            thread_now = await stored(c, workers[1].url, thread)
            texts = [m["content"] for m in thread_now["messages"] if m["role"] == "user"]
            assert texts == ["hello", "weather in Lima"]
            assert paired(thread_now["messages"])
            assert thread_now["running"] is False
            # Killed mid-turn (no cleanup runs): the thread is free once the lease expires.
            sink.clear()
            async with anyio.create_task_group() as tg:

                async def doomed() -> None:
                    with pytest.raises(httpx2.TransportError):
                        await post_run(c, victim.url, run_input(thread, user(SLOW)), sink)

                tg.start_soon(doomed)
                await until(sink, "CUSTOM")
                victim.proc.kill()  # mid-turn: no cleanup runs
            other = workers[0].url
            with anyio.fail_after(4 * LEASE + 10):
                while True:
                    events = []
                    body = run_input(thread, user("weather in Oslo"))
                    if await post_run(c, other, body, events) == 200:
                        break
                    assert events[0]["error"]["code"] == "run_in_progress"
                    await anyio.sleep(0.1)
            assert events[-1]["outcome"] == {"type": "success"}
            thread_now = await stored(c, workers[1].url, thread)
            texts = [m["content"] for m in thread_now["messages"] if m["role"] == "user"]
            assert texts == ["hello", "weather in Lima", "weather in Oslo"]  # not the killed turn
            assert paired(thread_now["messages"])
    finally:
        victim.stop()


async def test_interrupt_session_from_another_process_stops_a_served_run(
    store: str, workers: list[Worker]
) -> None:
    thread = thread_id()
    sessions = store_for(store)
    try:
        async with httpx2.AsyncClient(timeout=60) as c:
            sink: list[dict[str, Any]] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(post_run, c, workers[1].url, run_input(thread, user(SLOW)), sink)
                await until(sink, "CUSTOM")
                await interrupt_session(sessions, f"serve/local/{thread}")
            assert sink[-1]["outcome"] == {"type": "cancelled"}
            assert paired((await stored(c, workers[0].url, thread))["messages"])
    finally:
        await sessions.close()

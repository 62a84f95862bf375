"""Served threads: steering a running reply (``POST /threads/{id}/steer``, any worker) and
reconnecting to its event stream with ``Last-Event-ID`` (every later event once, in order)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import httpx2

from agentkit import check_memory_invariant
from agentkit.agent import ReActAgent
from agentkit.messages import Msg
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import FunctionModel, RequestInfo, text, tool_use
from agentkit.tools import Toolkit
from tests._serve_helpers import run_input, running, user, validate


class Gate:
    """Shared by the served agents of a test: a blocking tool, and a steer signal."""

    def __init__(self) -> None:
        self.started = anyio.Event()  # the tool runs
        self.steered = anyio.Event()  # a steer was queued: the tool may finish
        self.requests: list[list[Msg]] = []


def factory(gate: Gate) -> Any:
    class SteerAware(ReActAgent[Any, Any]):
        async def steer(self, msg: Any) -> Any:
            gate.steered.set()  # the tool wakes once this task awaits: queued by then
            return await super().steer(msg)

    def answer(messages: list[Msg], info: RequestInfo) -> Any:
        gate.requests.append(messages)
        if len(gate.requests) == 1:
            return [text("Looking it up."), tool_use("wait", "c1")]
        return f"Done; last I heard: {messages[-1].get_text()}"

    def make() -> ReActAgent[Any, Any]:
        toolkit = Toolkit()

        async def wait() -> str:
            """Wait for the test.

            Returns:
                A fixed answer.
            """
            gate.started.set()
            with anyio.fail_after(10):
                await gate.steered.wait()
            return "waited"

        toolkit.register_tool_function(wait)
        return SteerAware("bot", "sys", FunctionModel(answer, stream=True), toolkit)

    return make


async def sse_with_ids(response: httpx2.Response, limit: int | None = None) -> list[Any]:
    """``[(id, event)]`` of an SSE response (stops after ``limit`` events)."""
    out: list[Any] = []
    event_id = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            validate(data)
            out.append((event_id, data))
            if limit is not None and len(out) == limit:
                break
    return out


async def read_events(
    c: httpx2.AsyncClient,
    path: str,
    last: str | None = None,
    limit: int | None = None,
    connected: anyio.Event | None = None,
) -> list[Any]:
    headers = {"Last-Event-ID": last} if last else {}
    async with c.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        if connected is not None:  # the stream is open: the run may end now
            connected.set()
        return await sse_with_ids(response, limit)


async def test_a_reconnect_with_last_event_id_gets_every_later_event_once_in_order(
    tmp_path: Path,
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    gate = Gate()
    app = create_app(factory(gate), sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base, timeout=20) as c:
        cut = rng.randrange(1, 6)  # events seen before the connection drops (tool blocks after)
        async with c.stream("POST", "/agui", json=run_input("t1", user("go"))) as response:
            first = await sse_with_ids(response, cut)  # then the client goes away
        with anyio.fail_after(10):
            await gate.started.wait()
        rest: list[Any] = []
        full: list[Any] = []
        both = [anyio.Event(), anyio.Event()]
        async with anyio.create_task_group() as tg:

            async def reconnect() -> None:
                last = first[-1][0]
                rest.extend(await read_events(c, "/threads/t1/events", last, connected=both[0]))

            async def replay() -> None:
                full.extend(await read_events(c, "/threads/t1/events", connected=both[1]))

            tg.start_soon(reconnect)
            tg.start_soon(replay)
            with anyio.fail_after(10):
                for event in both:  # both readers follow the live run before it ends
                    await event.wait()
            gate.steered.set()  # let the run finish
        assert first + rest == full, f"seed {seed}"
        ids = [event_id for event_id, _ in full]
        run_id = full[0][1]["runId"]
        assert ids == [f"{run_id}:{i}" for i in range(len(full))]
        assert full[-1][1]["type"] == "RUN_FINISHED"
        # Just after the run ended, a reconnect still gets its last events (once).
        late = rng.randrange(len(full) - 1)
        again = await read_events(c, "/threads/t1/events", full[late][0])
        assert again == full[late + 1 :], f"seed {seed}"
        # Another run's id (or none) with no live run: nothing to replay.
        idle = await c.get("/threads/t1/events", headers={"Last-Event-ID": "other:3"})
        assert idle.status_code == 204


async def _steer_while_the_tool_runs(
    run_on: httpx2.AsyncClient, steer_on: httpx2.AsyncClient, gate: Gate, thread: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    answer: dict[str, Any] = {}
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async with run_on.stream("POST", "/agui", json=run_input(thread, user("go"))) as r:
            events.extend(e for _, e in await sse_with_ids(r))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await gate.started.wait()
        reply = await steer_on.post(f"/threads/{thread}/steer", json={"message": "also Lyon"})
        assert reply.status_code == 200, reply.text
        answer = reply.json()
    return answer, events


async def test_steer_reaches_the_run_on_this_worker_before_its_next_request(
    tmp_path: Path,
) -> None:
    gate = Gate()
    app = create_app(factory(gate), sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base, timeout=20) as c:
        answer, events = await _steer_while_the_tool_runs(c, c, gate, "t1")
        assert answer["status"] == "next_request"
        assert answer["worker"] == app.state.serve.worker
        assert events[-1]["outcome"] == {"type": "success"}
        assert gate.requests[1][-1].get_text() == "also Lyon"
        stored = (await c.get("/threads/t1")).json()["messages"]
        assert [m.get("content") for m in stored if m["role"] == "user"][-1] == "also Lyon"
        assert stored[-1]["content"] == "Done; last I heard: also Lyon"
        idle = await c.post("/threads/t1/steer", json={"message": "anyone?"})
        assert idle.json()["status"] == "no_run"
        bad = await c.post("/threads/t1/steer", json={"message": ""})
        assert bad.status_code == 400


async def test_steer_sent_to_another_worker_reaches_the_run_where_it_runs(
    tmp_path: Path,
) -> None:
    gate = Gate()
    db = tmp_path / "t.db"
    holder = create_app(factory(gate), sessions=SQLiteSession(db))
    other = create_app(factory(gate), sessions=SQLiteSession(db))
    async with (
        running(holder) as a,
        running(other) as b,
        httpx2.AsyncClient(base_url=a, timeout=20) as ca,
        httpx2.AsyncClient(base_url=b, timeout=20) as cb,
    ):
        answer, events = await _steer_while_the_tool_runs(ca, cb, gate, "t2")
        assert answer["status"] == "next_request"
        assert answer["worker"] == holder.state.serve.worker != other.state.serve.worker
        assert events[-1]["outcome"] == {"type": "success"}
        assert gate.requests[1][-1].get_text() == "also Lyon"
        state = (await SQLiteSession(db).load_state("serve/local/t2")) or {}
        agent_state: Any = state.get("agent") or {}
        messages = [Msg.from_dict(m) for m in agent_state["memory"]["messages"]]
        check_memory_invariant(messages)


async def test_steer_of_a_thread_waiting_for_approval_reaches_the_resumed_run(
    tmp_path: Path,
) -> None:
    def make() -> ReActAgent[Any, Any]:
        def answer(messages: list[Msg], info: RequestInfo) -> Any:
            if messages[-1].get_text() == "go":
                return tool_use("guarded", "c1")
            return f"heard: {messages[-1].get_text()}"

        toolkit = Toolkit()

        def guarded() -> str:
            """Needs approval.

            Returns:
                A fixed answer.
            """
            return "ran"

        toolkit.register_tool_function(guarded, requires_approval=True)
        return ReActAgent("bot", "sys", FunctionModel(answer), toolkit)

    app = create_app(make, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base, timeout=20) as c:
        async with c.stream("POST", "/agui", json=run_input("t3", user("go"))) as r:
            paused = [e for _, e in await sse_with_ids(r)]
        assert paused[-1]["outcome"]["type"] == "interrupt"
        steered = await c.post("/threads/t3/steer", json={"message": "also Lyon"})
        assert steered.json()["status"] == "next_request"
        async with c.stream("POST", "/threads/t3/approvals", json={"c1": True}) as r:
            resumed = [e for _, e in await sse_with_ids(r)]
        assert resumed[-1]["outcome"] == {"type": "success"}
        stored = (await c.get("/threads/t3")).json()["messages"]
        assert stored[-1]["content"] == "heard: also Lyon"

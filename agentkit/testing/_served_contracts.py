"""The contract suite on the served path: the scenarios of ``check_contracts`` over HTTP.

Two apps (``create_app``, two workers of one deployment) share one SQLite thread store and
its control channel; the driver talks to them in process over httpx's ASGI transport, and
sends each request to either worker at random: a run started on one is approved, stopped
and steered through the other as often as through itself ("another worker, another
client"). A step is one HTTP run: ``POST /agui`` with a new task (or a new message while
calls wait, which denies them), or ``POST /threads/{id}/approvals`` with random decisions
(``true``, ``false``, a reason, ``{"approved", "reason", "input"}``) on a random subset of
the pending calls. During a step it stops the run (``POST /threads/{id}/interrupt``) while
a tool runs, and steers it (``POST /threads/{id}/steer``) when a tool starts; while calls
wait it may steer, or send a Stop that must find no run. After every step the thread's
stored state is loaded into a fresh agent and checked against the numbered list of
docs/contracts.md, and every execution of every call is counted.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentkit._ids import new_id
from agentkit.agent import Decision
from agentkit.testing._contracts import (
    AgentFactory,
    ContractReport,
    PendingView,
    Scenario,
    Verdict,
    check_agent,
    check_guarantee,
    check_runs,
    check_steers_stored,
    default_agent,
    finish_report,
    first_seed,
    made,
    record_decisions,
    result_texts,
    run_guarded,
    tag_of,
    verdict,
)

if TYPE_CHECKING:
    import httpx2

    from agentkit.agent import ReActAgent
    from agentkit.events import CallInfo
    from agentkit.session import SQLiteSession

__all__ = ["check_served_contracts"]

SUITE = "check_served_contracts"


class _Served:
    """The two workers' clients, the thread store, and the scenario being served."""

    def __init__(self, clients: list[httpx2.AsyncClient], store: SQLiteSession) -> None:
        self.clients = clients
        self.store = store
        self.scenario: Scenario | None = None

    async def factory(self) -> ReActAgent[Any, Any]:
        """The apps' agent factory: the current scenario's outer agent (fresh each run)."""
        assert self.scenario is not None
        outer, _ = await self.scenario.build()
        return outer


async def _stored(served: _Served, s: Scenario, thread: str) -> ReActAgent[Any, Any] | None:
    """A fresh outer agent holding the thread's stored state (None: no thread yet)."""
    record = await served.store.load_state(f"serve/local/{thread}")
    if not isinstance(record, dict):
        return None
    agent = await made(s.make_agent("outer", s.models["outer"], s.toolkit("outer")))
    agent.load_state_dict(json.loads(json.dumps(record["agent"])))
    return agent


def _wire(decision: Verdict) -> object:
    """A decision as the approvals endpoint takes it (a ``Decision`` as its fields)."""
    if isinstance(decision, Decision):
        return {k: v for k, v in dataclasses.asdict(decision).items() if v is not None}
    return decision


def _agui(thread: str, text: str) -> dict[str, object]:
    return {
        "threadId": thread,
        "runId": new_id(nbytes=8),
        "messages": [{"id": new_id(nbytes=8), "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def _post_run(client: httpx2.AsyncClient, url: str, body: object) -> str:
    """POST a run, read its SSE stream to the end; the outcome type of RUN_FINISHED."""
    outcome = ""
    async with client.stream("POST", url, json=body) as response:
        if response.status_code != 200:
            await response.aread()
            raise AssertionError(f"POST {url}: {response.status_code} {response.text}")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event.get("type") == "RUN_FINISHED":
                    outcome = str((event.get("outcome") or {}).get("type", ""))
                elif event.get("type") == "RUN_ERROR":
                    raise AssertionError(f"POST {url}: RUN_ERROR {event}")
    return outcome


async def _steer(served: _Served, s: Scenario, thread: str, why: str) -> None:
    text = f"steer {s.rng.randrange(10**6)}"
    client = s.rng.choice(served.clients)
    answer = await client.post(f"/threads/{thread}/steer", json={"message": text})
    status = answer.json().get("status")
    s.trace.append(f"  steer {why}: {status}")
    if status in ("next_request", "follow_up"):
        s.steers.append(text)
        s.counts[f"served steer {status}"] += 1
    elif status == "no_run":
        s.refused_steers.append(text)


async def _step(served: _Served, s: Scenario, thread: str, url: str, body: object) -> bool:
    """One HTTP run with a random Stop (while a tool runs) and steer armed; whether cut."""
    rng = s.rng
    s.tool_starts = 0
    s.tool_blocked = anyio.Event()
    s.block_tool_at = rng.randrange(3) if rng.random() < 0.25 else -1
    steer_at = rng.randrange(3) if rng.random() < 0.3 else -1
    steer_due = anyio.Event()
    cut = [False]

    def on_tool_start(index: int) -> None:
        if index == steer_at:
            steer_due.set()

    s.on_tool_start = on_tool_start
    try:
        async with anyio.create_task_group() as tg:
            watchers = anyio.CancelScope()

            async def steer_in_tool() -> None:
                await steer_due.wait()
                await _steer(served, s, thread, "while a tool runs")

            async def stop_in_tool() -> None:
                await s.tool_blocked.wait()
                cut[0] = True
                s.counts["served stop during a tool"] += 1
                answer = await rng.choice(served.clients).post(f"/threads/{thread}/interrupt")
                check_guarantee(
                    answer.json().get("status") == "stopped", 6, f"Stop said {answer.text}"
                )

            async def watch() -> None:
                with watchers:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(steer_in_tool)
                        inner.start_soon(stop_in_tool)

            tg.start_soon(watch)
            outcome = await _post_run(rng.choice(served.clients), url, body)
            watchers.cancel()
    finally:
        s.on_tool_start = None
    s.trace[-1] += f" -> {outcome}{' [cut]' if cut[0] else ''}"
    return cut[0]


async def _check_thread(served: _Served, s: Scenario, thread: str) -> ReActAgent[Any, Any]:
    agent = await _stored(served, s, thread)
    check_guarantee(agent is not None, 1, f"thread {thread!r} was not stored")
    assert agent is not None
    await check_agent(agent, s)
    return agent


async def _stop_paused(
    served: _Served, s: Scenario, thread: str, step: int, ids: list[str]
) -> None:
    """Press Stop while calls wait: guarantee 6, the answer is ``no_run``."""
    s.trace.append(f"step {step}: Stop while {ids} wait")
    answer = await s.rng.choice(served.clients).post(f"/threads/{thread}/interrupt")
    status = answer.json().get("status")
    check_guarantee(status == "no_run", 6, f"Stop with no run said {status!r}")
    s.counts["served stop while paused"] += 1
    await _check_thread(served, s, thread)


async def _settle_pause(
    served: _Served,
    s: Scenario,
    thread: str,
    step: int,
    action: float,
    pending: list[CallInfo],
    decided: dict[str, str],
) -> bool:
    """Resume the paused thread by ``action``: a new message, or (maybe steer) decide some."""
    ids = [c["id"] for c in pending]
    if action < 0.2:
        s.trace.append(f"step {step}: POST /agui (new message) while {ids} wait")
        s.counts["served new message while paused"] += 1
        for c in pending:
            decided[tag_of(c)] = "denied"
        body = _agui(thread, f"new task {step}")
        return await _step(served, s, thread, "/agui", body)
    if action < 0.35:
        s.trace.append(f"step {step}: steer while {ids} wait")
        await _steer(served, s, thread, "while calls wait")
    approvals: dict[str, object] = {}
    for c in [c for c in pending if s.rng.random() < 0.7] or pending[:1]:
        decision, how = verdict(s, PendingView(c["input"]))
        approvals[c["id"]] = _wire(decision)
        decided[tag_of(c)] = how
        s.counts[f"served {how}{' nested' if '/' in c['id'] else ''}"] += 1
    s.trace.append(f"step {step}: POST approvals {approvals!r}")
    url = f"/threads/{thread}/approvals"
    return await _step(served, s, thread, url, approvals)


async def _close(served: _Served, s: Scenario, thread: str) -> None:
    """Deny what still waits, then one last run; every accepted steer is stored once."""
    s.closing = True
    for _ in range(4):
        stored = await _stored(served, s, thread)
        pending = [] if stored is None else stored.pending_tool_calls
        if not pending:
            break
        s.trace.append(f"close: deny {[c['id'] for c in pending]}")
        for c in pending:
            s.denied.add(tag_of(c))
        denials = {c["id"]: False for c in pending}
        await _post_run(s.rng.choice(served.clients), f"/threads/{thread}/approvals", denials)
        await _check_thread(served, s, thread)
        check_runs(s, False, {})
    s.trace.append("close: POST /agui 'bye'")
    await _post_run(s.rng.choice(served.clients), "/agui", _agui(thread, "bye"))
    final = await _check_thread(served, s, thread)
    check_guarantee(not final.pending_tool_calls, 3, "denying every pending call left some")
    check_runs(s, False, {})
    check_steers_stored(s, "\n".join(result_texts(await final.memory.get_memory())))


async def _run_served_scenario(served: _Served, s: Scenario) -> None:
    """Play one scenario over HTTP: random steps, each checked, then the close."""
    rng = s.rng
    served.scenario = s
    thread = f"contracts-{id(s):x}"
    for step in range(rng.randint(2, 5)):
        decided: dict[str, str] = {}
        stored = await _stored(served, s, thread)
        pending = [] if stored is None else stored.pending_tool_calls
        if not pending:
            s.trace.append(f"step {step}: POST /agui 'task {step}'")
            cut = await _step(served, s, thread, "/agui", _agui(thread, f"task {step}"))
        else:
            ids = [c["id"] for c in pending]
            check_guarantee(len(ids) == len(set(ids)), 4, f"pending ids repeat: {ids}")
            action = rng.random()
            if action < 0.1:
                await _stop_paused(served, s, thread, step, ids)
                continue
            cut = await _settle_pause(served, s, thread, step, action, pending, decided)
            record_decisions(s, decided)
        await _check_thread(served, s, thread)
        check_runs(s, cut, decided)
    await _close(served, s, thread)


async def check_served_contracts(
    make_agent: AgentFactory | None = None,
    *,
    scenarios: int = 30,
    seed: int | None = None,
    scenario_timeout: float = 30.0,
    raise_on_failure: bool = True,
    directory: str | Path | None = None,
) -> ContractReport:
    """Run the contract scenarios as served threads against agents from ``make_agent``.

    Two ``create_app`` workers on one SQLite thread store, driven in process over httpx's
    ASGI transport, each request sent to either (see the module docs). The checks are
    those of :func:`check_contracts`, on each thread's stored state.

    Args:
        make_agent: ``make_agent(name, model, toolkit)``, as for ``check_contracts``.
        scenarios: How many scenarios to run.
        seed: The first scenario's seed (scenario ``i`` uses ``seed + i``); None draws one.
        scenario_timeout: Seconds one scenario may take before it counts as hung.
        raise_on_failure: Raise ``AssertionError`` naming the failures (and their seeds).
        directory: Where the temporary directory of the thread store is made (default:
            the system's).

    Returns:
        The report; failures are also printed to stderr with the seed that replays them.

    Raises:
        AssertionError: when a scenario broke the contract and ``raise_on_failure`` is set.
    """
    from contextlib import AsyncExitStack

    import httpx2

    from agentkit.serve import create_app
    from agentkit.session import SQLiteSession

    factory = make_agent or default_agent
    report = ContractReport(seed=first_seed(seed))
    with tempfile.TemporaryDirectory(prefix="agentkit-contracts-", dir=directory) as tmp:
        db = Path(tmp) / "threads.db"
        async with AsyncExitStack() as stack:
            clients: list[httpx2.AsyncClient] = []
            served = _Served(clients, SQLiteSession(db))
            for _ in range(2):  # two workers of one deployment: one store, own processes' state
                app = create_app(served.factory, sessions=SQLiteSession(db))
                await stack.enter_async_context(app.router.lifespan_context(app))
                transport = httpx2.ASGITransport(app=app)
                client = httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1")
                clients.append(await stack.enter_async_context(client))
            for i in range(scenarios):
                scenario = Scenario(report.seed + i, factory, report.counts)
                work = _run_served_scenario(served, scenario)
                await run_guarded(report, i, scenario, work, scenario_timeout, SUITE)
    return finish_report(report, SUITE, raise_on_failure)

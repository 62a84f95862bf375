"""The contract suite on the durable path: the scenarios of ``check_contracts`` as DBOS runs.

Each scenario's outer agent is the template of a ``DBOSAgent`` (one per scenario, all
registered on one DBOS instance with a SQLite system database). A step is one workflow:
``durable.run(task, state=...)`` from the state the previous workflow recorded, so every
step runs on a fresh agent restored from a record. While the workflow waits for approval,
the driver decides a random subset of the pending calls (``True``, ``False``, a reason,
``Decision`` with new arguments) and delivers them from "another process": a
``DBOSClient`` on the system database, or ``DBOSAgent.approve``. Interrupts go through the
control channel (``interrupt_session``) while a tool runs or while calls wait; steers
(``steer_session``) land while a tool runs or while calls wait. After every workflow the
recorded state is loaded into a fresh agent and checked against the numbered list of
docs/contracts.md, and every execution of every call is counted.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

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
    from dbos import DBOSClient

    from agentkit.agent import ReActAgent
    from agentkit.durable import DBOSAgent, DurableRunResult
    from agentkit.events import CallInfo
    from agentkit.session import SQLiteSession

__all__ = ["check_durable_contracts"]

SUITE = "check_durable_contracts"


class _Paths:
    """What the durable scenarios share: the control store and the outside client."""

    def __init__(self, store: SQLiteSession, client: DBOSClient) -> None:
        self.store = store
        self.client = client


async def _restored(s: Scenario, state: dict[str, object]) -> ReActAgent[Any, Any]:
    """A fresh outer agent holding ``state`` (a JSON round trip of the record first)."""
    agent = await made(s.make_agent("outer", s.models["outer"], s.toolkit("outer")))
    agent.load_state_dict(json.loads(json.dumps(state)))
    return agent


async def _pause(wid: str, done: anyio.Event, last: object) -> list[CallInfo] | None:
    """The calls the workflow waits on once it publishes a new pause; None once it ended."""
    from dbos import DBOS

    from agentkit.durable import PENDING_EVENT

    while not done.is_set():
        value = await DBOS.get_event_async(wid, PENDING_EVENT, timeout_seconds=0.05)
        if value and value != last:
            return list(value)
        with anyio.move_on_after(0.02):  # DBOS is polled: its events have no waiters here
            await done.wait()
    return None


async def _steer(s: Scenario, paths: _Paths, wid: str, why: str) -> None:
    """Steer the workflow ``wid`` with a random text and record how the steer landed."""
    from agentkit.session import steer_session

    text = f"steer {s.rng.randrange(10**6)}"
    outcome = await steer_session(paths.store, wid, text, wait=10)
    s.trace.append(f"  steer {why}: {outcome}")
    if outcome in ("next_request", "follow_up"):
        s.steers.append(text)
        s.counts[f"durable steer {outcome}"] += 1
    elif outcome == "no_run":
        s.refused_steers.append(text)


async def _watch(
    s: Scenario,
    paths: _Paths,
    wid: str,
    steer_due: anyio.Event,
    cut: list[bool],
    scope: anyio.CancelScope,
) -> None:
    """Until ``scope`` is cancelled: steer once ``steer_due`` is set, interrupt a blocked tool."""
    from agentkit.session import interrupt_session

    async def steer_in_tool() -> None:
        await steer_due.wait()
        await _steer(s, paths, wid, "while a tool runs")

    async def cut_tool() -> None:
        await s.tool_blocked.wait()
        cut[0] = True
        s.counts["durable interrupt during a tool"] += 1
        await interrupt_session(paths.store, wid)

    with scope:
        async with anyio.create_task_group() as inner:
            inner.start_soon(steer_in_tool)
            inner.start_soon(cut_tool)


async def _deliver(s: Scenario, paths: _Paths, wid: str, approvals: dict[str, Verdict]) -> None:
    """Deliver ``approvals`` from another process: a DBOS client or ``DBOSAgent.approve``."""
    from agentkit.durable import APPROVALS_TOPIC, DBOSAgent, approvals_record

    if s.rng.random() < 0.5:  # from another process: a client of the database
        s.trace.append(f"  DBOSClient.send({approvals!r})")
        record = approvals_record(approvals)
        await paths.client.send_async(wid, record, APPROVALS_TOPIC)
        s.counts["durable approvals from a client"] += 1
    else:
        s.trace.append(f"  DBOSAgent.approve({approvals!r})")
        await DBOSAgent.approve(wid, approvals)


async def _answer_pause(
    s: Scenario, paths: _Paths, wid: str, pending: list[CallInfo], decided: dict[str, str]
) -> None:
    """Answer one pause at random: interrupt it, or (maybe steer, then) decide some calls."""
    from agentkit.session import interrupt_session

    rng = s.rng
    ids = [c["id"] for c in pending]
    check_guarantee(len(ids) == len(set(ids)), 4, f"pending ids repeat: {ids}")
    action = rng.random()
    if action < 0.12:
        s.trace.append(f"  interrupt while {ids} wait")
        s.counts["durable interrupt while paused"] += 1
        for c in pending:
            decided[tag_of(c)] = "denied"
        await interrupt_session(paths.store, wid)
        return
    if action < 0.3:
        await _steer(s, paths, wid, "while calls wait")
    approvals: dict[str, Verdict] = {}
    for c in [c for c in pending if rng.random() < 0.7] or pending[:1]:
        decision, how = verdict(s, PendingView(c["input"]))
        approvals[c["id"]] = decision
        decided[tag_of(c)] = how
        s.counts[f"durable {how}{' nested' if '/' in c['id'] else ''}"] += 1
    await _deliver(s, paths, wid, approvals)


async def _workflow(
    s: Scenario,
    paths: _Paths,
    durable: DBOSAgent,
    wid: str,
    start: Callable[[], Awaitable[DurableRunResult[Any]]],
) -> tuple[DurableRunResult[Any], bool, dict[str, str]]:
    """One workflow with random interrupts, steers and decisions; (result, cut, decided)."""
    rng = s.rng
    s.tool_starts = 0
    s.tool_blocked = anyio.Event()
    s.block_tool_at = rng.randrange(3) if rng.random() < 0.25 else -1
    steer_at = rng.randrange(3) if rng.random() < 0.3 else -1
    steer_due = anyio.Event()
    cut = [False]
    decided: dict[str, str] = {}
    results: list[DurableRunResult[Any]] = []
    done = anyio.Event()

    def on_tool_start(index: int) -> None:
        if index == steer_at:
            steer_due.set()

    async def go() -> None:
        try:
            results.append(await start())
        finally:
            done.set()

    s.on_tool_start = on_tool_start
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            watchers = anyio.CancelScope()
            tg.start_soon(_watch, s, paths, wid, steer_due, cut, watchers)
            last: object = None
            while (pending := await _pause(wid, done, last)) is not None:
                last = pending
                await _answer_pause(s, paths, wid, pending, decided)
            watchers.cancel()
    finally:
        s.on_tool_start = None
    (result,) = results
    return result, cut[0], decided


async def _run_durable_scenario(s: Scenario, paths: _Paths, durable: DBOSAgent) -> None:
    rng = s.rng
    state: dict[str, object] | None = None
    for step in range(rng.randint(2, 4)):
        wid = f"{durable.name}/{step}"
        s.trace.append(f"step {step}: durable.run('task {step}') as {wid}")

        start = partial(durable.run, f"task {step}", state=state, workflow_id=wid)
        result, cut, decided = await _workflow(s, paths, durable, wid, start)
        record_decisions(s, decided)
        s.trace[-1] += f" -> {result.stop_reason}{' [cut]' if cut else ''}"
        state = result.state
        await check_agent(await _restored(s, state), s)
        check_runs(s, cut, decided)
    s.closing = True
    s.trace.append("close: durable.run('bye')")
    wid = f"{durable.name}/close"
    start = partial(durable.run, "bye", state=state, workflow_id=wid)
    result, _, decided = await _workflow(s, paths, durable, wid, start)
    record_decisions(s, decided)
    final = await _restored(s, result.state)
    await check_agent(final, s)
    check_runs(s, False, {})
    check_steers_stored(s, "\n".join(result_texts(await final.memory.get_memory())))


async def check_durable_contracts(
    make_agent: AgentFactory | None = None,
    *,
    scenarios: int = 30,
    seed: int | None = None,
    scenario_timeout: float = 30.0,
    raise_on_failure: bool = True,
    directory: str | Path | None = None,
) -> ContractReport:
    """Run the contract scenarios as durable runs (DBOS) against agents from ``make_agent``.

    It launches DBOS itself (a SQLite system database in a temporary directory, one
    ``DBOSAgent`` per scenario) and destroys it at the end: call it in a process that has
    not launched DBOS (a test). The checks are those of :func:`check_contracts`, on the
    state each workflow records (see the module docs).

    Args:
        make_agent: ``make_agent(name, model, toolkit)``, as for ``check_contracts``.
        scenarios: How many scenarios to run.
        seed: The first scenario's seed (scenario ``i`` uses ``seed + i``); None draws one.
        scenario_timeout: Seconds one scenario may take before it counts as hung.
        raise_on_failure: Raise ``AssertionError`` naming the failures (and their seeds).
        directory: Where the temporary directory of the DBOS system database and the
            control store is made (default: the system's; a RAM disk such as ``/dev/shm``
            saves the cost of each step's ``fsync``).

    Returns:
        The report; failures are also printed to stderr with the seed that replays them.

    Raises:
        AssertionError: when a scenario broke the contract and ``raise_on_failure`` is set.
    """
    from dbos import DBOS, DBOSClient, DBOSPortableJSONSerializer

    from agentkit.durable import DBOSAgent
    from agentkit.session import SQLiteSession

    factory = make_agent or default_agent
    report = ContractReport(seed=first_seed(seed))
    with tempfile.TemporaryDirectory(prefix="agentkit-contracts-", dir=directory) as tmp:
        url = f"sqlite:///{Path(tmp) / 'dbos.sqlite'}"
        DBOS(
            config={
                "name": "agentkit-contracts",
                "system_database_url": url,
                "executor_id": "contracts",
                "application_version": "contracts",
                "serializer": DBOSPortableJSONSerializer(),
                "log_level": "ERROR",
                # SQLite has no LISTEN/NOTIFY: a waiting recv polls for its messages.
                "notification_listener_polling_interval_sec": 0.02,
            }
        )
        try:
            store = SQLiteSession(Path(tmp) / "control.db")
            cases: list[tuple[Scenario, DBOSAgent]] = []
            for i in range(scenarios):
                scenario = Scenario(report.seed + i, factory, report.counts)
                outer, _ = await scenario.build()
                name = f"contracts-{report.seed + i}"
                cases.append((scenario, DBOSAgent(outer, name=name, control=store)))
            DBOS.launch()
            client = DBOSClient(system_database_url=url, serializer=DBOSPortableJSONSerializer())
            try:
                paths = _Paths(store, client)
                for i, (scenario, durable) in enumerate(cases):
                    work = _run_durable_scenario(scenario, paths, durable)
                    await run_guarded(report, i, scenario, work, scenario_timeout, SUITE)
            finally:
                client.destroy()
        finally:
            DBOS.destroy(destroy_registry=True)
    return finish_report(report, SUITE, raise_on_failure)

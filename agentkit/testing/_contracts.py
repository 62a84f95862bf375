"""The contract suite: seeded, randomized scenarios against an agent the caller builds.

They check what cancel, steer and approve guarantee (the numbered list of docs/contracts.md).

Each scenario is drawn from one seed: an outer agent with a plain tool (``work``), a tool
that needs approval (``danger``) and, in some scenarios, a helper agent used as a tool
(nested approvals). Its models are ``FunctionModel``s that draw every answer from the
scenario's random generator: text, or one to three parallel calls (ids sometimes repeated
within a turn or across turns, as some providers do). The driver runs a few steps: a new
task, or, while calls wait, a random mix of approvals (``True``, ``False``, a reason,
``Decision`` with new arguments), a new message, ``interrupt_pending()``, an idle
``interrupt()`` and a JSON save/load into fresh agents. During a step it may interrupt at a
random event (while the model streams, at a tool's start or result, at the approval
request) or while a tool runs (the tool waits on an event, never a timer), and steer at a
random event. After every step it checks the numbered list of docs/contracts.md.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from agentkit.agent import Decision, ReActAgent
from agentkit.events import AgentEvent, CallInfo, TextDelta
from agentkit.exceptions import StateError
from agentkit.memory import check_memory_invariant
from agentkit.messages import ContentBlock, Msg
from agentkit.models import ChatModel
from agentkit.testing import FunctionModel, RequestInfo, ScriptItem, text, tool_use
from agentkit.tools import Toolkit

Verdict = bool | str | Decision
"""A decision in ``approvals=``."""

__all__ = ["AgentFactory", "ContractFailure", "ContractReport", "check_contracts"]

DepsT = TypeVar("DepsT")
"""An agent's deps type, where a check works for any."""
OutT = TypeVar("OutT")
"""An agent's output type, where a check works for any."""

AgentFactory = Callable[
    [str, ChatModel, Toolkit], "ReActAgent[Any, Any] | Awaitable[ReActAgent[Any, Any]]"
]
"""``make_agent(name, model, toolkit)``: the agent under test, built with the given model
and toolkit (and whatever else the application gives its agents: capabilities, memory,
hooks, settings). Called again for the fresh agents a save/load restores into."""


def default_agent(name: str, model: ChatModel, toolkit: Toolkit) -> ReActAgent[None, str]:
    """A plain ``ReActAgent`` (what ``check_contracts`` tests without a factory)."""
    return ReActAgent(name, "You are an agent under test.", model, toolkit)


@dataclass(frozen=True, slots=True)
class ContractFailure:
    """One scenario that broke the contract.

    Attributes:
        scenario: Its index in the run.
        seed: Its seed: ``check_contracts(make_agent, scenarios=1, seed=seed)`` replays it.
        message: Which numbered guarantee broke, and how.
        trace: The steps the scenario took, up to the failure.
        suite: The function that replays it.
    """

    scenario: int
    seed: int
    message: str
    trace: tuple[str, ...]
    suite: str = "check_contracts"

    def __str__(self) -> str:
        steps = "\n".join(f"    {s}" for s in self.trace[-12:])
        return (
            f"scenario {self.scenario} (seed {self.seed}): {self.message}\n  last steps:\n{steps}\n"
            f"  replay: {self.suite}(make_agent, scenarios=1, seed={self.seed})"
        )


@dataclass(slots=True)
class ContractReport:
    """What a ``check_contracts`` run did.

    Attributes:
        seed: The seed of the first scenario (scenario ``i`` uses ``seed + i``).
        scenarios: Scenarios run.
        failures: The scenarios that broke the contract (empty: all held).
        counts: How often each kind of step and check ran (approvals, denials, nested
            approvals, interrupts by kind, steers accepted, save/loads...).
    """

    seed: int
    scenarios: int = 0
    failures: list[ContractFailure] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        """Whether every scenario kept the contract."""
        return not self.failures


class Broken(AssertionError):
    """A guarantee that does not hold (the message names it)."""


class Scenario:
    """The shared state of one scenario: its random generator, tools and bookkeeping."""

    def __init__(self, seed: int, make_agent: AgentFactory, counts: Counter[str]) -> None:
        self.rng = random.Random(seed)
        self.make_agent = make_agent
        self.counts = counts
        self.nested = self.rng.random() < 0.5
        self.trace: list[str] = []
        self.ran: Counter[str] = Counter()  # tag -> executions
        self.notes: dict[str, list[str]] = {}
        self.approved: set[str] = set()
        self.edited: set[str] = set()
        self.denied: set[str] = set()
        self.danger_tags: set[str] = set()
        self.tags = 0
        self.closing = False
        self.block_tool_at = -1  # the tool start (counted in this step) that blocks
        self.tool_starts = 0
        self.tool_blocked = anyio.Event()
        self.on_tool_start: Callable[[int], None] | None = None  # the other paths' drivers
        self.steers: list[str] = []  # accepted
        self.refused_steers: list[str] = []
        self.models: dict[str, ChatModel] = {
            "outer": FunctionModel(self._answer_fn("outer"), stream=True, chunks_per_block=3),
            "helper": FunctionModel(self._answer_fn("helper"), stream=True, chunks_per_block=3),
        }

    # -- tools -------------------------------------------------------------------------
    def toolkit(self, owner: str) -> Toolkit:
        toolkit = Toolkit()

        async def work(tag: str) -> str:
            """Do some work."""
            await self._execute(tag, "")
            return f"worked {tag}"

        async def danger(tag: str, note: str = "") -> str:
            """Do something that needs a human's approval."""
            await self._execute(tag, note)
            return f"danger {tag} {note}".strip()

        toolkit.register_tool_function(work)
        toolkit.register_tool_function(danger, requires_approval=True)
        return toolkit

    async def _execute(self, tag: str, note: str) -> None:
        self.ran[tag] += 1
        self.notes.setdefault(tag, []).append(note)
        index = self.tool_starts
        self.tool_starts += 1
        if self.on_tool_start is not None:
            self.on_tool_start(index)
        if index == self.block_tool_at:  # the step's interrupt lands while this tool runs
            self.tool_blocked.set()
            await anyio.sleep_forever()

    # -- models ------------------------------------------------------------------------
    def _tag(self, owner: str) -> str:
        self.tags += 1
        return f"{owner[0]}{self.tags}"

    def _answer_fn(self, owner: str) -> Callable[[list[Msg], RequestInfo], ScriptItem]:
        def answer(messages: list[Msg], info: RequestInfo) -> ScriptItem:
            # Tool turns since the last user text: the longer a run, the likelier it ends.
            turns = 0
            for msg in reversed(messages):
                if msg.role == "user" and msg.get_blocks("text"):
                    break
                turns += msg.role == "assistant"
            rng = self.rng
            if self.closing or rng.random() < 0.3 + 0.25 * turns:
                return [text(f"{owner} answer {rng.randrange(1000)} with some words")]
            names = ["work", "danger"]
            if owner == "outer" and self.nested:
                names.append("helper")
            calls: list[ContentBlock] = []
            for _ in range(rng.choice((1, 1, 2, 2, 3))):
                name = rng.choice(names)
                tag = self._tag(owner)
                kind = rng.random()
                # Repeated ids: within the turn ("dup"), across turns ("call_0"), or fresh.
                call_id = "dup" if kind < 0.1 else "call_0" if kind < 0.2 else None
                if name == "helper":
                    calls.append(tool_use(name, call_id, task=f"task {tag}"))
                    continue
                if name == "danger":
                    self.danger_tags.add(tag)
                calls.append(tool_use(name, call_id, tag=tag))
            if rng.random() < 0.5:
                calls.insert(0, text(f"{owner} will call {len(calls)} tools"))
            return calls

        return answer

    # -- agents ------------------------------------------------------------------------
    async def build(self) -> tuple[ReActAgent[Any, Any], ReActAgent[Any, Any] | None]:
        helper = None
        outer_tools = self.toolkit("outer")
        if self.nested:
            helper = await made(
                self.make_agent("helper", self.models["helper"], self.toolkit("helper"))
            )
            outer_tools.register_tool(helper.as_tool())
        outer = await made(self.make_agent("outer", self.models["outer"], outer_tools))
        return outer, helper


async def made(
    agent: ReActAgent[DepsT, OutT] | Awaitable[ReActAgent[DepsT, OutT]],
) -> ReActAgent[DepsT, OutT]:
    if isinstance(agent, ReActAgent):
        return agent
    return await agent


def check_guarantee(ok: bool, guarantee: int, message: str) -> None:
    if not ok:
        raise Broken(f"guarantee {guarantee} broken: {message}")


def result_texts(messages: list[Msg]) -> list[str]:
    return [b["text"] for m in messages if m.role == "user" for b in m.get_blocks("text")]


async def check_agent(agent: ReActAgent[DepsT, OutT], s: Scenario) -> None:
    """Guarantees 1-3 and 5 on one agent's memory and state."""
    messages = await agent.memory.get_memory()
    pending = [c["id"] for c in agent.conversation.pending]
    try:
        check_memory_invariant(messages, pending)
    except Exception as exc:  # MemoryInvariantError: say which guarantee
        raise Broken(f"guarantee 1 broken ({agent.name}): {exc}") from exc
    for msg in messages:  # ids unique within each turn (a result answers one call)
        ids = [b["id"] for b in msg.get_blocks("tool_use")]
        check_guarantee(
            len(ids) == len(set(ids)), 4, f"{agent.name}: repeated call ids in one turn {ids}"
        )
    shown = [c["id"] for c in agent.pending_tool_calls]
    check_guarantee(len(shown) == len(set(shown)), 4, f"{agent.name}: repeated pending ids {shown}")
    state = agent.state_dict()
    try:
        wire = json.dumps(state)
    except (TypeError, ValueError) as exc:
        raise Broken(f"guarantee 2 broken ({agent.name}): state is not JSON: {exc}") from exc
    fresh = await made(s.make_agent(agent.name, s.models[agent.name], s.toolkit(agent.name)))
    fresh.load_state_dict(json.loads(wire))
    check_guarantee(
        fresh.state_dict() == state, 2, f"{agent.name}: the state changed in a JSON round trip"
    )
    check_guarantee(
        fresh.pending_tool_calls == agent.pending_tool_calls,
        2,
        f"{agent.name}: pending calls changed in a JSON round trip",
    )


def check_runs(s: Scenario, cut: bool, decided: dict[str, str]) -> None:
    """Guarantee 3: approved calls ran once, denied and undecided ones never."""
    for tag, n in s.ran.items():
        check_guarantee(n <= 1, 3, f"call {tag} ran {n} times")
    for tag in s.danger_tags - s.approved:
        check_guarantee(
            s.ran[tag] == 0, 3, f"call {tag} ran without an approval ({sorted(s.denied)=})"
        )
    for tag in s.edited:
        check_guarantee(
            s.notes.get(tag, ["edited"])[-1] == "edited", 3, f"{tag} ran without its new input"
        )
    for tag, how in decided.items():
        if how == "approved" and not cut:
            check_guarantee(s.ran[tag] == 1, 3, f"approved call {tag} ran {s.ran[tag]} times")


async def _step(
    s: Scenario,
    agent: ReActAgent[DepsT, OutT],
    work: Callable[..., Awaitable[object]],
    *args: object,
    **kwargs: object,
) -> bool:
    """Run one step with a random interrupt and steer armed; return whether it was cut."""
    rng = s.rng
    s.tool_starts = 0
    s.tool_blocked = anyio.Event()
    s.block_tool_at = -1
    mode = rng.choice(("none", "none", "event", "stream", "tool"))
    interrupt_at = rng.randrange(12) if mode in ("event", "stream") else -1
    if mode == "tool":
        s.block_tool_at = rng.randrange(3)
    steer_at = rng.randrange(12) if rng.random() < 0.3 else -1
    seen = {"events": 0, "deltas": 0}
    cut = [False]
    steer_text = f"steer {rng.randrange(10**6)}"

    async with anyio.create_task_group() as tg:

        async def steer() -> None:
            try:
                outcome = await agent.steer(steer_text)
            except StateError:  # no live run: refused, so never delivered
                s.refused_steers.append(steer_text)
                return
            s.steers.append(steer_text)
            s.counts[f"steer {outcome}"] += 1

        def listen(event: AgentEvent) -> None:
            n = seen["events"]
            seen["events"] += 1
            if n == steer_at:
                tg.start_soon(steer)
            if mode == "event" and n == interrupt_at and agent.is_replying:
                cut[0] = True
                s.counts[f"interrupt at {event.type}"] += 1
                tg.start_soon(agent.interrupt)
            if mode == "stream" and isinstance(event, TextDelta):
                if seen["deltas"] == interrupt_at % 4:
                    cut[0] = True
                    s.counts["interrupt while streaming"] += 1
                    tg.start_soon(agent.interrupt)
                seen["deltas"] += 1

        async def cut_tool() -> None:
            await s.tool_blocked.wait()
            cut[0] = True
            s.counts["interrupt during a tool"] += 1
            await agent.interrupt()

        agent.add_event_listener(listen)
        try:
            watcher = anyio.CancelScope()

            async def watch() -> None:
                with watcher:
                    await cut_tool()

            tg.start_soon(watch)
            await work(*args, **kwargs)
        finally:
            agent.remove_event_listener(listen)
            watcher.cancel()
    return cut[0]


def verdict(s: Scenario, call: PendingView) -> tuple[Verdict, str]:
    """A random decision on a pending call, and what it means for the call's tag."""
    tag = str(call.input.get("tag", ""))
    draw = s.rng.random()
    if draw < 0.35:
        return True, "approved"
    if draw < 0.5:
        s.edited.add(tag)
        return Decision(True, input={"tag": tag, "note": "edited"}), "approved"
    if draw < 0.7:
        return False, "denied"
    if draw < 0.85:
        return "not now", "denied"
    return Decision(False, reason="no"), "denied"


def tag_of(call: CallInfo) -> str:
    """The scenario tag a contract tool call carries (``""`` when it has none)."""
    return str(call["input"].get("tag", ""))


def record_decisions(s: Scenario, decided: dict[str, str]) -> None:
    """Add each decided tag to the scenario's approved or denied set."""
    for tag, how in decided.items():
        (s.approved if how == "approved" else s.denied).add(tag)


def check_steers_stored(s: Scenario, stored: str) -> None:
    """Guarantee 5: every accepted steer is in ``stored`` exactly once, a refused one never."""
    for steer in s.steers:
        n = stored.count(steer)
        check_guarantee(n == 1, 5, f"accepted steer {steer!r} is in memory {n} times")
    for steer in s.refused_steers:
        check_guarantee(steer not in stored, 5, f"refused steer {steer!r} was stored")
    s.counts["steers checked"] += len(s.steers)


async def _check_agents(
    s: Scenario, outer: ReActAgent[Any, Any], helper: ReActAgent[Any, Any] | None
) -> None:
    """Check the outer agent and its helper (if any) against the contract."""
    for agent in (outer, helper):
        if agent is not None:
            await check_agent(agent, s)


async def _save_load(
    s: Scenario, outer: ReActAgent[Any, Any], step: int, ids: list[str]
) -> tuple[ReActAgent[Any, Any], ReActAgent[Any, Any] | None]:
    """Save ``outer``, load the state into freshly built agents and return those."""
    pending = outer.pending_tool_calls
    state = json.loads(json.dumps(outer.state_dict()))
    outer, helper = await s.build()
    outer.load_state_dict(state)
    check_guarantee(outer.pending_tool_calls == pending, 2, "pending calls lost in save/load")
    s.counts["save/load"] += 1
    s.trace.append(f"step {step}: save/load with {ids} pending")
    return outer, helper


async def _settle_pause(
    s: Scenario,
    outer: ReActAgent[Any, Any],
    step: int,
    action: float,
    pending: list[CallInfo],
    decided: dict[str, str],
) -> bool:
    """Resume a paused run by ``action``: cancel the calls, send a new task, or decide some."""
    ids = [c["id"] for c in pending]
    if action < 0.3:
        s.trace.append(f"step {step}: interrupt_pending()")
        s.counts["interrupt_pending"] += 1
        cut = await _step(s, outer, outer.interrupt_pending)
        for c in pending:
            decided[tag_of(c)] = "denied"
        return cut
    if action < 0.38:
        s.trace.append(f"step {step}: new message with {ids} pending")
        s.counts["new message while paused"] += 1
        for c in pending:
            decided[tag_of(c)] = "denied"
        return await _step(s, outer, outer.run, f"new task {step}")
    approvals: dict[str, Verdict] = {}
    chosen = [c for c in pending if s.rng.random() < 0.7] or pending[:1]
    for c in chosen:
        decision, how = verdict(s, PendingView(c["input"]))
        approvals[c["id"]] = decision
        decided[tag_of(c)] = how
        s.counts[f"{how}{' nested' if '/' in c['id'] else ''}"] += 1
    s.trace.append(f"step {step}: run(approvals={approvals!r})")
    return await _step(s, outer, outer.run, approvals=approvals)


async def _close(
    s: Scenario, outer: ReActAgent[Any, Any], helper: ReActAgent[Any, Any] | None
) -> None:
    """Deny what still waits, then one last run; every accepted steer is in memory."""
    s.closing = True
    for _ in range(4):
        pending = outer.pending_tool_calls
        if not pending:
            break
        s.trace.append(f"close: deny {[c['id'] for c in pending]}")
        for c in pending:
            s.denied.add(tag_of(c))
        await outer.run(approvals={c["id"]: False for c in pending})
        await _check_agents(s, outer, helper)
        check_runs(s, False, {})
    check_guarantee(
        not outer.pending_tool_calls, 3, "denying every pending call left calls pending"
    )
    s.trace.append("close: run('bye')")
    await outer.run("bye")
    await _check_agents(s, outer, helper)
    check_runs(s, False, {})
    check_steers_stored(s, "\n".join(result_texts(await outer.memory.get_memory())))


async def _run_scenario(s: Scenario) -> None:
    """Play one scenario: random steps, each checked against the contract, then the close."""
    rng = s.rng
    outer, helper = await s.build()
    for step in range(rng.randint(2, 6)):
        decided: dict[str, str] = {}
        pending = outer.pending_tool_calls
        if not pending:
            s.trace.append(f"step {step}: run('task {step}')")
            cut = await _step(s, outer, outer.run, f"task {step}")
        else:
            ids = [c["id"] for c in pending]
            check_guarantee(len(ids) == len(set(ids)), 4, f"pending ids repeat: {ids}")
            action = rng.random()
            if action < 0.15:  # save, load into fresh agents, then go on with them
                outer, helper = await _save_load(s, outer, step, ids)
                continue
            if action < 0.22:
                s.trace.append(f"step {step}: interrupt() while paused")
                check_guarantee(
                    await outer.interrupt() is False, 6, "interrupt() with no reply said True"
                )
                s.counts["interrupt while paused"] += 1
                continue
            cut = await _settle_pause(s, outer, step, action, pending, decided)
            record_decisions(s, decided)
        s.trace[-1] += " [cut]" if cut else ""
        await _check_agents(s, outer, helper)
        check_runs(s, cut, decided)
    await _close(s, outer, helper)


class PendingView:
    """A pending call as ``verdict`` reads it: its input."""

    def __init__(self, tool_input: Mapping[str, object]) -> None:
        self.input: dict[str, object] = dict(tool_input)


async def check_contracts(
    make_agent: AgentFactory | None = None,
    *,
    scenarios: int = 200,
    seed: int | None = None,
    scenario_timeout: float = 10.0,
    raise_on_failure: bool = True,
) -> ContractReport:
    """Run seeded, randomized scenarios against agents built by ``make_agent``.

    After every step of every scenario it checks the guarantees of docs/contracts.md:
    memory valid (every tool call has exactly one result, the state survives a JSON round
    trip), each approved call ran exactly once and a denied one never, ids unique, an
    interrupt with no reply running is a no-op, an accepted steer stored exactly once.

    Args:
        make_agent: ``make_agent(name, model, toolkit)`` builds the agent under test with
            the given model and toolkit (sync or async). Default: a plain ``ReActAgent``.
        scenarios: How many scenarios to run.
        seed: The first scenario's seed (scenario ``i`` uses ``seed + i``); None draws one.
        scenario_timeout: Seconds one scenario may take before it counts as hung.
        raise_on_failure: Raise ``AssertionError`` naming the failures (and their seeds)
            instead of only returning them in the report.

    Returns:
        The report; failures are also printed to stderr with the seed that replays them.

    Raises:
        AssertionError: when a scenario broke the contract and ``raise_on_failure`` is set.
    """
    factory = make_agent or default_agent
    report = ContractReport(seed=first_seed(seed))
    for i in range(scenarios):
        scenario = Scenario(report.seed + i, factory, report.counts)
        await run_guarded(report, i, scenario, _run_scenario(scenario), scenario_timeout)
    return finish_report(report, "check_contracts", raise_on_failure)


def first_seed(seed: int | None) -> int:
    """``seed``, or a fresh one."""
    return seed if seed is not None else random.SystemRandom().randrange(2**31)


async def run_guarded(
    report: ContractReport,
    index: int,
    scenario: Scenario,
    work: Awaitable[None],
    limit: float,
    suite: str = "check_contracts",
) -> None:
    """Run one scenario's ``work``; record how it broke the contract, if it did."""
    seed = report.seed + index
    try:
        with anyio.fail_after(limit):
            await work
    except TimeoutError:
        hung = "a scenario hung (an interrupt or a resume never returned)"
        report.failures.append(ContractFailure(index, seed, hung, tuple(scenario.trace), suite))
    except Exception as exc:  # Broken, or the library raising where it must not
        message = str(exc) if isinstance(exc, Broken) else f"{type(exc).__name__}: {exc}"
        report.failures.append(ContractFailure(index, seed, message, tuple(scenario.trace), suite))
    report.scenarios += 1
    if scenario.nested:
        report.counts["nested scenarios"] += 1


def finish_report(report: ContractReport, suite: str, raise_on_failure: bool) -> ContractReport:
    """Print the failures with their seeds; raise when asked to."""
    if report.failures:
        print(
            f"agentkit contracts ({suite}): {len(report.failures)} of {report.scenarios} "
            f"scenarios failed (seed {report.seed})",
            file=sys.stderr,
        )
        for failure in report.failures[:5]:
            print(failure, file=sys.stderr)
        if raise_on_failure:
            raise AssertionError(
                f"{len(report.failures)} of {report.scenarios} scenarios broke the contract "
                f"(seed {report.seed}); first: {report.failures[0]}"
            )
    return report

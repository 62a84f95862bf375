"""The conversation: what an agent keeps between runs, and what ``state_dict()`` saves.

``Conversation`` holds memory plus the few things that outlive a run: tool calls waiting
for approval, messages observed while the agent was busy (deferred), and the paused
structured reply (its output type and the iterations it used). The loop steps read and
change it through its public attributes; the agent serializes it.

Nested approvals: a tool call can wait *because calls inside it wait* (an agent used as
a tool whose own run paused for approval). Such a call is pending like any other, and the
conversation keeps a ``NestedWait`` for it: the inner calls (shown with the ids
``outer/inner``) and the state the tool needs to resume them. ``route`` splits the
decisions of ``run(approvals=...)`` into the agent's own calls and the nested ones; a
nested call is re-invoked with a ``NestedResume`` (read by the tool through
``nested_resume``) and its tool hands the decisions to the agent holding the calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from agentkit.agent._state import SCHEMA_VERSION, migrate_state, parse_agent_state, store
from agentkit.events import CallInfo
from agentkit.exceptions import StateError, UsageError

if TYPE_CHECKING:
    from agentkit.agent._limits import UsageLimits
    from agentkit.agent._prompt_caching import CachePrefix
    from agentkit.agent._state import Run
    from agentkit.agent._structured import OutputPlan
    from agentkit.memory import Memory
    from agentkit.messages import Msg, ToolUseBlock

__all__ = [
    "NESTED_APPROVAL",
    "CallInfo",
    "CheckedState",
    "Conversation",
    "Decision",
    "NestedResume",
    "NestedWait",
    "Verdict",
    "as_decision",
    "describe_call",
    "nested_resume",
    "nested_wait",
    "resume_scope",
]

NESTED_APPROVAL = "nested_approval"
"""``ToolResponse.metadata["error"]`` of a call that waits on approvals inside it."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's decision on a call waiting for approval.

    Attributes:
        approved: Run the call (True) or deny it (False).
        reason: Why it was denied (the model is told); ignored when approved.
        input: Arguments that replace the model's when approving (a JSON object). Memory
            keeps the call as the model made it; the tool runs with these.
    """

    approved: bool
    reason: str | None = None
    input: dict[str, Any] | None = None


Verdict: TypeAlias = "bool | str | Decision"
"""A decision in ``approvals={id: ...}``: True, False, a denial's reason, or a ``Decision``."""


def as_decision(call_id: str, verdict: object) -> Decision:
    """The ``Decision`` a verdict means (a string is a denial's reason).

    Raises:
        UsageError: for a verdict of another type, or a ``Decision`` with a bad ``input``.
    """
    if isinstance(verdict, Decision):
        if verdict.input is not None and not isinstance(verdict.input, dict):
            raise UsageError(f"Decision.input for {call_id!r} must be a dict of arguments")
        if verdict.input is not None and not verdict.approved:
            raise UsageError(f"Decision.input for {call_id!r} is only for an approval")
        return verdict
    if isinstance(verdict, bool):
        return Decision(verdict)
    if isinstance(verdict, str):
        return Decision(False, reason=verdict)
    raise UsageError(f"approval for {call_id!r} must be True, False, a reason or a Decision")


@dataclass(frozen=True, slots=True)
class NestedWait:
    """A pending call that waits on calls inside it (an agent used as a tool).

    Attributes:
        calls: The inner calls waiting, their ids relative to the inner agent (an inner
            id may itself be nested: ``"c7/c9"``).
        state: What the tool needs to resume them (the inner agent's ``state_dict()``),
            saved with the outer agent's state.
    """

    calls: tuple[CallInfo, ...]
    state: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The JSON form saved in the outer agent's state."""
        return {"calls": [dict(c) for c in self.calls], "state": self.state}


@dataclass(frozen=True, slots=True)
class NestedResume:
    """What the re-invoked call of a ``NestedWait`` must do (see ``nested_resume``).

    Attributes:
        call_id: The outer call being resumed.
        wait: Its ``NestedWait``.
        approvals: Decisions for the inner calls, by inner id (routed on, at any depth).
        cancel: Set when the outer call itself was denied: cancel the inner run and answer
            the call as denied.
    """

    call_id: str
    wait: NestedWait
    approvals: dict[str, Verdict] = field(default_factory=dict)
    cancel: Decision | None = None


_RESUMING: ContextVar[NestedResume | None] = ContextVar("agentkit_nested_resume", default=None)


class resume_scope:  # lower case: used like a function, as ``contextlib.suppress``
    """Run a tool call (or an inner agent, with None) under ``resume``.

    A class rather than a ``contextmanager`` generator: every tool call of every turn enters
    one, and the generator's machinery costs twice the calls.
    """

    __slots__ = ("_resume", "_token")

    def __init__(self, resume: NestedResume | None) -> None:
        self._resume = resume
        self._token: Token[NestedResume | None] | None = None

    def __enter__(self) -> None:
        self._token = _RESUMING.set(self._resume)

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        _RESUMING.reset(self._token)


def nested_resume(call_id: str) -> NestedResume | None:
    """The ``NestedResume`` of the call ``call_id`` being run, if it is one."""
    resume = _RESUMING.get()
    return resume if resume is not None and resume.call_id == call_id else None


def nested_wait(metadata: Mapping[str, object] | None) -> NestedWait | None:
    """The ``NestedWait`` a tool's final response asks for (None: an ordinary result)."""
    if not metadata or metadata.get("error") != NESTED_APPROVAL:
        return None
    return _parse_wait(metadata, "nested approval")


def _parse_wait(raw: Mapping[str, object], where: str) -> NestedWait:
    calls, state = raw.get("calls"), raw.get("state", {})
    if not isinstance(calls, list) or not calls or not isinstance(state, dict):
        raise StateError(f"{where} needs a non-empty 'calls' list and a 'state' dict")
    infos: list[CallInfo] = []
    for c in calls:
        ok = isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str)
        if not ok or not isinstance(c.get("input"), dict):
            raise StateError(f"{where}: each call needs an 'id', a 'name' and an 'input' dict")
        infos.append({"id": c["id"], "name": c["name"], "input": dict(c["input"])})
    return NestedWait(tuple(infos), state)


def describe_call(call: ToolUseBlock) -> CallInfo:
    """The ``{"id", "name", "input"}`` form of a call shown to users (JSON-safe)."""
    return {"id": call["id"], "name": call["name"], "input": json.loads(json.dumps(call["input"]))}


class Conversation:
    """Memory and the state that outlives one run.

    Attributes:
        memory: The conversation memory.
        pending: Tool calls stored in memory and waiting for a human's approval.
        deferred: Messages observed while a run was in progress or calls were pending;
            stored once neither holds.
        paused_output: The structured answer a reply paused for approval asks for.
        paused_output_name: Its qualified name (kept across save/load; the class itself
            is never imported from a saved state).
        iteration: Model calls already made by the reply paused for approval.
        paused_limits: The ``UsageLimits`` of the reply paused for approval (its resume
            runs under them unless given others).
        cache_prefix: The cacheable start (tools, system prompt) of the conversation's last
            request that asked for prompt caching (not saved: see ``PromptCaching``).
        session_versions: The session versions this conversation was loaded at or last
            saved as, by (store key, session id): what a session store checks a save
            against (not saved; a copied agent starts a conversation of its own, untracked).
    """

    __slots__ = (
        "_deferred",
        "_nested",
        "_pending",
        "cache_prefix",
        "iteration",
        "memory",
        "paused_limits",
        "paused_output",
        "paused_output_name",
        "session_versions",
    )

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        # The lists exist only while they hold something: an idle conversation (the
        # common case, thousands per process in a chat service) pays for neither.
        self._pending: list[ToolUseBlock] | None = None
        self._deferred: list[Msg] | None = None
        self._nested: dict[str, NestedWait] | None = None  # pending calls waiting inside
        self.paused_output: OutputPlan | None = None
        self.paused_output_name: str | None = None
        self.paused_limits: UsageLimits | None = None
        self.session_versions: dict[tuple[str, str], int] = {}
        self.iteration = 0
        self.cache_prefix: CachePrefix | None = None

    @property
    def pending(self) -> list[ToolUseBlock]:
        """Tool calls stored in memory and waiting for a human's approval (a live list)."""
        if self._pending is None:
            self._pending = []
        return self._pending

    @pending.setter
    def pending(self, value: list[ToolUseBlock]) -> None:
        self._pending = value or None
        if self._nested:  # a call no longer pending no longer waits inside either
            kept = {c["id"] for c in value}
            self._nested = {k: w for k, w in self._nested.items() if k in kept} or None

    @property
    def nested(self) -> Mapping[str, NestedWait]:
        """The pending calls that wait on calls inside them, by call id (read-only)."""
        return self._nested or {}

    def hold(self, calls: list[ToolUseBlock], waits: Mapping[str, NestedWait]) -> None:
        """Add calls set aside by a run to the pending ones (``waits``: their nested waits)."""
        if not calls:
            return
        self.pending.extend(calls)
        for call in calls:
            wait = waits.get(call["id"])
            if wait is not None:
                if self._nested is None:
                    self._nested = {}
                self._nested[call["id"]] = wait

    @property
    def deferred(self) -> list[Msg]:
        """Messages observed while a run was in progress or calls were pending (live)."""
        if self._deferred is None:
            self._deferred = []
        return self._deferred

    @deferred.setter
    def deferred(self, value: list[Msg]) -> None:
        self._deferred = value or None

    @property
    def has_deferred(self) -> bool:
        """Whether messages wait to be stored (without creating the list)."""
        return bool(self._deferred)

    @property
    def has_pending(self) -> bool:
        """Whether tool calls wait for approval (without creating the list)."""
        return bool(self._pending)

    def pending_calls(self) -> list[CallInfo]:
        """The calls waiting for a decision as ``{"id", "name", "input"}`` dicts.

        A call that waits on calls inside it is listed as those calls, with the ids
        ``"outer_id/inner_id"`` (at any depth).
        """
        nested = self._nested
        if not nested:
            return [describe_call(c) for c in self._pending or ()]
        calls: list[CallInfo] = []
        for c in self._pending or ():
            wait = nested.get(c["id"])
            if wait is None:
                calls.append(describe_call(c))
            else:
                calls.extend({**inner, "id": f"{c['id']}/{inner['id']}"} for inner in wait.calls)
        return calls

    def route(
        self, approvals: Mapping[str, Verdict]
    ) -> tuple[dict[str, Decision], dict[str, NestedResume]]:
        """Split decisions into this agent's calls and the calls waiting inside them.

        Returns:
            ``(decisions, resumes)``: a ``Decision`` per own call decided, and a
            ``NestedResume`` per nested call that has decisions for the calls inside it
            (or that was itself denied: ``cancel``).

        Raises:
            UsageError: for an id that is not waiting, a verdict of the wrong type, an
                approval of a call that waits on calls inside it (decide those), or a
                denial of such a call together with decisions inside it.
        """
        own = {c["id"] for c in self._pending or ()}
        nested = self.nested
        decisions: dict[str, Decision] = {}
        inner: dict[str, dict[str, Verdict]] = {}
        for call_id, verdict in approvals.items():
            decision = as_decision(call_id, verdict)
            if call_id in own and call_id not in nested:
                decisions[call_id] = decision
                continue
            if call_id in nested:
                if decision.approved:
                    ids = ", ".join(f"{call_id}/{c['id']}" for c in nested[call_id].calls)
                    raise UsageError(
                        f"tool call {call_id!r} waits on the calls inside it ({ids}): decide "
                        "those, or deny it to cancel them"
                    )
                decisions[call_id] = decision
                continue
            outer = next((k for k in nested if call_id.startswith(k + "/")), None)
            rest = call_id[len(outer) + 1 :] if outer is not None else ""
            found = _waits_for(nested[outer], rest) if outer is not None else None
            if outer is None or found is None:
                raise UsageError(f"tool call {call_id!r} is not waiting for approval")
            if found == "nested" and decision.approved:
                raise UsageError(
                    f"tool call {call_id!r} waits on the calls inside it: decide those, or "
                    "deny it to cancel them"
                )
            inner.setdefault(outer, {})[rest] = verdict
        resumes: dict[str, NestedResume] = {}
        for outer, decided in inner.items():
            # Checked here, at any depth, so the inner agent never refuses what we pass on.
            clash = next((k for k in decided for j in decided if j.startswith(k + "/")), None)
            if clash is not None:
                raise UsageError(
                    f"tool call {outer + '/' + clash!r} was denied: it cannot also have decisions "
                    "inside it"
                )
            if outer in decisions:
                raise UsageError(
                    f"tool call {outer!r} was denied: it cannot also have decisions inside it"
                )
            resumes[outer] = NestedResume(outer, nested[outer], decided)
        for call_id in [k for k in decisions if k in nested]:
            resumes[call_id] = NestedResume(call_id, nested[call_id], cancel=decisions.pop(call_id))
        return decisions, resumes

    def cancel_nested(self, text: str) -> dict[str, NestedResume]:
        """Resumes that cancel every nested wait, answering each call with ``text``.

        For a run that ends the pending calls without a decision (a new message): the
        calls inside them must not stay paused in the inner agents.
        """
        prefix = "The user denied this tool call: "  # denied_response adds it again
        reason = text.removeprefix(prefix)
        return {
            k: NestedResume(k, w, cancel=Decision(False, reason=reason))
            for k, w in self.nested.items()
        }

    def check_approvals(
        self,
        agent: str,
        approvals: Mapping[str, Verdict],
        output: OutputPlan | None,
    ) -> None:
        """Refuse approvals that cannot resume this conversation.

        Raises:
            UsageError: for an id that is not pending or a verdict of the wrong type (see
                :meth:`route`).
            StateError: when nothing is pending, or a paused structured reply loaded
                from a state needs its ``output_type`` again.
        """
        self.route(approvals)
        if not self._pending:  # a silent empty "reply" would hide the caller's mistake
            raise StateError(f"agent {agent!r} has no tool calls waiting for approval")
        if output is None and self.paused_output is None and self.paused_output_name:
            raise StateError(
                f"this state paused a structured reply for {self.paused_output_name}; pass "
                "output_type= to resume (model classes are not "
                "stored in a state)"
            )

    async def flush_deferred(self, run: Run | None = None) -> None:
        """Store the deferred messages, unless calls still wait for approval."""
        if self._deferred and not self._pending:
            msgs, self._deferred = self._deferred, None
            await store(self.memory, msgs, run)

    def pause(
        self,
        output: OutputPlan | None,
        iteration: int,
        limits: UsageLimits | None = None,
    ) -> None:
        """Record how a run ended: paused for approval (calls pending) or not."""
        paused = bool(self._pending)
        if not paused:
            self._pending = None  # emptied in place by the run: drop the list
        if not self._deferred:
            self._deferred = None
        self.paused_output = output if paused else None
        self.paused_output_name = None
        self.paused_limits = limits if paused else None
        self.iteration = iteration if paused else 0

    def _paused_name(self) -> str | None:
        """What a state names the paused answer's type by (``module.qualname``)."""
        if self.paused_output is not None:
            return self.paused_output.qualname()
        return self.paused_output_name

    def state_dict(self, name: str, iteration: int | None = None) -> dict[str, object]:
        """The JSON-safe state (``iteration``: a running reply's, else the paused one's)."""
        state: dict[str, object] = {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "memory": self.memory.state_dict(),
            "pending_tool_calls": [json.loads(json.dumps(c)) for c in self._pending or ()],
            "deferred_messages": [m.to_dict() for m in self._deferred or ()],
            "iteration": self.iteration if iteration is None else iteration,
            "structured_model": self._paused_name(),
        }
        if self._nested:  # written only when a call waits inside: most states have none
            state["nested_calls"] = {k: w.to_dict() for k, w in self._nested.items()}
        return state

    def load_state_dict(self, state: dict[str, object]) -> dict[str, object]:
        """Restore from :meth:`state_dict` (older schema versions are migrated first).

        Validated before anything changes (:meth:`check_state`); memory is loaded last, so
        a refused memory state leaves the conversation as it was.

        Returns:
            The migrated state (the caller restores the toolkit's part from it).

        Raises:
            StateError: on an unknown ``schema_version`` or inconsistent content.
        """
        return self.apply_state(self.check_state(state))

    @staticmethod
    def check_state(state: dict[str, object]) -> CheckedState:
        """Migrate and validate ``state``; nothing changes (the first half of a load).

        Raises:
            StateError: on an unknown ``schema_version`` or inconsistent content.
        """
        state = migrate_state(state)
        pending, deferred, iteration = parse_agent_state(state)
        nested = _parse_nested(state.get("nested_calls"), {c["id"] for c in pending})
        return CheckedState(state, pending, deferred, iteration, nested)

    def apply_state(self, checked: CheckedState) -> dict[str, object]:
        """Load a state :meth:`check_state` accepted (the second half of a load).

        Returns:
            The migrated state.

        Raises:
            StateError: if the memory refuses its part (nothing changed then).
        """
        state = checked.state
        memory_state = state["memory"]
        if not isinstance(memory_state, dict):  # parse_agent_state refused it already
            raise StateError("agent state needs a 'memory' dict")
        self.memory.load_state_dict(memory_state)
        pending = checked.pending
        self._nested = None
        self.pending = pending
        self._nested = checked.nested or None
        self.deferred = checked.deferred
        self.iteration = checked.iteration
        self.paused_output = None
        self.paused_limits = None  # configuration, not state: the agent's apply
        name = state.get("structured_model")
        self.paused_output_name = name if isinstance(name, str) and pending else None
        return state


@dataclass(frozen=True, slots=True)
class CheckedState:
    """An agent state :meth:`Conversation.check_state` migrated and validated.

    So that a caller loading parts of its own between the check and the load (the agent's
    toolkit) validates the state once, not once before and once inside the load: the
    memory's messages are the bulk of a state and each check parses them all.
    """

    state: dict[str, object]
    pending: list[ToolUseBlock]
    deferred: list[Msg]
    iteration: int
    nested: dict[str, NestedWait]


def _waits_for(wait: NestedWait, inner_id: str) -> str | None:
    """What ``inner_id`` names in ``wait``.

    "call" (a waiting call), "nested" (a call that waits on calls inside it) or None.
    """
    if any(c["id"] == inner_id for c in wait.calls):
        return "call"
    if any(c["id"].startswith(inner_id + "/") for c in wait.calls):
        return "nested"
    return None


def _parse_nested(raw: object, pending: set[str]) -> dict[str, NestedWait]:
    """The ``nested_calls`` of a state (absent: none), checked against the pending ids."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise StateError("'nested_calls' must be a dict of call id to nested wait")
    waits: dict[str, NestedWait] = {}
    for call_id, wait in raw.items():
        if call_id not in pending:
            raise StateError(f"'nested_calls' names {call_id!r}, which is not pending")
        if not isinstance(wait, dict):
            raise StateError(f"nested_calls[{call_id!r}] must be a dict")
        waits[call_id] = _parse_wait(wait, f"nested_calls[{call_id!r}]")
    return waits

"""The steps of a run: small frozen values, each handled by a function that returns the next.

A run is ``drive(setup, conv, run, first_step)``::

    Reason ──> Triage ──> Execute ──> Reason ... ──> Finish
      │                      └──────> Finish (calls pending / structured answer accepted)
      └──> Finish (a text answer)        Summarize ──> Finish (at max_iters)
    Settle (resume with approvals) ──> Execute ──> Reason ...

The driver checks the run's ``UsageLimits`` between steps: before ``Reason`` and
``Summarize`` (one more request), before ``Triage`` (the tokens and cost of the answer just
stored) and before ``Execute`` (the tool calls about to run). A limit turns the step into a
``Finish`` after answering every open call, so memory stays valid.

Each step leaves memory valid at every await; an interrupt may cut any of them, and
``loop.finalize`` repairs what the cut left open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from agentkit.messages import Msg

if TYPE_CHECKING:
    from agentkit.agent._conversation import Verdict

__all__ = ["Execute", "Finish", "Reason", "Settle", "Step", "Summarize", "Triage"]


@dataclass(frozen=True, slots=True)
class Reason:
    """Call the model once (``force_tool``: a tool it must call)."""

    force_tool: str | None = None
    kind: Literal["reason"] = "reason"


@dataclass(frozen=True, slots=True)
class Summarize:
    """At ``max_iters``: one last model call without tools, for a summary."""

    kind: Literal["summarize"] = "summarize"


@dataclass(frozen=True, slots=True)
class Triage:
    """Sort the calls of the stored answer ``assistant``: answer, set aside, or run."""

    assistant: Msg
    kind: Literal["triage"] = "triage"


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the batch's calls ``indexes`` and store every result.

    ``assistant`` is the turn the calls belong to (None when resuming approvals, whose turn
    was stored by an earlier run).
    """

    indexes: tuple[int, ...]
    assistant: Msg | None = None
    kind: Literal["execute"] = "execute"


@dataclass(frozen=True, slots=True)
class Settle:
    """Resume: settle the pending calls decided in ``approvals``."""

    approvals: tuple[tuple[str, Verdict], ...]
    kind: Literal["settle"] = "settle"


@dataclass(frozen=True, slots=True)
class Finish:
    """The run is over; ``reply`` is what it returns."""

    reply: Msg
    kind: Literal["finish"] = "finish"


Step: TypeAlias = Reason | Summarize | Triage | Execute | Settle | Finish
"""Every step of a run (a tagged union: ``match`` on the class or on ``step.kind``)."""

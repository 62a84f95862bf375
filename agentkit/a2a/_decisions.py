"""The client's decision on calls waiting for approval, read from an A2A message.

A task in ``TASK_STATE_INPUT_REQUIRED`` waits on the calls listed in its status message
(a data part ``{"pendingApprovals": [{"id", "name", "input"}]}``). The client answers with
a message in the same task holding either

* a data part ``{"approvals": {"<call id>": true | false | "<reason>" | {...}}}`` (a reason
  denies the call and tells the model why; an object ``{"approved": bool, "reason": str,
  "input": {...}}`` is a ``Decision``, ``input`` replacing the call's arguments; calls not
  named stay pending), or
* a text part: ``approve`` / ``yes`` (every pending call) or ``deny`` / ``no``, optionally
  ``deny: <reason>``.
"""

from __future__ import annotations

from collections.abc import Collection

from a2a.types.a2a_pb2 import Message
from google.protobuf.json_format import MessageToDict

from agentkit.agent import Decision

__all__ = ["DECISION_HELP", "DecisionError", "parse_decision"]

DECISION_HELP = (
    'answer in this task with a data part {"approvals": {"<call id>": true | false | '
    '"<reason>" | {"approved": true, "input": {...}}}}, or the text "approve" or "deny" '
    '(or "deny: <reason>")'
)
_YES = {"approve", "approved", "yes", "y", "ok"}
_NO = {"deny", "denied", "no", "n", "reject"}


class DecisionError(ValueError):
    """The message names a call that is not pending, or a verdict of the wrong type."""


def parse_decision(
    message: Message, pending: Collection[str]
) -> dict[str, bool | str | Decision] | None:
    """The approvals in ``message`` for the ``pending`` call ids, or None if it holds none.

    Raises:
        DecisionError: for an unknown call id or a verdict that is not a bool or a string.
    """
    for part in message.parts:
        if part.WhichOneof("content") != "data":
            continue
        data = MessageToDict(part.data)
        if not isinstance(data, dict) or "approvals" not in data:
            continue
        approvals = data["approvals"]
        if not isinstance(approvals, dict):
            raise DecisionError('"approvals" must be an object {call id: verdict}')
        out: dict[str, bool | str | Decision] = {}
        for call_id, verdict in approvals.items():
            if call_id not in pending:
                raise DecisionError(f"call {call_id!r} is not waiting for approval")
            if isinstance(verdict, dict):
                out[call_id] = _decision(call_id, verdict)
            elif isinstance(verdict, bool | str):
                out[call_id] = verdict
            else:
                raise DecisionError(
                    f"the verdict for {call_id!r} must be true, false, a reason or an object"
                )
        return out
    text = " ".join(p.text for p in message.parts if p.WhichOneof("content") == "text").strip()
    head, _, reason = text.partition(":")
    word = head.strip().lower().rstrip(".!")
    if word in _YES and not reason:
        approve: bool | str = True
        return dict.fromkeys(pending, approve)
    if word in _NO:
        denial: bool | str = reason.strip() or False
        return dict.fromkeys(pending, denial)
    return None


def _decision(call_id: str, verdict: dict[str, object]) -> Decision:
    """``{"approved": bool, "reason"?: str, "input"?: {...}}`` as a ``Decision``."""
    approved, reason, args = verdict.get("approved"), verdict.get("reason"), verdict.get("input")
    unknown = set(verdict) - {"approved", "reason", "input"}
    if not isinstance(approved, bool) or unknown:
        raise DecisionError(
            f'the verdict object for {call_id!r} needs "approved": true | false (and only '
            '"reason" and "input" besides)'
        )
    if reason is not None and not isinstance(reason, str):
        raise DecisionError(f'"reason" for {call_id!r} must be a string')
    if args is not None and (not isinstance(args, dict) or not approved):
        raise DecisionError(f'"input" for {call_id!r} must be an object, and only on an approval')
    return Decision(approved, reason=reason, input=args)

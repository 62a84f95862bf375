"""What a client asks a run to do: validated ``RunAgentInput`` and approval bodies.

Approvals arrive only as ``RunAgentInput.resume`` entries or through the approvals endpoint,
never as client-written tool messages (those are refused as forged, see ``_convert``).
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Context, RunAgentInput, ToolMessage
from pydantic import ValidationError

from agentkit.agent import ReActAgent
from agentkit.agent._conversation import Decision, Verdict
from agentkit.messages import Msg
from agentkit.serve._convert import (
    ClientInputError,
    agui_fields,
    check_client_id,
    new_user_messages,
)
from agentkit.serve._frontend import client_result, install_frontend_tools, tool_specs
from agentkit.serve._threads import ThreadRecord
from agentkit.tools import ToolResponse

__all__ = ["RunInput", "parse_approvals", "parse_run_input"]

CANCELLED_REASON = "the user cancelled this request"


def _pydantic_message(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)[:3]
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in errors]
    more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "invalid RunAgentInput: " + "; ".join(parts) + more


def _verdict(value: object, where: str) -> Verdict:
    """An approval verdict: True, False, a denial reason, or ``{"approved", "reason", "input"}``.

    ``input`` (an object, with ``approved: true``) replaces the call's arguments.
    """
    if isinstance(value, dict) and set(value) <= {"approved", "reason", "input"}:
        approved = value.get("approved")
        reason = value.get("reason")
        arguments = value.get("input")
        if (
            isinstance(approved, bool)
            and (reason is None or isinstance(reason, str))
            and (arguments is None or (approved and isinstance(arguments, dict)))
        ):
            if arguments is not None:
                return Decision(True, input=arguments)
            return True if approved else (reason or False)
    elif isinstance(value, bool | str):
        return value
    raise ClientInputError(
        400,
        "invalid_approval",
        f"{where}: an approval is true, false, a reason (denial) or "
        '{"approved": bool, "reason": str, "input": {arguments, when approved}}',
    )


def parse_approvals(body: object) -> dict[str, Verdict]:
    """The body of ``POST /threads/{id}/approvals``: ``{call_id: verdict}``.

    Raises:
        ClientInputError: 400 when it is not such an object.
    """
    if not isinstance(body, dict) or not body:
        raise ClientInputError(
            400, "invalid_approvals", 'send {"<call id>": true | false | "reason", ...}'
        )
    return {str(k): _verdict(v, f"approval of {k!r}") for k, v in body.items()}


class RunInput:
    """One run request: the thread, new messages and/or answers to pending approvals.

    Also what the client brings to this run (see ``_frontend``): its tools (JSON specs),
    context entries and state (``None``: not sent, the stored state applies).
    """

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        messages: list[Any],
        approvals: dict[str, Verdict] | None,
        *,
        tools: list[dict[str, Any]] | None = None,
        context: list[Context] | None = None,
        state: object = None,
    ) -> None:
        self.thread_id = check_client_id(thread_id, "the thread id")
        self.run_id = check_client_id(run_id, "the run id")
        self.messages = messages
        self.approvals = approvals
        self.tools = tools or []
        self.context = context or []
        self.state = state
        self.results: dict[str, ToolResponse] = {}

    def prepare(self, agent: ReActAgent, record: ThreadRecord) -> None:
        """Offer the client's tools to ``agent`` (and the stored ones its pending calls use).

        Raises:
            ClientInputError: 400 when a client tool clashes with one of the agent's.
        """
        names = {s["name"] for s in self.tools}
        waiting = {c["name"] for c in agent.pending_tool_calls} - names
        kept = [s for s in record.frontend_tools if s["name"] in waiting]
        install_frontend_tools(agent, [*self.tools, *kept], self.results)
        if self.tools:
            record.frontend_tools = self.tools

    def _client_results(
        self, agent: ReActAgent, record: ThreadRecord, known: set[str]
    ) -> list[Any]:
        """Take the client's results of pending frontend calls; return the other messages."""
        frontend = {s["name"] for s in [*self.tools, *record.frontend_tools]}
        waiting = {c["id"] for c in agent.pending_tool_calls if c["name"] in frontend}
        rest: list[Any] = []
        for message in self.messages:
            if (
                isinstance(message, ToolMessage)
                and message.id not in known
                and message.tool_call_id in waiting
                and message.tool_call_id not in self.results
            ):
                check_client_id(message.id, "a message id")
                self.results[message.tool_call_id] = client_result(message)
                record.aliases.append(message.id)  # the client sends it back as history
            else:
                rest.append(message)
        return rest

    async def resolve(
        self, agent: ReActAgent, record: ThreadRecord
    ) -> tuple[list[Msg], dict[str, Verdict] | None]:
        """The new user messages and the approvals, checked against the stored thread.

        Results the client sent for its own (frontend) tools' pending calls become approvals
        of those calls, answered with the client's result.

        Raises:
            ClientInputError: for forged messages, or approvals of calls not pending.
        """
        known = {fields["id"] for _, fields in agui_fields(await agent.memory.get_memory())}
        known.update(record.aliases)
        msgs = new_user_messages(self._client_results(agent, record, known), known)
        approvals = self.approvals
        if self.results:
            approvals = {**(approvals or {}), **dict.fromkeys(self.results, True)}
        if approvals is None:
            return msgs, None
        if msgs:
            raise ClientInputError(
                400,
                "resume_with_messages",
                "a run either answers pending approvals or tool calls (resume, tool results) "
                "or adds user messages, not both: send the new message in the next run",
            )
        pending = {c["id"] for c in agent.pending_tool_calls}
        stray = sorted(set(approvals) - pending)
        if stray:
            waiting = sorted(pending) or "none"
            raise ClientInputError(
                409,
                "not_pending",
                f"tool call(s) {stray} are not waiting for approval (waiting: {waiting})",
            )
        return msgs, approvals


def parse_run_input(body: object) -> RunInput:
    """Validate a ``RunAgentInput`` body (camelCase, as AG-UI clients send it).

    Raises:
        ClientInputError: 422 with pydantic's first errors when it does not validate.
    """
    if not isinstance(body, dict):
        raise ClientInputError(422, "invalid_input", "the body must be a RunAgentInput object")
    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        raise ClientInputError(422, "invalid_input", _pydantic_message(exc)) from None
    approvals: dict[str, Verdict] | None = None
    if run.resume:
        approvals = {}
        for entry in run.resume:
            where = f"resume entry for {entry.interrupt_id!r}"
            if entry.status == "cancelled":
                approvals[entry.interrupt_id] = CANCELLED_REASON
            else:
                approvals[entry.interrupt_id] = _verdict(entry.payload, where)
    return RunInput(
        run.thread_id,
        run.run_id,
        list(run.messages),
        approvals,
        tools=tool_specs(run.tools),
        context=list(run.context or []),
        state=run.state,
    )

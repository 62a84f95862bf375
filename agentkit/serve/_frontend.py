"""What an AG-UI client brings to a run: frontend tools, context, and shared state.

* ``RunAgentInput.tools`` are *frontend tools*: the client declares them and runs them. The
  model is offered them like the agent's own tools; a call to one is announced to the
  client (``TOOL_CALL_START/ARGS/END``) and set aside, exactly like a call waiting for
  approval, so the run ends (outcome ``success``: it is the client's turn, not an approval
  interrupt). The client runs the tool and sends its result as a ``ToolMessage`` (with the
  call's ``toolCallId``) in the next run's ``messages``; the server accepts a tool message
  only for a call of a frontend tool that is waiting for its result, and stores the result
  where the tool's own would be (memory stays valid: one result per call). The tools of a
  run are kept with the thread, so a result still finds its tool after a restart.
* ``RunAgentInput.context`` entries are appended to the agent's instructions for that run
  only (labelled as information supplied by the client).
* ``RunAgentInput.state`` is the shared state: kept with the thread (a run whose input has
  no ``state`` starts from the stored one), sent back as a ``STATE_SNAPSHOT`` right after
  the opening ``MESSAGES_SNAPSHOT`` and again at the end when the run changed it; tools
  read and change it through :func:`current_state`.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

from ag_ui.core import Context, Tool, ToolMessage

from agentkit.agent import ReActAgent
from agentkit.messages import ToolUseBlock
from agentkit.serve._convert import ClientInputError, message_text
from agentkit.tools import Tool as AgentkitTool
from agentkit.tools import ToolContext, ToolResponse

__all__ = [
    "FrontendTool",
    "client_result",
    "current_state",
    "install_frontend_tools",
    "instructions_with_context",
    "tool_specs",
]

MAX_TOOLS = 64
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
NO_RESULT_TEXT = "The client sent no result for this call."

_STATE: contextvars.ContextVar[object] = contextvars.ContextVar(
    "agentkit_serve_state", default=None
)


def current_state() -> Any:
    """The shared AG-UI state of the thread whose run is executing this code.

    The client's ``RunAgentInput.state`` (or the thread's stored state), usually a dict: a
    tool may change it in place; the server sends the changed state to the client
    (``STATE_SNAPSHOT``) when the run ends and stores it with the thread. None outside a
    served run.
    """
    return _STATE.get()


def set_current_state(value: object) -> None:
    """Make ``value`` the state :func:`current_state` returns in this run (server side)."""
    _STATE.set(value)


class FrontendTool(AgentkitTool):
    """A tool the client declared (``RunAgentInput.tools``): the client runs it.

    Registered as requiring approval, so the loop sets every call aside and the run ends;
    "approving" a call with the result the client sent (``results``) answers it.

    Args:
        spec: ``{"name", "description", "parameters"}`` (AG-UI ``Tool``, JSON form).
        results: Client results by call id, filled by the server before it resumes.
    """

    def __init__(self, spec: dict[str, Any], results: dict[str, ToolResponse]) -> None:
        super().__init__(
            spec["name"],
            spec.get("description") or "",
            spec.get("parameters") or dict(_EMPTY_OBJECT),
            requires_approval=True,
        )
        self.results = results

    async def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Without a call id there is no client result to give."""
        yield ToolResponse.error(NO_RESULT_TEXT)

    def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Answer with the result the client sent for this call."""
        return self._answer(context.call_id)

    async def _answer(self, call_id: str) -> AsyncIterator[ToolResponse]:
        result = self.results.pop(call_id, None)
        yield result if result is not None else ToolResponse.error(NO_RESULT_TEXT)


def tool_specs(tools: Sequence[Tool] | None) -> list[dict[str, Any]]:
    """The client's tool declarations as JSON specs, checked.

    Raises:
        ClientInputError: 400 for too many tools, a bad or repeated name, or parameters
            that are not a valid JSON object schema (or use a pattern that cannot be matched
            in linear time).
    """
    specs: list[dict[str, Any]] = []
    if len(tools or ()) > MAX_TOOLS:
        raise ClientInputError(400, "too_many_tools", f"at most {MAX_TOOLS} client tools")
    for tool in tools or ():
        if not _NAME.fullmatch(tool.name) or any(s["name"] == tool.name for s in specs):
            raise ClientInputError(
                400, "invalid_tool", f"client tool name {tool.name[:80]!r} is invalid or repeats"
            )
        parameters = tool.parameters if tool.parameters is not None else dict(_EMPTY_OBJECT)
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            raise ClientInputError(
                400,
                "invalid_tool",
                f"client tool {tool.name!r}: parameters must be a JSON schema of an object",
            )
        spec = {"name": tool.name, "description": tool.description, "parameters": parameters}
        _check_schema(spec)
        specs.append(spec)
    return specs


def _check_schema(spec: dict[str, Any]) -> None:
    """Compile the client's schema now, as the toolkit will (patterns on RE2 included)."""
    try:
        FrontendTool(spec, {}).get_validator()
    except Exception as exc:  # jsonschema SchemaError: a broken or unusable schema
        reason = str(getattr(exc, "message", exc)).strip().splitlines()[0][:300]
        raise ClientInputError(
            400, "invalid_tool", f"client tool {spec['name']!r}: unusable parameters: {reason}"
        ) from None


def install_frontend_tools(
    agent: ReActAgent, specs: Sequence[dict[str, Any]], results: dict[str, ToolResponse]
) -> None:
    """Offer the client's tools to ``agent`` for this run (on a toolkit of its own).

    Raises:
        ClientInputError: 400 when a client tool has the name of one of the agent's tools.
    """
    if not specs:
        return
    toolkit = agent.toolkit.copy()  # copy-on-write: the factory's toolkit stays untouched
    for spec in specs:
        if toolkit.get_tool(spec["name"]) is not None:
            raise ClientInputError(
                400,
                "tool_conflict",
                f"client tool {spec['name']!r} has the name of one of the agent's own tools",
            )
        toolkit.register_tool(FrontendTool(spec, results))
    agent.toolkit = toolkit
    names = {s["name"] for s in specs}
    policy = agent.approval_policy
    if policy is not None:  # a policy approves server tools; a client's call always waits

        def frontend_waits(call: ToolUseBlock) -> bool | Awaitable[bool]:
            return False if call["name"] in names else policy(call)

        agent.approval_policy = frontend_waits


def instructions_with_context(prompt: str, context: Sequence[Context] | None) -> str:
    """``prompt`` followed by the run's client context (if any)."""
    if not context:
        return prompt
    lines = [f"- {c.description}: {c.value}" for c in context]
    return prompt + "\n\nContext supplied by the client for this request:\n" + "\n".join(lines)


def client_result(message: ToolMessage) -> ToolResponse:
    """The ``ToolResponse`` of a client's ``ToolMessage`` (text only).

    Raises:
        ClientInputError: 400 for content parts other than text.
    """
    text = message_text(message, "tool message")
    if message.error:
        return ToolResponse.error(f"{message.error}\n{text}".strip())
    return ToolResponse.text(text)

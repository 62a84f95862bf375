"""The agentkit exception tree.

Every exception agentkit raises on purpose derives from one root, so callers can catch
``AgentkitError`` at an API boundary without swallowing unrelated bugs::

    AgentkitError
    ├── MessageValidationError (also ValueError)   malformed Msg / block input
    ├── MissingDependencyError (also ImportError)  an optional extra is not installed
    ├── ModelError                                  a model call failed
    │   ├── ModelAPIError                           provider answered with an error (5xx, 4xx...)
    │   │   ├── RateLimitError                      429 / overloaded, after retries
    │   │   ├── AuthenticationError                 401 / 403
    │   │   ├── BadRequestError                     400 / 404 / 422 (request rejected)
    │   │   ├── ContextWindowError                  prompt longer than the context window
    │   │   └── UnsupportedContentError             a block type this provider cannot take
    │   ├── ModelConnectionError                    network failure / timeout, after retries
    │   ├── ModelResponseError                      the provider's answer could not be parsed
    │   ├── ScriptExhaustedError                    a test double ran out of scripted replies
    │   └── ModelRequestsBlocked                    a real model called while requests are blocked
    ├── ToolError                                   programming errors around tools
    │   ├── ToolRegistrationError                   a function cannot be described / bad name
    │   └── ToolGroupError                          unknown or invalid tool group
    ├── MCPError                                    MCP client problems
    │   ├── MCPConnectionError                      cannot start / reach / keep the server
    │   │   └── MCPCallInterrupted                  the link dropped mid-call; not sent again
    │   └── MCPProtocolError                        the server broke the protocol
    ├── StateError                                  a state dict cannot be loaded
    │   ├── SessionConflictError                    a session save based on a stale version
    │   └── SessionError                            a session store cannot read/write its storage
    ├── MemoryInvariantError (also ValueError)      a tool call without exactly one result
    ├── StructuredOutputError                       no valid structured answer after retries
    ├── AgentBusyError                              a second reply started on a busy agent
    ├── UsageError (also ValueError, TypeError)     the API was called the wrong way
    ├── UsageLimitExceeded                          a run's UsageLimits were reached (opt-in)
    ├── ToolRetry                                   raised BY a tool: the model should retry
    └── ApprovalRequired                            raised BY a tool: a human must approve

Tool-side failures (unknown tool, invalid arguments, a tool raising, a timeout) are *not*
raised: the Toolkit turns them into error tool results so the model can correct itself.
``MaxItersExceeded`` does not exist on purpose: hitting ``max_iters`` is a normal outcome
(the agent summarises and returns). Cancellation (``anyio.get_cancelled_exc_class()``) is
never caught and converted into one of these.
"""

from __future__ import annotations

__all__ = [
    "AgentBusyError",
    "AgentkitError",
    "ApprovalRequired",
    "AuthenticationError",
    "BadRequestError",
    "ContextWindowError",
    "MCPCallInterrupted",
    "MCPConnectionError",
    "MCPError",
    "MCPProtocolError",
    "MemoryInvariantError",
    "MessageValidationError",
    "MissingDependencyError",
    "ModelAPIError",
    "ModelConnectionError",
    "ModelError",
    "ModelRequestsBlocked",
    "ModelResponseError",
    "RateLimitError",
    "ScriptExhaustedError",
    "SessionConflictError",
    "SessionError",
    "StateError",
    "StructuredOutputError",
    "ToolError",
    "ToolGroupError",
    "ToolRegistrationError",
    "ToolRetry",
    "UnsupportedContentError",
    "UsageError",
    "UsageLimitExceeded",
]


class AgentkitError(Exception):
    """Root of every exception agentkit raises on purpose."""


class MessageValidationError(AgentkitError, ValueError):
    """A message or content block is malformed.

    Attributes:
        field: Dotted path of the offending field, e.g. ``content[2].id``.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"invalid message field {field!r}: {problem}")


class MissingDependencyError(AgentkitError, ImportError):
    """A feature needs a package that is not installed; the message names the extra."""


class ModelError(AgentkitError):
    """A model call failed.

    Attributes:
        provider: Provider name ("openai", "anthropic", "scripted"...), if known.
        status_code: HTTP status code, if the failure came from an HTTP answer.
    """

    def __init__(
        self, message: str, *, provider: str | None = None, status_code: int | None = None
    ) -> None:
        self.provider = provider
        self.status_code = status_code
        super().__init__(message)


class ModelAPIError(ModelError):
    """The provider answered with an error status."""


class RateLimitError(ModelAPIError):
    """Rate limited (HTTP 429 or overloaded) and retries were exhausted."""


class AuthenticationError(ModelAPIError):
    """The API key is missing, invalid or lacks permission (HTTP 401/403)."""


class BadRequestError(ModelAPIError):
    """The provider rejected the request (HTTP 400/404/422)."""


class ContextWindowError(BadRequestError):
    """The prompt does not fit in the model's context window."""


class UnsupportedContentError(BadRequestError):
    """The conversation holds a content block the provider does not accept where it sits.

    Raised before anything is sent (an audio clip to a provider without audio input, a PDF
    in a Chat Completions tool result...): a block is never dropped silently.
    """


class ModelConnectionError(ModelError):
    """The provider could not be reached, or the request timed out, after retries."""


class ModelResponseError(ModelError):
    """The provider's answer could not be understood."""


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was called more times than it has scripted responses."""


class ModelRequestsBlocked(ModelError):
    """A real model was asked for an answer inside ``agentkit.testing.block_model_requests``."""


class ToolError(AgentkitError):
    """A programming error around tools (never raised for a tool call's own failure)."""


class ToolRegistrationError(ToolError):
    """A function cannot be registered as a tool (undescribable signature, name clash...)."""


class ToolGroupError(ToolError):
    """A tool group does not exist or cannot be created/removed."""


class MCPError(AgentkitError):
    """An MCP client problem."""


class MCPConnectionError(MCPError):
    """The MCP server cannot be started, reached or kept connected."""


class MCPCallInterrupted(MCPConnectionError):
    """The connection dropped while a tool call was running, and the call was not sent again.

    The server may or may not have run it. agentkit sends an interrupted call again (once, on
    a new session) only when the server marks the tool ``readOnlyHint`` or ``idempotentHint``
    (a repeat then has no second effect); any other call ends with this error, so a lost
    answer is never turned into a silent second effect. A toolkit hands it to the model as
    the call's error result.

    Attributes:
        server: The MCP client's name.
        tool: The server-side tool name.
        reason: What broke the connection.
        call_id: The ``tool_use`` id of the call when it came through a Toolkit, else None.
    """

    def __init__(self, server: str, tool: str, reason: str, call_id: str | None = None) -> None:
        super().__init__(server, tool, reason, call_id)
        self.server = server
        self.tool = tool
        self.reason = reason
        self.call_id = call_id

    def __str__(self) -> str:
        call = f" (call {self.call_id})" if self.call_id else ""
        return (
            f"MCP server {self.server!r}: the connection was lost during the call to "
            f"{self.tool!r}{call} ({self.reason}). The server may or may not have run it; it "
            "was not sent again because the server does not mark the tool read-only or "
            "idempotent. Check whether it took effect before calling it again."
        )


class MCPProtocolError(MCPError):
    """The MCP server answered something the protocol does not allow."""


class StateError(AgentkitError):
    """A state dict cannot be loaded (wrong schema version, corrupt content)."""


class SessionConflictError(StateError):
    """A session save was based on a version another writer has replaced since.

    Nothing was written: the newer state in the store is kept. Load the session again,
    redo the change on the fresh state, and save again.

    Attributes:
        session_id: The session.
        expected: The version the save was based on (0: "the session did not exist").
        actual: The version in the store when the save was refused (0: it does not exist).
    """

    def __init__(self, session_id: str, expected: int, actual: int, backend: str = "") -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        where = f"{backend} session" if backend else "session"
        super().__init__(
            f"{where} {session_id!r} changed since it was loaded (loaded version {expected}, "
            f"stored version {actual}): load it again and redo the change"
        )


class SessionError(StateError):
    """A session store cannot read or write its storage.

    A corrupt SQLite database, a session path that is a folder, a permission problem, an
    unreachable server: the backend's own exception is kept as ``__cause__``.
    """


class MemoryInvariantError(AgentkitError, ValueError):
    """A conversation breaks the tool-call/tool-result invariant.

    Attributes:
        call_id: The offending tool call id.
    """

    def __init__(self, call_id: str, problem: str) -> None:
        self.call_id = call_id
        self.problem = problem
        super().__init__(f"tool call {call_id!r}: {problem}")


class StructuredOutputError(AgentkitError):
    """The model gave no valid structured answer within the allowed retries."""


class AgentBusyError(AgentkitError):
    """A reply was started while the same agent is already replying."""


class UsageError(AgentkitError, ValueError, TypeError):
    """The API was used the wrong way (a bad argument, a call at the wrong time).

    Also a ``ValueError`` and a ``TypeError``, so ``except`` clauses written for the
    builtins agentkit raised before keep working.
    """


class UsageLimitExceeded(AgentkitError):
    """A run reached one of its ``UsageLimits`` and the caller asked for an exception.

    Raised only with ``UsageLimits(..., raise_on_limit=True)``; by default the run stops
    cleanly with ``stop_reason="usage_limit"``. Memory is repaired before this is raised
    (every tool call answered).

    Attributes:
        limit: The name of the limit reached (``"max_requests"``, ``"max_cost"``...).
        result: The run's result (``stop_reason="usage_limit"``), when the run was started
            with ``agent.run``; None for ``await agent(...)``.
    """

    def __init__(self, limit: str, message: str, result: object = None) -> None:
        self.limit = limit
        self.result = result
        super().__init__(message)


class ToolRetry(AgentkitError):
    """Raised by a tool to have the model try again.

    The model sees ``message`` as the call's error result and may call the tool again
    with better arguments. Retries are bounded per tool and run
    (``ReActAgent(max_tool_retries=...)``); past the bound the call is answered as a plain
    failure.

    Args:
        message: What the model should do differently ("use an ISO date").
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ApprovalRequired(AgentkitError):
    """Raised by a tool to have its call wait for a human's approval.

    The call becomes a pending approval exactly like a tool registered with
    ``requires_approval=True``; once approved, the tool is invoked again from the start
    with ``ctx.tool_call_approved`` True. Raise it before any side effect: whatever the
    tool did before raising is done again on the second invocation.

    Args:
        reason: Why approval is needed (shown to the human, not to the model).
    """

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "this tool call needs approval")

"""The agentkit exception tree.

Every exception agentkit raises on purpose derives from one root, so callers can catch
``AgentkitError`` at an API boundary without swallowing unrelated bugs::

    AgentkitError
    ├── MessageValidationError (also ValueError)   malformed Msg / block input
    ├── ModelError                                  a model call failed
    │   ├── ModelAPIError                           provider answered with an error (5xx, 4xx...)
    │   │   ├── RateLimitError                      429 / overloaded, after retries
    │   │   ├── AuthenticationError                 401 / 403
    │   │   ├── BadRequestError                     400 / 404 / 422 (request rejected)
    │   │   └── ContextWindowError                  prompt longer than the context window
    │   ├── ModelConnectionError                    network failure / timeout, after retries
    │   ├── ModelResponseError                      the provider's answer could not be parsed
    │   └── ScriptExhaustedError                    a test double ran out of scripted replies
    ├── ToolError                                   programming errors around tools
    │   ├── ToolRegistrationError                   a function cannot be described / bad name
    │   └── ToolGroupError                          unknown or invalid tool group
    ├── MCPError                                    MCP client problems
    │   ├── MCPConnectionError                      cannot start / reach / keep the server
    │   └── MCPProtocolError                        the server broke the protocol
    ├── StateError                                  a state dict cannot be loaded
    │   └── SessionConflictError                    a session save based on a stale version
    ├── MemoryInvariantError (also ValueError)      a tool call without exactly one result
    ├── StructuredOutputError                       no valid structured answer after retries
    └── AgentBusyError                              a second reply started on a busy agent

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
    "AuthenticationError",
    "BadRequestError",
    "ContextWindowError",
    "MCPConnectionError",
    "MCPError",
    "MCPProtocolError",
    "MemoryInvariantError",
    "MessageValidationError",
    "ModelAPIError",
    "ModelConnectionError",
    "ModelError",
    "ModelResponseError",
    "RateLimitError",
    "ScriptExhaustedError",
    "SessionConflictError",
    "StateError",
    "StructuredOutputError",
    "ToolError",
    "ToolGroupError",
    "ToolRegistrationError",
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


class ModelConnectionError(ModelError):
    """The provider could not be reached, or the request timed out, after retries."""


class ModelResponseError(ModelError):
    """The provider's answer could not be understood."""


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was called more times than it has scripted responses."""


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

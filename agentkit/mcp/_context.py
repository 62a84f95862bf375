"""``MCPContext``: what a tool served over MCP can ask of the client that called it.

A served tool reaches it through its ``ToolContext``::

    @toolkit.tool
    async def summarize(ctx: ToolContext, path: str) -> str:
        mcp = MCPContext.of(ctx)          # None when the call did not come over MCP
        if mcp is not None:
            await mcp.log("info", f"summarizing {path}")
            return await mcp.sample(f"Summarize {path}", max_tokens=200)
        return "not served over MCP"

Per protocol era (negotiated per connection):

- ``log``: handshake era (2025-11-25 and older): filtered by the client's
  ``logging/setLevel``; 2026-07-28: sent only if the request carried a log level in
  ``_meta`` (the SDK filters).
- ``elicit`` / ``sample`` / ``list_roots``: mid-call requests in the handshake era; in
  2026-07-28 input-required rounds: the call ends with the question, the client answers
  and retries the call, and the tool body runs again from the start with the question
  returning the answer. Work done before a question therefore runs once per round: ask
  first, act after (or keep it idempotent). ``gather`` asks several questions in one round.
  A question needing a capability the client did not declare (2026-07-28) ends the request
  with ``-32021`` (``MissingRequiredClientCapabilityError``).
- ``progress`` (``ToolContext.report_progress``): ``notifications/progress`` in both eras
  when the client sent a progress token.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Awaitable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, TypeVar

from agentkit.exceptions import MCPError
from agentkit.mcp._input_rounds import InputRequired, InputRounds

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp_types import ElicitRequest

__all__ = ["LogLevel", "MCPContext", "handshake_era_api"]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_ORDER: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
T = TypeVar("T")
_CURRENT: contextvars.ContextVar[MCPContext | None] = contextvars.ContextVar(
    "agentkit_mcp_context", default=None
)


@contextmanager
def handshake_era_api() -> Iterator[None]:
    """The SDK flags these calls deprecated (2026-07-28); they are current in 2025-11-25."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


class MCPContext:
    """The MCP request behind one served tool call.

    Attributes:
        protocol_version: The negotiated protocol version.
        request_id: The JSON-RPC id of the ``tools/call`` request.
        progress_token: The client's progress token, if it asked for progress.
        meta: The request's ``_meta`` (trace context and other pass-through keys).
        missing_capability: Set when a question needed a client capability the client did
            not declare (2026-07-28): the request then ends with ``-32021`` naming it.
    """

    def __init__(
        self,
        request: ServerRequestContext,
        min_level: str | None,
        rounds: InputRounds | None = None,
    ) -> None:
        self._request = request
        self._min_level = min_level
        self.rounds = rounds if rounds is not None else InputRounds()
        self.protocol_version: str = request.protocol_version
        self.request_id = request.request_id
        meta = request.meta
        self.progress_token = meta.get("progressToken") if meta else None
        self.meta: Mapping[str, object] = dict(meta or {})
        self.missing_capability: dict[str, object] | None = None

    @staticmethod
    def of(ctx: object = None) -> MCPContext | None:
        """The MCP context of the running served call (``ctx``: its ``ToolContext``).

        Returns None when the call did not come over MCP. The context follows the call
        into worker threads and sub-tasks.
        """
        data = getattr(ctx, "data", None)
        return data if isinstance(data, MCPContext) else _CURRENT.get()

    @property
    def is_handshake_era(self) -> bool:
        """Whether mid-call server-to-client requests exist on this connection."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        return self.protocol_version not in MODERN_PROTOCOL_VERSIONS

    @property
    def client_capabilities(self) -> dict[str, object]:
        """What the client declared (``{"sampling": {}, "elicitation": {...}}``), as JSON.

        In 2026-07-28 these are the capabilities sent with this very request.
        """
        declared = self._request.session.client_capabilities
        if declared is None:
            return {}
        dumped: dict[str, object] = declared.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        return dumped

    def _require(self, what: str, declared: bool, required: dict[str, object]) -> None:
        """Record and raise when a question needs a capability the client did not declare.

        ``required`` is the missing capability as ``ClientCapabilities`` JSON.
        """
        if declared:
            return
        self.missing_capability = required
        raise MCPError(
            f"the client did not declare the {what} capability this request needs"
            f" (protocol {self.protocol_version})"
        )

    async def gather(self, questions: Mapping[str, Awaitable[T]]) -> dict[str, T]:
        """Ask several questions at once, named by the mapping's keys.

        ``questions`` holds un-awaited ``elicit``/``sample``/``list_roots`` calls. In
        2026-07-28 every unanswered one goes out in the same input-required round (the keys
        name them in ``inputRequests``); in the handshake era they are asked in order.

        Returns:
            The answers, by key.
        """
        answers: dict[str, T] = {}
        unanswered = False
        for key, question in questions.items():
            self.rounds.next_key = key
            try:
                answers[key] = await question
            except InputRequired:
                unanswered = True
            finally:
                self.rounds.next_key = None
        if unanswered:
            raise InputRequired("the client's answers are needed first")
        return answers

    async def log(self, level: LogLevel, data: object, *, logger: str | None = None) -> None:
        """Send a ``notifications/message`` log entry to the client (if its level allows)."""
        if self._min_level is not None and _ORDER.index(level) < _ORDER.index(self._min_level):
            return
        with handshake_era_api():
            await self._request.session.send_log_message(
                level, data, logger, related_request_id=self.request_id
            )

    async def sample(
        self,
        prompt: str,
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
    ) -> str:
        """Ask the client's model (``sampling/createMessage``); returns its text.

        Args:
            prompt: The user message to complete.
            max_tokens: The most tokens the client may sample.
            system_prompt: An optional system prompt.
            temperature: An optional sampling temperature.
            key: The question's name in the round's ``inputRequests`` (2026-07-28).

        Raises:
            MCPError: The client did not declare sampling (2026-07-28).
        """
        from mcp_types import (
            CreateMessageRequest,
            CreateMessageRequestParams,
            SamplingMessage,
            TextContent,
        )

        message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
        if self.is_handshake_era:
            with handshake_era_api():
                result = await self._request.session.create_message(
                    [message],
                    max_tokens=max_tokens,
                    system_prompt=system_prompt,
                    temperature=temperature,
                    related_request_id=self.request_id,
                )
        else:
            self._require("sampling", "sampling" in self.client_capabilities, {"sampling": {}})
            params = CreateMessageRequestParams(
                messages=[message],
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
            )
            result = self.rounds.ask(CreateMessageRequest(params=params), key)
        content: object = result.content  # one block, or a list when the model used tools
        blocks = content if isinstance(content, list) else [content]
        return "".join(getattr(b, "text", "") for b in blocks)

    async def elicit(
        self, message: str, schema: Mapping[str, object], *, key: str | None = None
    ) -> dict[str, object]:
        """Ask the client's user (form ``elicitation/create``).

        In the handshake era this is a mid-call ``elicitation/create`` request. In 2026-07-28
        it is an input-required round (see the module docstring): the first time, the call
        ends here and is retried with the client's answer, which this returns.

        Args:
            message: What to ask.
            schema: The form's JSON Schema (flat object of primitive properties).
            key: The question's name in the round's ``inputRequests`` (2026-07-28).

        Returns:
            ``{"action": "accept" | "decline" | "cancel", "content": {...} | None}``.

        Raises:
            MCPError: The client did not declare the elicitation capability (2026-07-28).
        """
        if self.is_handshake_era:
            result = await self._request.session.elicit_form(
                message, dict(schema), related_request_id=self.request_id
            )
        else:
            result = self.rounds.ask(self._elicit_request(message, schema), key)
        return {"action": result.action, "content": result.content}

    def _elicit_request(self, message: str, schema: Mapping[str, object]) -> ElicitRequest:
        from mcp_types import ElicitRequest, ElicitRequestFormParams

        capabilities = self._request.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        # A bare ``elicitation: {}`` means form support; url-only does not.
        form = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
        self._require("form elicitation", form, {"elicitation": {"form": {}}})
        params = ElicitRequestFormParams(message=message, requested_schema=dict(schema))
        return ElicitRequest(params=params)

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, object]]:
        """The client's roots (``roots/list``), as ``{"uri", "name"}`` dicts.

        Args:
            key: The question's name in the round's ``inputRequests`` (2026-07-28).

        Raises:
            MCPError: The client did not declare roots (2026-07-28).
        """
        from mcp_types import ListRootsRequest

        if self.is_handshake_era:
            with handshake_era_api():
                result = await self._request.session.list_roots()
        else:
            self._require("roots", "roots" in self.client_capabilities, {"roots": {}})
            result = self.rounds.ask(ListRootsRequest(), key)
        return [r.model_dump(mode="json", exclude_none=True) for r in result.roots]

    async def close_sse_stream(self) -> None:
        """Close this call's SSE stream now; the client resumes it (``Last-Event-ID``).

        A no-op without a resumable streamable-HTTP transport.
        """
        close = self._request.close_sse_stream
        if close is not None:
            await close()

    @contextmanager
    def activate(self) -> Iterator[MCPContext]:
        """Make this the context :meth:`of` finds while the call runs."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

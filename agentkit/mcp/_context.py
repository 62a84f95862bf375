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
- ``sample`` / ``list_roots``: mid-call requests in the handshake era; deprecated in
  2026-07-28 (SEP-2577): they raise ``MCPError``.
- ``elicit``: mid-call request in the handshake era; in 2026-07-28 an input-required
  result: the call ends with the question, the client answers and retries the call, and the
  tool body runs again from the start with ``elicit`` returning the answer. Work done before
  ``elicit`` therefore runs once per round: ask first, act after (or keep it idempotent).
- ``progress`` (``ToolContext.report_progress``): ``notifications/progress`` in both eras
  when the client sent a progress token.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from agentkit.exceptions import MCPError
from agentkit.mcp._input_rounds import InputRounds

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

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
        self.meta: Mapping[str, Any] = dict(meta or {})

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

    def _require_back_channel(self, what: str) -> None:
        if not self.is_handshake_era:
            raise MCPError(
                f"{what} during a tool call is not available at protocol {self.protocol_version}"
                " (deprecated there, SEP-2577); the client negotiated it"
            )

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
    ) -> str:
        """Ask the client's model (``sampling/createMessage``); returns its text."""
        from mcp_types import SamplingMessage, TextContent

        self._require_back_channel("sampling")
        message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
        with handshake_era_api():
            result = await self._request.session.create_message(
                [message],
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
                related_request_id=self.request_id,
            )
        content: Any = result.content  # one block, or a list when the model used tools
        blocks = content if isinstance(content, list) else [content]
        return "".join(getattr(b, "text", "") for b in blocks)

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> dict[str, object]:
        """Ask the client's user (form ``elicitation/create``).

        In the handshake era this is a mid-call ``elicitation/create`` request. In 2026-07-28
        it is an input-required round (see the module docstring): the first time, the call
        ends here and is retried with the client's answer, which this returns.

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
            result = self.rounds.elicit(self._elicit_request(message, schema))
        return {"action": result.action, "content": result.content}

    def _elicit_request(self, message: str, schema: Mapping[str, Any]) -> Any:
        from mcp_types import ElicitRequest, ElicitRequestFormParams

        capabilities = self._request.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        # A bare ``elicitation: {}`` means form support; url-only does not.
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            raise MCPError(
                "the client did not declare form elicitation, so this tool cannot ask its user"
            )
        params = ElicitRequestFormParams(message=message, requested_schema=dict(schema))
        return ElicitRequest(params=params)

    async def list_roots(self) -> list[dict[str, object]]:
        """The client's roots (``roots/list``), as ``{"uri", "name"}`` dicts."""
        self._require_back_channel("roots/list")
        with handshake_era_api():
            result = await self._request.session.list_roots()
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

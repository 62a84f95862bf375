"""``AnthropicChatModel``: Claude through the Anthropic Messages API.

Like the OpenAI adapter, requests go through the official ``anthropic.AsyncAnthropic``
client's low-level ``post`` with a pre-serialized body (its per-request body walk and typed
layer skipped), SDK retries off, and events parsed straight from JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from agentkit.exceptions import AuthenticationError, ModelResponseError
from agentkit.models._adapter import HTTPChatModel, PreparedCall, StreamMark, StreamState
from agentkit.models._anthropic_format import (
    AnthropicStreamState,
    WireBlock,
    format_messages,
    format_tool_choice,
    format_tools,
    mark_cache_points,
    parse_message,
)
from agentkit.models._base import ChatResponse, DeferredTools, ModelRequest, PromptCache
from agentkit.models._clients import ANTHROPIC, SDKClient
from agentkit.models._common import body_fields, closed_schema
from agentkit.models._http import RetryPolicy, loads_body, map_status_error
from agentkit.models._json import JSONObject, JSONValue
from agentkit.models._openai_audio import reject_audio_output

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["EXTENDED_CACHE_TTL_BETA", "AnthropicChatModel"]

EXTENDED_CACHE_TTL_BETA = "extended-cache-ttl-2025-04-11"
"""The beta the one-hour cache lifetime (``cache_control.ttl: "1h"``) was introduced under;
sent with such requests (harmless where the feature is generally available)."""


class AnthropicChatModel(HTTPChatModel):
    """A Claude model served by the Anthropic Messages API.

    Args:
        model_name: Model name, e.g. ``"claude-sonnet-4-5"``.
        api_key: API key; ``ANTHROPIC_API_KEY`` when None.
        base_url: Server URL; ``ANTHROPIC_BASE_URL`` or the Anthropic API when None.
        stream: Whether the agent streams this model's answers (``request_stream``).
        max_tokens: The answer's token limit (the API requires one).
        thinking: Extended thinking configuration, sent as is, e.g.
            ``{"type": "enabled", "budget_tokens": 2048}``. Thinking blocks come back with
            their signature and are sent back verbatim in later turns.
        client_kwargs: Extra ``anthropic.AsyncAnthropic`` arguments. Its ``max_retries`` is
            always 0: retries follow ``retry``.
        generate_kwargs: Extra body fields sent with every request (``temperature``,
            ``top_k``, ``metadata``...). Per-call keyword arguments override them.
        retry: The retry policy (default: 3 retries, 0.5 s doubling backoff with jitter).
        max_retries: Shortcut overriding ``retry.max_retries``.

    Prompt caching is asked per request (``settings["cache"]``, a ``PromptCache``; the
    ``PromptCaching`` capability sets it for an agent): ``cache_control`` breakpoints after
    the tools, the system prompt and the latest user turns. Off by default, as cache writes
    cost more than plain input.

    Example:
        >>> model = AnthropicChatModel("claude-sonnet-4-5", max_tokens=1024)
    """

    native_output = True

    provider = "anthropic"
    _path = "/v1/messages"
    sdk = ANTHROPIC
    client_class = "AsyncAnthropic"
    check_api_credentials: ClassVar[bool] = True
    """Check for an API key or token at construction (Bedrock and Vertex sign otherwise)."""
    native_tool_search: ClassVar[bool] = True
    """Send a request's ``deferred`` tools with ``defer_loading`` and loads as
    ``tool_reference`` blocks (the Claude API's tool search). Off on Bedrock and Vertex, where
    it is behind a platform beta: there the loading result's text carries the definitions."""
    beta_header: ClassVar[bool] = True
    """Ask for beta features with the ``anthropic-beta`` header (Bedrock takes none)."""

    def __init__(
        self,
        model_name: str,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        max_tokens: int = 4096,
        thinking: dict[str, Any] | None = None,
        client_kwargs: Mapping[str, object] | None = None,
        generate_kwargs: Mapping[str, object] | None = None,
        *,
        retry: RetryPolicy | None = None,
        max_retries: int | None = None,
    ) -> None:
        super().__init__(
            model_name,
            api_key=api_key,
            base_url=base_url,
            stream=stream,
            client_kwargs=client_kwargs,
            generate_kwargs=generate_kwargs,
            retry=retry,
            max_retries=max_retries,
        )
        self.max_tokens = max_tokens
        self.thinking = thinking
        self._prepare_client()

    def _make_client(self) -> SDKClient:
        client = super()._make_client()
        if not self.check_api_credentials:
            return client
        has_auth = any(getattr(client, k, None) for k in ("api_key", "auth_token", "credentials"))
        if not has_auth and "default_headers" not in self.client_kwargs:
            # Fail now with our error type rather than with the SDK's TypeError per request.
            raise AuthenticationError(
                "no Anthropic credentials: pass api_key= or set ANTHROPIC_API_KEY",
                provider=self.provider,
            )
        return client

    def format_request(
        self, request: ModelRequest, *, stream: bool | None = None
    ) -> dict[str, object]:
        """The Messages request body of a call (exactly what is sent).

        Leading system messages become ``system``; function tools become ``input_schema``
        tools and server tools are sent as given; ``tool_choice`` ``"required"`` is
        ``any``; ``parallel_tool_calls=False`` sets ``disable_parallel_tool_use``; a
        native-mode ``output`` goes through structured outputs (``output_config.format``, a
        ``json_schema``: the answer is JSON text, validated into
        ``metadata["structured_output"]``); ``cache`` (a ``PromptCache``) puts
        ``cache_control`` breakpoints in (see ``mark_cache_points``); ``deferred`` tools
        (``ToolSearch``) are sent with ``defer_loading: true`` after the others, and each
        tool result that loaded some becomes ``tool_reference`` blocks naming them.

        Args:
            request: The request.
            stream: Override ``self.stream``.

        Returns:
            The JSON body.
        """
        kwargs = body_fields(request.settings)
        parallel = kwargs.pop("parallel_tool_calls", None)
        cache = cast("PromptCache | None", kwargs.pop("cache", None))
        deferred = request.deferred if self.native_tool_search else None
        system, turns = format_messages(request.messages, _loads(deferred))
        body: dict[str, object] = {
            "model": self.model_name,
            "max_tokens": self.max_tokens,
            "messages": turns,
        }
        if system:
            body["system"] = system
        if self.thinking is not None:
            body["thinking"] = self.thinking
        body.update(self.generate_kwargs)
        body.update(kwargs)
        reject_audio_output(body, self.provider, "the Anthropic Messages API")
        structured = request.native_output
        if structured is not None:
            _add_output_format(body, structured)
        specs = format_tools(
            request.tools, request.builtin_tools, deferred.tools if deferred is not None else ()
        )
        if specs:
            _add_tools(body, specs, request.settings.get("tool_choice"), parallel)
        if cache is not None:
            mark_cache_points(body, cache)
        if self.stream if stream is None else stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    def _prepare(self, request: ModelRequest, *, stream: bool) -> PreparedCall:
        """The call, with the beta the one-hour cache needs (``ttl: "1h"`` marks)."""
        call = super()._prepare(request, stream=stream)
        cache = request.settings.get("cache")
        if self.beta_header and cache is not None and cache.get("ttl") == "1h":
            given = call.options.get("headers")
            headers = dict(given) if isinstance(given, Mapping) else {}
            betas = [b for b in str(headers.get("anthropic-beta", "")).split(",") if b]
            if EXTENDED_CACHE_TTL_BETA not in betas:
                headers["anthropic-beta"] = ",".join([*betas, EXTENDED_CACHE_TTL_BETA])
            call.options["headers"] = headers
        return call

    def _parse(
        self, data: JSONValue, status: int, elapsed: float, structured: type[BaseModel] | None
    ) -> ChatResponse:
        if not isinstance(data, dict) or data.get("type") == "error" or "content" not in data:
            if isinstance(data, dict) and "error" in data:
                raise map_status_error(self.provider, status, data, "error in a 200 answer")
            raise ModelResponseError(
                f"{self.provider}: unexpected response shape: {str(data)[:200]!r}",
                provider=self.provider,
            )
        return self._finish_stream(parse_message(data, elapsed), structured)

    def _new_state(self) -> StreamState:
        return AnthropicStreamState()

    def _check_event(self, event: str, data: bytes) -> JSONObject | StreamMark | None:
        payload = loads_body(self.provider, data)
        if not isinstance(payload, dict):
            return None
        kind = payload.get("type", event)
        if kind == "message_stop":
            return StreamMark.END
        if kind == "error":
            error = payload.get("error") or {}
            status = 529 if error.get("type") == "overloaded_error" else 500
            raise map_status_error(self.provider, status, payload, "error event in the stream")
        return payload


def _loads(deferred: DeferredTools | None) -> dict[str, tuple[str, ...]]:
    """The tool-search loads to send as ``tool_reference`` blocks, by tool result id."""
    loads: dict[str, tuple[str, ...]] = {}
    if deferred is not None:
        # Only tools sent as deferred can be referenced (the API refuses an unresolved
        # reference); a load whose tools are all gone keeps its text answer.
        known = {t.name for t in deferred.tools}
        for result_id, names in deferred.loads.items():
            kept = tuple(n for n in names if n in known)
            if kept:
                loads[result_id] = kept
    return loads


def _add_output_format(body: dict[str, object], structured: type[BaseModel]) -> None:
    """Ask for structured output: ``output_config.format`` with the closed JSON schema."""
    config = body.get("output_config")
    body["output_config"] = {
        **(config if isinstance(config, dict) else {}),
        "format": {"type": "json_schema", "schema": closed_schema(structured)},
    }


def _add_tools(
    body: dict[str, object], specs: list[WireBlock], tool_choice: str | None, parallel: object
) -> None:
    """Put the tool specs in, with the ``tool_choice`` the settings ask for (if any)."""
    body["tools"] = specs
    choice = format_tool_choice(tool_choice, None if parallel is None else bool(parallel))
    if choice is not None:
        body["tool_choice"] = choice

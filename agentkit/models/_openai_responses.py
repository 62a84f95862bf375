"""``OpenAIResponsesModel``: OpenAI's Responses API (``POST /v1/responses``).

The same lean request path as :class:`~agentkit.models.OpenAIChatModel`: the official
``openai.AsyncOpenAI`` client's low-level ``post`` with a body we serialize ourselves, SDK
retries off (:class:`~agentkit.models.RetryPolicy` retries), responses and SSE events parsed
straight from JSON.

State lives in agentkit's memory, not on OpenAI's servers: requests are sent with
``store=False`` and ``include=["reasoning.encrypted_content"]``, and every reasoning item
comes back as a ``thinking`` block holding its encrypted content, replayed verbatim on the
next request, so a reasoning model keeps its chain of thought across tool calls.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, cast

from agentkit.exceptions import ModelResponseError
from agentkit.models._adapter import HTTPChatModel, StreamState
from agentkit.models._base import ChatResponse, ModelRequest, PromptCache
from agentkit.models._caching import openai_cache_fields
from agentkit.models._clients import OPENAI
from agentkit.models._common import body_fields, json_schema_spec
from agentkit.models._http import (
    RetryPolicy,
    embedded_error_status,
    loads_body,
    map_status_error,
)
from agentkit.models._json import JSONObject, JSONValue
from agentkit.models._openai_audio import reject_audio_output
from agentkit.models._responses_format import (
    ClientSearch,
    ResponsesStreamState,
    client_search_calls,
    format_input,
    format_tool_choice,
    format_tools,
    function_tool,
    parse_response,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["OpenAIResponsesModel"]

_INCLUDE_REASONING = "reasoning.encrypted_content"


class OpenAIResponsesModel(HTTPChatModel):
    """A model served by the OpenAI Responses API (or a compatible server).

    Args:
        model_name: Model name, e.g. ``"gpt-5-mini"`` or ``"o4-mini"``.
        api_key: API key; ``OPENAI_API_KEY`` when None.
        base_url: Server URL; ``OPENAI_BASE_URL`` or the OpenAI API when None.
        stream: Whether the agent streams this model's answers (``request_stream``).
        reasoning: The ``reasoning`` request field, e.g. ``{"effort": "low", "summary":
            "auto"}`` (a summary makes the thinking blocks readable).
        store: Let OpenAI store the responses. Off by default: the conversation is kept in
            agentkit's memory and reasoning travels encrypted in it.
        client_kwargs: Extra ``openai.AsyncOpenAI`` arguments (``timeout``,
            ``default_headers``, ``http_client``...). Its ``max_retries`` is always 0:
            retries follow ``retry``.
        generate_kwargs: Extra body fields sent with every request (``temperature``,
            ``max_output_tokens``, ``text``...). Per-call keyword arguments override them.
        retry: The retry policy (default: 3 retries, 0.5 s doubling backoff with jitter).
        max_retries: Shortcut overriding ``retry.max_retries``.
        provider: Provider name reported in errors.
        native_tool_search: Send ``ToolSearch``'s search as the API's client-executed tool
            search (``gpt-5.4`` and later only): the search tool as ``{"type":
            "tool_search", "execution": "client"}``, the deferred tools with
            ``defer_loading: true`` (the same list on every request), the model's searches
            as ``tool_search_call`` items run by the agent, and each result as a
            ``tool_search_output`` item carrying the definitions it loaded. Off by default:
            the search is then a function tool whose result's text carries them.

    Example:
        >>> model = OpenAIResponsesModel("o4-mini", reasoning={"effort": "low"})
        >>> # response = await model.request(ModelRequest([Msg("user", "Hello", "user")]))
    """

    native_output = True

    provider = "openai"  # the same provider as Chat Completions (prices, telemetry)
    _path = "/responses"
    sdk = OPENAI
    client_class = "AsyncOpenAI"

    def __init__(
        self,
        model_name: str,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        reasoning: dict[str, Any] | None = None,
        store: bool = False,
        client_kwargs: Mapping[str, object] | None = None,
        generate_kwargs: Mapping[str, object] | None = None,
        *,
        retry: RetryPolicy | None = None,
        max_retries: int | None = None,
        provider: str = "openai",
        native_tool_search: bool = False,
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
        self.reasoning = reasoning
        self.store = store
        self.provider = provider
        self.native_tool_search = native_tool_search
        self._prepare_client()

    def format_request(
        self, request: ModelRequest, *, stream: bool | None = None
    ) -> dict[str, object]:
        """The Responses request body of a call (exactly what is sent).

        System messages stay in place in ``input``; function tools become Responses
        function tools and built-in tool specs (``{"type": "web_search"}``) pass through; a
        native-mode ``output`` becomes ``text.format`` (json_schema, strict when the schema
        allows it); ``parallel_tool_calls`` is sent only with tools. With
        ``native_tool_search`` and ``deferred`` tools (``ToolSearch``), the search tool goes
        as a client-executed ``tool_search``, the deferred tools after the others with
        ``defer_loading: true``, and the searches and their results as ``tool_search_call``
        and ``tool_search_output`` items (see ``ClientSearch``).

        Args:
            request: The request.
            stream: Override ``self.stream``.

        Returns:
            The JSON body.

        Raises:
            UnsupportedContentError: a block the Responses API cannot take where it sits.
        """
        kwargs = body_fields(request.settings)
        parallel = kwargs.pop("parallel_tool_calls", None)
        cache = openai_cache_fields(cast("PromptCache | None", kwargs.pop("cache", None)))
        search = self._client_search(request)
        body: dict[str, object] = {
            "model": self.model_name,
            "input": format_input(request.messages, search),
            "store": self.store,
        }
        if not self.store:
            # Without stored state, reasoning can only be replayed from its encrypted form.
            body["include"] = [_INCLUDE_REASONING]
        if self.reasoning is not None:
            body["reasoning"] = self.reasoning
        body.update(self.generate_kwargs)
        body.update(kwargs)
        body.update(cache)
        reject_audio_output(body, self.provider, "the OpenAI Responses API")
        if request.tools or request.builtin_tools:
            deferred = request.deferred.tools if search is not None and request.deferred else ()
            body["tools"] = format_tools(
                request.tools,
                request.builtin_tools,
                search=search.name if search is not None else None,
                deferred=deferred,
            )
            tool_choice = request.settings.get("tool_choice")
            if tool_choice is not None:
                body["tool_choice"] = format_tool_choice(tool_choice)
            if parallel is not None:
                body["parallel_tool_calls"] = bool(parallel)
        structured = request.native_output
        if structured is not None:
            given = body.get("text")
            text: dict[str, object] = dict(given) if isinstance(given, Mapping) else {}
            text["format"] = {"type": "json_schema", **json_schema_spec(structured)}
            body["text"] = text
        if self.stream if stream is None else stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    def _search_tool(self, request: ModelRequest) -> str | None:
        """The tool sent as the API's tool search in this request (None: no native search)."""
        deferred = request.deferred
        if not self.native_tool_search or deferred is None:
            return None
        # No search offered (another capability took it out): nothing to send as one.
        return deferred.search_tool if deferred.search_tool in request.tool_names else None

    def _client_search(self, request: ModelRequest) -> ClientSearch | None:
        """How this request's tool search goes on the wire (None: as a function tool)."""
        name = self._search_tool(request)
        if name is None or request.deferred is None:
            return None
        deferred = {t.name: t for t in request.deferred.tools}
        # Only deferred tools can be loaded (those offered are loaded already), each sent as
        # its ``tools`` entry is, so a load repeats the declared definition byte for byte.
        loads = {
            result_id: [function_tool(deferred[n], deferred=True) for n in names if n in deferred]
            for result_id, names in request.deferred.loads.items()
        }
        return ClientSearch(name, loads)

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """See ``HTTPChatModel._request`` (client tool searches as calls of the search tool)."""
        response = await super()._request(request)
        name = self._search_tool(request)
        return response if name is None else client_search_calls(response, name)

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        # The parser cannot know the search tool's name (the request's): the model's
        # ``tool_search_call`` items are turned into its calls here, chunk by chunk.
        chunks = super()._request_stream(request)
        name = self._search_tool(request)
        try:
            async for chunk in chunks:
                yield chunk if name is None else client_search_calls(chunk, name)
        finally:
            await chunks.aclose()

    def _parse(
        self, data: JSONValue, status: int, elapsed: float, structured: type[BaseModel] | None
    ) -> ChatResponse:
        if not isinstance(data, dict) or not isinstance(data.get("output"), list):
            if isinstance(data, dict) and data.get("error"):
                status = embedded_error_status(data)
                raise map_status_error(self.provider, status, data, "error in a 200 answer")
            raise ModelResponseError(
                f"{self.provider}: unexpected response shape: {str(data)[:200]!r}",
                provider=self.provider,
            )
        if data.get("status") == "failed":
            raise self._failed(data)
        return self._finish_stream(parse_response(data, elapsed), structured)

    def _failed(self, response: dict[str, Any]) -> Exception:
        error = response.get("error") or {}
        code = error.get("code") if isinstance(error, dict) else None
        status = 429 if code == "rate_limit_exceeded" else 500
        return map_status_error(
            self.provider, status, {"error": error}, "the response failed", kind=code
        )

    def _new_state(self) -> StreamState:
        return ResponsesStreamState()

    def _check_event(self, event: str, data: bytes) -> JSONObject | None:
        if data == b"[DONE]":  # not sent by OpenAI; some compatible servers do
            return None
        payload = loads_body(self.provider, data)
        if not isinstance(payload, dict):
            return None
        kind = payload.get("type", event)
        if kind == "error":
            limited = payload.get("code") == "rate_limit_exceeded"
            status = 429 if limited else embedded_error_status(payload)
            raise map_status_error(self.provider, status, payload, "error event in the stream")
        if kind == "response.failed":
            raise self._failed(payload.get("response") or {})
        return payload

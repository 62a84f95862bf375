"""``GoogleModel``: Gemini through the official ``google-genai`` SDK (Gemini API, Vertex AI).

Requests go through ``client.aio.models.generate_content`` / ``generate_content_stream``
(``POST .../models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``), the SDK's
own retries and automatic function calling off: the retry policy here is the only one, and
the agent runs the tools. Install with ``pip install 'agentkit[google]'``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

import anyio

from agentkit.exceptions import (
    AuthenticationError,
    BadRequestError,
    MissingDependencyError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
)
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest, ModelSettings
from agentkit.models._common import apply_structured_output
from agentkit.models._google_format import (
    GoogleStreamState,
    format_contents,
    format_tool_config,
    format_tools,
    use_cached_content,
)
from agentkit.models._http import RetryPolicy, broken_off, owned, send_with_retries
from agentkit.models._prices import fill_cost

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.genai import Client
    from google.genai.types import GenerateContentConfig, GenerateContentResponse
    from pydantic import BaseModel

    from agentkit.models._google_format import WireContent

__all__ = ["GoogleModel"]

_T = TypeVar("_T")

# ModelSettings keys and the GenerateContentConfig fields they set.
_SETTINGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_output_tokens",
    "stop": "stop_sequences",
    "seed": "seed",
}


class _StatusError(Exception):
    """An SDK ``APIError`` in the shape ``send_with_retries`` reads (status, headers, body)."""

    def __init__(self, status: int, response: object, body: object, message: str) -> None:
        super().__init__(message)
        self.status_code = status
        self.response = response if hasattr(response, "headers") else None
        self.body = body


class _ConnectionError(Exception):
    """The request did not reach the server or its answer broke off (retried)."""


def _sdk() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``google.genai``, its ``types`` and ``errors`` (the ``google`` extra)."""
    try:
        from google import genai
        from google.genai import errors, types
    except ImportError as err:
        raise MissingDependencyError(
            "GoogleModel needs 'google-genai': pip install 'agentkit[google]'", name="google.genai"
        ) from err
    return genai, types, errors


class GoogleModel(ChatModel):
    """A Gemini model served by the Gemini API or Vertex AI, through ``google-genai``.

    Args:
        model_name: The model, e.g. ``"gemini-2.5-flash"``.
        api_key: Gemini API key; ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` when None (read
            by the SDK).
        vertexai: Use Vertex AI (project, location and Google credentials) instead of
            the Gemini API.
        project: The Google Cloud project (Vertex AI); ``GOOGLE_CLOUD_PROJECT`` when None.
        location: The Vertex AI region; ``GOOGLE_CLOUD_LOCATION`` when None.
        credentials: google-auth credentials (Vertex AI); Application Default Credentials
            when None.
        base_url: Server URL (a proxy, a local test server); the SDK's default when None.
        stream: Whether the agent streams this model's answers (``request_stream``).
        thinking: ``thinking_config`` sent as is, e.g. ``{"include_thoughts": True,
            "thinking_budget": 1024}`` or ``{"thinking_level": "low"}``. Thought summaries
            come back as thinking blocks; thought signatures are kept on the blocks and
            sent back verbatim in later turns.
        generate_kwargs: Extra ``GenerateContentConfig`` fields sent with every request
            (``top_k``, ``safety_settings``, ``cached_content``...). Per-call settings
            override them.
        http_options: Extra ``types.HttpOptions`` fields (``headers``, ``api_version``:
            ``v1beta`` on the Gemini API unless given, the SDK's default on Vertex AI).
        retry: The retry policy (default: 3 retries, 0.5 s doubling backoff with jitter).
        max_retries: Shortcut overriding ``retry.max_retries``.

    Raises:
        MissingDependencyError: ``google-genai`` is not installed.
        AuthenticationError: no API key (Gemini API) or no project/location (Vertex AI).

    Example:
        >>> model = GoogleModel("gemini-2.5-flash", api_key="...")  # doctest: +SKIP
    """

    provider = "google"
    native_output = True

    def __init__(
        self,
        model_name: str,
        api_key: str | None = None,
        *,
        vertexai: bool = False,
        project: str | None = None,
        location: str | None = None,
        credentials: Credentials | None = None,
        base_url: str | None = None,
        stream: bool = True,
        thinking: Mapping[str, object] | None = None,
        generate_kwargs: Mapping[str, object] | None = None,
        http_options: Mapping[str, object] | None = None,
        retry: RetryPolicy | None = None,
        max_retries: int | None = None,
    ) -> None:
        super().__init__(model_name, stream=stream)
        if vertexai:
            self.provider = "google-vertex"
        self.vertexai = vertexai
        self.base_url = base_url
        self.thinking = dict(thinking) if thinking is not None else None
        self.generate_kwargs = dict(generate_kwargs or {})
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = RetryPolicy(max_retries, policy.initial_delay, policy.max_delay, policy.jitter)
        self.retry = policy
        genai, types, self._errors = _sdk()
        self._types = types
        options: dict[str, object] = dict(http_options or {})
        if base_url is not None:
            options["base_url"] = base_url
        options["retry_options"] = None  # ours only (the SDK's default is none, kept so)
        if not vertexai:
            # The version the API reference documents, with every feature used here (the
            # SDK's own default, ``v1``, may lag behind); ``http_options`` may change it.
            options.setdefault("api_version", "v1beta")
        if "httpx_async_client" not in options and "aiohttp_client" not in options:
            # One HTTP stack (httpx2, as the other adapters): without a client of its own
            # the SDK would switch to aiohttp whenever aiohttp happens to be installed.
            import httpx2

            self._own_http: httpx2.AsyncClient | None = httpx2.AsyncClient(timeout=None)
            options["httpx_async_client"] = self._own_http
        else:
            self._own_http = None
        kwargs: dict[str, object] = {"http_options": types.HttpOptions(**options)}
        if vertexai:
            kwargs.update(vertexai=True, project=project, location=location)
            if credentials is not None:
                kwargs["credentials"] = credentials
            if api_key is not None:
                kwargs["api_key"] = api_key  # Vertex AI express mode
        elif api_key is not None:
            kwargs["api_key"] = api_key
        try:
            self._client: Client = genai.Client(**kwargs)
        except ValueError as err:  # the SDK's "Missing key inputs argument!"
            where = "pass api_key= or set GEMINI_API_KEY"
            if vertexai:
                where = "pass project= and location= or set GOOGLE_CLOUD_PROJECT/LOCATION"
            raise AuthenticationError(
                f"{self.provider}: no credentials ({err}): {where}", provider=self.provider
            ) from err

    async def aclose(self) -> None:
        """Close the SDK's async client (its connection pools). Safe to call twice."""
        await self._client.aio.aclose()
        if self._own_http is not None:
            await self._own_http.aclose()

    # -- requests ------------------------------------------------------------------------
    def format_request(self, request: ModelRequest) -> tuple[list[WireContent], dict[str, object]]:
        """The ``contents`` and ``GenerateContentConfig`` (dict form) of a request.

        Leading system messages become the system instruction; function tools become
        ``function_declarations`` and built-in tool specs are sent as given; a native-mode
        ``output`` is ``response_mime_type: application/json`` with the model's JSON schema
        as ``response_json_schema`` (which takes JSON Schema with ``$defs``/``$ref``/
        ``anyOf``, unlike ``response_schema``'s OpenAPI subset). Settings: ``tool_choice``,
        ``temperature``, ``max_tokens``, ``stop``, ``service_tier``...; other keys and
        ``extra_body`` are ``GenerateContentConfig`` fields. Gemini has no switch for
        parallel calls: ``parallel_tool_calls`` is not sent.

        Args:
            request: The request.

        Returns:
            ``(contents, config)``.

        Raises:
            BadRequestError: a setting that is no ``GenerateContentConfig`` field, or no
                message besides the system prompt.
        """
        args: dict[str, object] = dict(request.settings)
        for key in ("extra_headers", "timeout", "parallel_tool_calls", "cache"):
            args.pop(key, None)  # cache: Gemini caches implicitly, there is nothing to mark
        choice = args.pop("tool_choice", None)
        extra = args.pop("extra_body", None)
        system, contents = format_contents(request.messages)
        if not contents:  # the SDK would raise a bare ValueError("contents are required.")
            raise BadRequestError(
                f"{self.provider}: a request needs at least one user or model message "
                "besides the system prompt (Gemini's contents are required)",
                provider=self.provider,
            )
        config: dict[str, object] = {
            "automatic_function_calling": {"disable": True},
            "automatic_continuation": False,
        }
        if system is not None:
            config["system_instruction"] = system
        if self.thinking is not None:
            config["thinking_config"] = self.thinking
        config.update(self.generate_kwargs)
        for key, value in args.items():
            config[_SETTINGS.get(key, key)] = value
        if isinstance(extra, dict):
            config.update(extra)
        specs = format_tools(request.tools, request.builtin_tools)
        if specs:
            config["tools"] = specs
            tool_config = format_tool_config(choice if isinstance(choice, str) else None)
            if tool_config is not None:
                config["tool_config"] = tool_config
        structured = request.native_output
        if structured is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = structured.model_json_schema()
        use_cached_content(config)
        return contents, config

    def _config(self, config: dict[str, object], settings: ModelSettings) -> GenerateContentConfig:
        """The typed config (bad fields refused here, with our error), HTTP options set."""
        from pydantic import ValidationError

        http: dict[str, object] = {}
        if "extra_headers" in settings:
            http["headers"] = dict(settings["extra_headers"])
        if "timeout" in settings:
            http["timeout"] = int(settings["timeout"] * 1000)  # the SDK takes milliseconds
        if http:
            config["http_options"] = http
        try:
            typed: GenerateContentConfig = self._types.GenerateContentConfig.model_validate(config)
            return typed
        except ValidationError as err:
            raise BadRequestError(
                f"{self.provider}: invalid request settings: {err}", provider=self.provider
            ) from err

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """Ask for the next assistant turn and wait for the whole answer.

        See ``ChatModel.request``.

        Raises:
            ModelError: a subclass describing the failure, after retries.
        """
        started = time.perf_counter()
        contents, config = self.format_request(request)
        typed = self._config(config, request.settings)

        async def attempt() -> GenerateContentResponse:
            return await self._client.aio.models.generate_content(
                model=self.model_name, contents=contents, config=typed
            )

        answer = await self._with_retries(attempt)
        state = GoogleStreamState()
        try:
            state.feed(answer)
            final = state.snapshot(final=True, elapsed=time.perf_counter() - started)
        except ModelError as err:
            raise owned(self.provider, err) from err
        return self._finish(final, request.native_output)

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Ask for the next assistant turn as cumulative chunks (the last one complete).

        Opening the stream and reading it to its first visible chunk is one attempt of
        the retry policy (a stream cut before then is retried); once a chunk reached the
        caller, a failure is raised. The HTTP response is closed however this ends.
        """
        started = time.perf_counter()
        contents, config = self.format_request(request)
        typed = self._config(config, request.settings)

        async def attempt() -> tuple[
            GoogleStreamState, AsyncGenerator[GenerateContentResponse, None], bool
        ]:
            chunks = await self._client.aio.models.generate_content_stream(
                model=self.model_name, contents=contents, config=typed
            )
            calls = self._sdk_calls(chunks)
            state = GoogleStreamState()
            try:
                async for chunk in calls:
                    if state.feed(chunk):
                        return state, calls, False
            except BaseException:
                await calls.aclose()
                raise
            await calls.aclose()
            return state, calls, True

        state, calls, done = await self._with_retries(attempt)
        try:
            if not done:
                yield state.snapshot(final=False)
                async for chunk in broken_off(self.provider, calls, _StatusError, _ConnectionError):
                    if state.feed(chunk):
                        yield state.snapshot(final=False)
        finally:
            with anyio.CancelScope(shield=True):  # release the connection, even cancelled
                await calls.aclose()
        if state.finish_reason is None:
            raise ModelConnectionError(
                f"{self.provider}: the stream ended before the answer was complete",
                provider=self.provider,
            )
        try:
            final = state.snapshot(final=True, elapsed=time.perf_counter() - started)
        except ModelError as err:
            raise owned(self.provider, err) from err
        yield self._finish(final, request.native_output)

    def _finish(self, response: ChatResponse, structured: type[BaseModel] | None) -> ChatResponse:
        if structured is not None:
            text = response.get_text()
            apply_structured_output(response, structured, text or None)
        return fill_cost(response, self.model_name, "google", self.base_url)

    # -- errors --------------------------------------------------------------------------
    async def _sdk_calls(
        self, chunks: AsyncIterator[GenerateContentResponse]
    ) -> AsyncGenerator[GenerateContentResponse, None]:
        """The SDK's chunks, its failures turned into the classes the retry loop knows."""
        iterator = chunks.__aiter__()
        try:
            while True:
                try:
                    chunk = await self._sdk_call(iterator.__anext__)
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            await _aclose(iterator)  # the SDK's generator: closes the HTTP response

    async def _sdk_call(self, call: Callable[[], Awaitable[_T]]) -> _T:
        from pydantic import ValidationError

        errors = self._errors
        try:
            return await call()
        except errors.APIError as err:
            status = err.code if isinstance(err.code, int) else 500
            raise _StatusError(status, err.response, err.details, str(err)) from err
        except (errors.UnknownApiResponseError, json.JSONDecodeError) as err:
            # The SDK parses a whole answer with json.loads and lets its error out as is.
            raise ModelResponseError(
                f"{self.provider}: the answer is not valid JSON: {str(err)[:200]}",
                provider=self.provider,
            ) from err
        except ValidationError as err:
            raise ModelResponseError(
                f"{self.provider}: unexpected answer shape: {str(err)[:300]}",
                provider=self.provider,
            ) from err
        except _transport_errors() as err:
            raise _ConnectionError(f"{type(err).__name__}: {err}") from err

    async def _with_retries(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        return await send_with_retries(
            lambda: self._sdk_call(attempt),
            self.retry,
            provider=self.provider,
            status_error=_StatusError,
            connection_error=_ConnectionError,
            base_error=self._errors.APIError,
        )

    def __repr__(self) -> str:
        return f"GoogleModel(model_name={self.model_name!r}, vertexai={self.vertexai})"


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP clients' transport errors (the SDK uses httpx2, or httpx when configured)."""
    import httpx2

    found: list[type[BaseException]] = [httpx2.TransportError]
    try:
        import httpx
    except ImportError:  # pragma: no cover - google-genai depends on httpx
        pass
    else:
        found.append(httpx.TransportError)
    return tuple(found)


async def _aclose(chunks: object) -> None:
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()

"""``BedrockConverseModel``: any Amazon Bedrock model through the Converse API.

Requests go through ``aiobotocore``'s ``bedrock-runtime`` client (``POST
/model/{modelId}/converse`` and ``/converse-stream``): AWS SigV4 signing, credentials and the
``application/vnd.amazon.eventstream`` framing are the SDK's, read on the event loop (no
thread per chunk). The SDK's own retries are off: the retry policy here is the only one.
Install with ``pip install 'agentkit[bedrock]'``.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from agentkit.exceptions import (
    AuthenticationError,
    BadRequestError,
    MissingDependencyError,
    ModelConnectionError,
    ModelError,
)
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest, ModelSettings
from agentkit.models._bedrock_format import (
    ConverseState,
    Turn,
    Wire,
    add_cache_points,
    format_messages,
    format_tool_config,
)
from agentkit.models._common import apply_structured_output, closed_schema
from agentkit.models._http import (
    RetryPolicy,
    broken_off,
    owned,
    send_with_retries,
)
from agentkit.models._prices import fill_cost

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["BedrockConverseModel"]

_T = TypeVar("_T")

# Bedrock Runtime's error codes -> the HTTP status agentkit maps and retries by. The API
# answers most with that status already; event-stream exceptions come inside a 200 and
# ModelNotReady is documented as a 429 that is worth waiting for, not a rate limit.
_ERROR_STATUS: dict[str, int] = {
    "throttlingexception": 429,
    "servicequotaexceededexception": 429,
    "validationexception": 400,
    "accessdeniedexception": 403,
    "unrecognizedclientexception": 403,
    "invalidsignatureexception": 403,
    "expiredtokenexception": 403,
    "resourcenotfoundexception": 404,
    "modeltimeoutexception": 408,
    "modelerrorexception": 424,
    "internalserverexception": 500,
    "modelnotreadyexception": 503,
    "serviceunavailableexception": 503,
    "modelstreamerrorexception": 503,
}

_SETTINGS = {"temperature": "temperature", "top_p": "topP", "max_tokens": "maxTokens"}
"""Settings sent in ``inferenceConfig``, by their Converse name."""

_NOT_INFERENCE = (
    "timeout",
    "parallel_tool_calls",
    "seed",
    "extra_headers",
    "tool_choice",
    "extra_body",
    "cache",
    "service_tier",
    "stop",
)
"""Settings sent elsewhere than ``inferenceConfig``, or not at all."""


class _StatusError(Exception):
    """A botocore ``ClientError`` in the shape ``send_with_retries`` reads."""

    def __init__(self, status: int, headers: Mapping[str, str], body: object, message: str):
        super().__init__(message)
        self.status_code = status
        self.response = _Headers(headers)
        self.body = body


class _Headers:
    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = {k.lower(): v for k, v in headers.items()}


class _ConnectionError(Exception):
    """The request did not reach the server or its answer broke off (retried)."""


def _sdk() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``aiobotocore.session``, ``botocore.config`` and ``botocore.exceptions``."""
    try:
        import aiobotocore.session
        import botocore.config
        import botocore.exceptions
    except ImportError as err:
        raise MissingDependencyError(
            "BedrockConverseModel needs 'aiobotocore': pip install 'agentkit[bedrock]'",
            name="aiobotocore",
        ) from err
    return aiobotocore.session, botocore.config, botocore.exceptions


class BedrockConverseModel(ChatModel):
    """A model on Amazon Bedrock (Llama, Mistral, Nova, Cohere, Claude...) via Converse.

    Args:
        model_name: The model id or inference profile, e.g.
            ``"us.amazon.nova-lite-v1:0"`` or ``"meta.llama3-70b-instruct-v1:0"``.
        region: ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / the profile's when None.
        aws_access_key: With ``aws_secret_key`` (and ``aws_session_token``): explicit
            credentials; otherwise botocore's chain (environment, profile, instance role).
        aws_secret_key: See ``aws_access_key``.
        aws_session_token: See ``aws_access_key``.
        aws_profile: A named AWS profile.
        base_url: The endpoint (a VPC endpoint, a local test server); the region's when None.
        stream: Whether the agent streams this model's answers (``request_stream``).
        reasoning: ``additionalModelRequestFields`` for reasoning, sent as is, e.g.
            ``{"thinking": {"type": "enabled", "budget_tokens": 1024}}`` (Claude) or
            ``{"reasoningConfig": {"type": "enabled"}}`` (Nova). Reasoning comes back as
            thinking blocks with their signatures, replayed in later turns.
        guardrail: ``guardrailConfig`` (``guardrailIdentifier``, ``guardrailVersion``,
            ``trace``); the guardrail trace is in the answer's ``metadata["guardrail"]``.
        request_fields: Extra Converse parameters sent with every request
            (``additionalModelRequestFields``, ``performanceConfig``, ``promptVariables``...).
        read_timeout: Seconds the client waits for data on the socket.
        retry: The retry policy (default: 3 retries, 0.5 s doubling backoff with jitter).
        max_retries: Shortcut overriding ``retry.max_retries``.

    Raises:
        MissingDependencyError: ``aiobotocore`` is not installed.

    Example:
        >>> model = BedrockConverseModel("us.amazon.nova-lite-v1:0")  # doctest: +SKIP
    """

    provider = "bedrock"
    native_output = True

    def __init__(
        self,
        model_name: str,
        *,
        region: str | None = None,
        aws_access_key: str | None = None,
        aws_secret_key: str | None = None,
        aws_session_token: str | None = None,
        aws_profile: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        reasoning: Mapping[str, object] | None = None,
        guardrail: Mapping[str, object] | None = None,
        request_fields: Mapping[str, object] | None = None,
        read_timeout: float = 300.0,
        retry: RetryPolicy | None = None,
        max_retries: int | None = None,
    ) -> None:
        super().__init__(model_name, stream=stream)
        session_module, config_module, self._errors = _sdk()
        self.base_url = base_url
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.guardrail = dict(guardrail) if guardrail is not None else None
        self.request_fields = dict(request_fields or {})
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = RetryPolicy(max_retries, policy.initial_delay, policy.max_delay, policy.jitter)
        self.retry = policy
        self._session = session_module.get_session()
        if aws_profile is not None:
            self._session.set_config_variable("profile", aws_profile)
        self._client_kwargs: dict[str, object] = {
            "region_name": region,
            "endpoint_url": base_url,
            "aws_access_key_id": aws_access_key,
            "aws_secret_access_key": aws_secret_key,
            "aws_session_token": aws_session_token,
            "config": config_module.Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                read_timeout=read_timeout,
                user_agent_extra="agentkit",
            ),
        }
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: Any = None
        self._lock = anyio.Lock()

    async def _get_client(self) -> Any:
        async with self._lock:
            if self._client is None:
                stack = contextlib.AsyncExitStack()
                creator = self._session.create_client("bedrock-runtime", **self._client_kwargs)
                self._client = await stack.enter_async_context(creator)
                self._stack = stack
            return self._client

    async def aclose(self) -> None:
        """Close the SDK client (its connection pool). Safe to call twice."""
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    # -- requests ------------------------------------------------------------------------
    def format_request(self, request: ModelRequest) -> dict[str, object]:
        """The Converse parameters of a request (the SDK's dict form, without ``modelId``).

        Leading system messages become ``system``; function tools become ``toolSpec``s and
        built-in specs are sent as given; a native-mode ``output`` uses structured outputs
        (``outputConfig.textFormat``, a ``json_schema`` the answer text follows). Settings:
        ``tool_choice``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``
        (``inferenceConfig``), ``service_tier`` (``serviceTier``: ``"priority"``,
        ``"default"``, ``"flex"``); ``extra_body`` entries are Converse parameters;
        ``cache`` (a ``PromptCache``) adds ``cachePoint`` blocks. Converse has no ``seed``
        or ``parallel_tool_calls`` switch: they are not sent.

        Args:
            request: The request.

        Raises:
            BadRequestError: ``extra_headers`` (the SDK signs the headers it sends) or a
                setting Converse does not take.
        """
        settings = request.settings
        if settings.get("extra_headers"):
            raise BadRequestError(
                f"{self.provider}: extra_headers is not supported by Converse",
                provider=self.provider,
            )
        system, turns = format_messages(request.messages)
        params: dict[str, object] = {"messages": turns}
        tier = settings.get("service_tier")
        if tier is not None:
            params["serviceTier"] = {"type": tier}
        if system:
            params["system"] = system
        inference = _inference_config(settings, self.provider)
        if inference:
            params["inferenceConfig"] = inference
        structured = request.native_output
        if structured is not None:
            params["outputConfig"] = {"textFormat": output_format(structured)}
        tool_config = _tool_config(request, turns)
        if tool_config is not None:
            params["toolConfig"] = tool_config
        self._add_model_fields(params)
        extra = settings.get("extra_body")
        if isinstance(extra, dict):
            params.update(extra)
        cache = settings.get("cache")
        if cache is not None:
            add_cache_points(params, cache, self.model_name)
        return params

    def _add_model_fields(self, params: dict[str, object]) -> None:
        """Add the model's guardrail, request fields and reasoning fields to ``params``."""
        fields: dict[str, object] = dict(self.reasoning or {})
        if self.guardrail is not None:
            params["guardrailConfig"] = self.guardrail
        params.update(self.request_fields)
        if fields:
            merged = params.get("additionalModelRequestFields")
            params["additionalModelRequestFields"] = {
                **fields,
                **(merged if isinstance(merged, dict) else {}),
            }

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """Ask for the next assistant turn and wait for the whole answer (``Converse``).

        Raises:
            ModelError: a subclass describing the failure, after retries.
        """
        started = time.perf_counter()
        params = self.format_request(request)
        client = await self._get_client()

        async def attempt() -> Any:
            return await client.converse(modelId=self.model_name, **params)

        answer = await self._with_retries(attempt)
        state = ConverseState()
        try:
            state.feed_response(answer)
            final = state.snapshot(final=True, elapsed=time.perf_counter() - started)
        except ModelError as err:
            raise owned(self.provider, err) from err
        return self._finish(final, request.native_output)

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Ask for the next assistant turn as cumulative chunks (``ConverseStream``).

        Opening the stream and reading it to its first visible chunk is one attempt of
        the retry policy; once a chunk reached the caller a failure is raised. The
        event stream (its HTTP response) is closed however this ends, cancelled included.
        """
        started = time.perf_counter()
        params = self.format_request(request)
        client = await self._get_client()

        async def attempt() -> tuple[ConverseState, Any, AsyncGenerator[Any, None]]:
            answer = await client.converse_stream(modelId=self.model_name, **params)
            stream = answer["stream"]
            events = self._events(stream)
            state = ConverseState()
            try:
                async for event in events:
                    if self._feed(state, event):
                        return state, stream, events
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await events.aclose()
                stream.close()
                raise
            return state, stream, events

        state, stream, events = await self._with_retries(attempt)
        try:
            if state.blocks:
                yield state.snapshot(final=False)
            async for event in broken_off(self.provider, events, _StatusError, _ConnectionError):
                if self._feed(state, event):
                    yield state.snapshot(final=False)
        finally:
            with anyio.CancelScope(shield=True):
                await events.aclose()
            stream.close()  # releases (closes) the HTTP connection, even cancelled
        if not state.stopped:
            raise ModelConnectionError(
                f"{self.provider}: the stream ended before the answer was complete",
                provider=self.provider,
            )
        try:
            final = state.snapshot(final=True, elapsed=time.perf_counter() - started)
        except ModelError as err:
            raise owned(self.provider, err) from err
        yield self._finish(final, request.native_output)

    def _feed(self, state: ConverseState, event: Mapping[str, Any]) -> bool:
        """``state.feed(event)``, a malformed event's error naming this provider."""
        try:
            return state.feed(event)
        except ModelError as err:
            raise owned(self.provider, err) from err

    def _finish(self, response: ChatResponse, structured: type[BaseModel] | None) -> ChatResponse:
        if structured is not None:
            apply_structured_output(response, structured, response.get_text() or None)
        return fill_cost(response, self.model_name, self.provider, self.base_url)

    # -- errors --------------------------------------------------------------------------
    def _status_error(self, err: Exception) -> _StatusError:
        response = _mapping(getattr(err, "response", None))  # botocore's parsed error body
        error = _mapping(response.get("Error"))
        code = str(error.get("Code") or "")
        meta = _mapping(response.get("ResponseMetadata"))
        given = meta.get("HTTPStatusCode")
        status = given if isinstance(given, int) and given else 500
        mapped = _ERROR_STATUS.get(code.lower())
        if mapped is not None and (status == 200 or mapped != 429 or status == 429):
            status = mapped  # event-stream exceptions arrive in a 200
        message = str(error.get("Message") or err)
        body = {"message": message, "type": code}
        headers = {str(k): str(v) for k, v in _mapping(meta.get("HTTPHeaders")).items()}
        return _StatusError(status, headers, body, message)

    async def _sdk_call(self, call: Callable[[], Awaitable[_T]]) -> _T:
        import aiohttp

        errors = self._errors
        try:
            return await call()
        except errors.ClientError as err:
            raise self._status_error(err) from err
        except (errors.NoCredentialsError, errors.PartialCredentialsError) as err:
            raise AuthenticationError(
                f"{self.provider}: no AWS credentials ({err}): set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, or pass aws_access_key=",
                provider=self.provider,
            ) from err
        except errors.NoRegionError as err:
            raise AuthenticationError(
                f"{self.provider}: no AWS region: set AWS_REGION or pass region=",
                provider=self.provider,
            ) from err
        except (errors.ConnectionError, errors.HTTPClientError, aiohttp.ClientError) as err:
            raise _ConnectionError(f"{type(err).__name__}: {err}") from err

    async def _events(self, stream: Any) -> AsyncGenerator[Any, None]:
        """The SDK's decoded events, failures as the classes the retry loop knows."""
        iterator = stream.__aiter__()
        try:
            while True:
                try:
                    event = await self._sdk_call(iterator.__anext__)
                except StopAsyncIteration:
                    return
                yield event
        finally:
            await iterator.aclose()

    async def _with_retries(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        return await send_with_retries(
            lambda: self._sdk_call(attempt),
            self.retry,
            provider=self.provider,
            status_error=_StatusError,
            connection_error=_ConnectionError,
            base_error=self._errors.BotoCoreError,
        )

    def __repr__(self) -> str:
        return f"BedrockConverseModel(model_name={self.model_name!r})"


def _mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a dict, else empty (botocore leaves out what it did not get)."""
    return value if isinstance(value, dict) else {}


def output_format(structured: type[BaseModel]) -> dict[str, object]:
    """Converse's ``OutputFormat`` for ``structured``: a ``json_schema``, sent as a string.

    The schema is closed (``additionalProperties: false``) without the constraints
    constrained decoding does not take (see ``closed_schema``); the answer is validated
    against the full model afterwards.
    """
    import json

    definition: dict[str, object] = {
        "schema": json.dumps(closed_schema(structured)),
        "name": re.sub(r"[^a-zA-Z0-9_-]", "_", structured.__name__)[:64],
    }
    doc = (structured.__doc__ or "").strip()
    if doc:
        definition["description"] = doc
    return {"type": "json_schema", "structure": {"jsonSchema": definition}}


def _inference_config(settings: ModelSettings, provider: str) -> dict[str, object]:
    """The ``inferenceConfig`` of ``settings``; refuses a setting Converse does not take."""
    args: dict[str, object] = dict(settings)
    for key in _NOT_INFERENCE:
        args.pop(key, None)
    inference: dict[str, object] = {}
    stop = settings.get("stop")
    if stop is not None:
        inference["stopSequences"] = list(stop)
    for key, field in _SETTINGS.items():
        if key in args:
            inference[field] = args.pop(key)
    if args:
        raise BadRequestError(
            f"{provider}: settings Converse does not take: {sorted(args)}",
            provider=provider,
        )
    return inference


def _tool_config(request: ModelRequest, turns: list[Turn]) -> Wire | None:
    """The ``toolConfig`` of ``request`` (None: no tools, or ``"none"`` with none in use)."""
    choice = request.settings.get("tool_choice")
    definitions, builtin = request.tools, request.builtin_tools
    has_tool_blocks = any("toolUse" in b or "toolResult" in b for t in turns for b in t["content"])
    if choice == "none" and not has_tool_blocks:
        definitions, builtin = [], []
    return format_tool_config(definitions, choice, builtin)

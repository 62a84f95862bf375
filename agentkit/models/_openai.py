"""``OpenAIChatModel``: OpenAI Chat Completions (and any OpenAI-compatible server).

Requests go through the official ``openai.AsyncOpenAI`` client's low-level ``post`` with a
body we serialize ourselves: the SDK keeps doing auth, base URL, headers, timeouts and error
types, but its typed request layer (whose cost grows with the conversation) is skipped, and
responses and SSE streams are parsed straight from JSON without building typed models.
The SDK's own retries are disabled; :class:`~agentkit.models.RetryPolicy` retries instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from agentkit.exceptions import ModelResponseError, UsageError
from agentkit.models._adapter import HTTPChatModel, StreamMark, StreamState
from agentkit.models._base import ChatResponse, ModelRequest, PromptCache
from agentkit.models._caching import openai_cache_fields
from agentkit.models._clients import OPENAI
from agentkit.models._common import body_fields, strict_schema
from agentkit.models._http import RetryPolicy, embedded_error_status, loads_body, map_status_error
from agentkit.models._json import JSONObject, JSONValue
from agentkit.models._lean import DEFAULT_TIMEOUT, LeanHTTP
from agentkit.models._openai_format import (
    OpenAIStreamState,
    encode_body,
    format_messages,
    format_tool_choice,
    parse_completion,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["OpenAIChatModel"]

# ``client_kwargs`` the lean path reproduces; any other one goes through the SDK client.
_LEAN_KWARGS = frozenset(("timeout", "default_headers", "organization", "project"))
# Environment settings only the SDK interprets (extra headers, admin keys): they keep the SDK.
_SDK_ONLY_ENV = ("OPENAI_CUSTOM_HEADERS", "OPENAI_ADMIN_KEY")


def _environment_proxy(base_url: str) -> bool:
    """Whether the environment names a proxy for ``base_url``'s scheme (or for all).

    ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` in either case, as httpx reads them. The
    lean path sends through its own pools, so such a process keeps the SDK's client, which
    applies the proxy and ``NO_PROXY`` the way the SDK documents. Read from ``os.environ``
    directly: ``urllib.request`` would cost the first model its import.
    """
    scheme = base_url.partition(":")[0].lower()
    names = {f"{scheme}_proxy", "all_proxy"}
    return any(value and name.lower() in names for name, value in os.environ.items())


class OpenAIChatModel(HTTPChatModel):
    """A chat model served by the OpenAI Chat Completions API or a compatible server.

    Args:
        model_name: Model name, e.g. ``"gpt-4.1-mini"``.
        api_key: API key; ``OPENAI_API_KEY`` when None.
        base_url: Server URL (``http://localhost:11434/v1`` for Ollama...);
            ``OPENAI_BASE_URL`` or the OpenAI API when None.
        stream: Whether the agent streams this model's answers (``request_stream``).
        client_kwargs: Extra ``openai.AsyncOpenAI`` arguments (``timeout``,
            ``default_headers``, ``http_client``...). Its ``max_retries`` is always 0:
            retries follow ``retry``.
        generate_kwargs: Extra body fields sent with every request (``temperature``,
            ``max_completion_tokens``, ``reasoning_effort``...). Per-call keyword arguments
            override them.
        retry: The retry policy (default: 3 retries, 0.5 s doubling backoff with jitter).
        max_retries: Shortcut overriding ``retry.max_retries``.
        reasoning_content: Send thinking blocks back as ``reasoning_content`` (for
            DeepSeek-style servers that want it); OpenAI itself takes no thinking back.
        provider: Provider name reported in errors (``"ollama"``, ``"vllm"``...).
        transport: ``"auto"`` (default): a plain configuration (an API key, a base URL and
            at most ``timeout``, ``default_headers``, ``organization``, ``project`` in
            ``client_kwargs``) sends its requests with ``httpx2`` directly, the same bytes
            and headers the SDK would send without importing it (a faster cold start and
            turn); anything else goes through the ``openai`` SDK client. ``"sdk"``: always
            through the SDK client.

    Example:
        >>> model = OpenAIChatModel("gpt-4.1-mini", stream=False)
        >>> # response = await model.request(ModelRequest([Msg("user", "Hello", "user")]))
    """

    native_output = True

    provider = "openai"
    _path = "/chat/completions"
    sdk = OPENAI
    client_class = "AsyncOpenAI"

    def __init__(
        self,
        model_name: str,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        client_kwargs: Mapping[str, object] | None = None,
        generate_kwargs: Mapping[str, object] | None = None,
        *,
        retry: RetryPolicy | None = None,
        max_retries: int | None = None,
        reasoning_content: bool = False,
        provider: str = "openai",
        transport: Literal["auto", "sdk"] = "auto",
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
        self.reasoning_content = reasoning_content
        self.provider = provider
        if transport not in ("auto", "sdk"):
            raise UsageError(f"transport must be 'auto' or 'sdk', not {transport!r}")
        self.transport = transport
        self._prepare_client()

    def _lean_transport(self) -> LeanHTTP | None:
        # Only what the SDK would do with these settings, and only for this class's client.
        if self.transport == "sdk":
            return None
        if type(self).client_class != OpenAIChatModel.client_class:
            return None  # another client (Azure...): its own auth and paths
        if _builds_own_client(type(self)):
            return None
        if not self.client_kwargs.keys() <= _LEAN_KWARGS:
            return None
        if any(name in os.environ for name in _SDK_ONLY_ENV):
            return None
        api_key = self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not isinstance(api_key, str) or not api_key:
            return None  # the SDK path raises AuthenticationError on the first call
        base_url = self.base_url if self.base_url is not None else os.environ.get("OPENAI_BASE_URL")
        if base_url is None:
            base_url = "https://api.openai.com/v1"
        if _environment_proxy(base_url):
            return None  # the SDK's client mounts the environment's proxies; the lean path none
        headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        organization = self.client_kwargs.get("organization")  # None: the SDK reads the env
        if organization is None:
            organization = os.environ.get("OPENAI_ORG_ID")
        project = self.client_kwargs.get("project")
        if project is None:
            project = os.environ.get("OPENAI_PROJECT_ID")
        if organization is not None:
            headers["OpenAI-Organization"] = str(organization)
        if project is not None:
            headers["OpenAI-Project"] = str(project)
        extra = self.client_kwargs.get("default_headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items()})
        return LeanHTTP(base_url, headers, self.client_kwargs.get("timeout", DEFAULT_TIMEOUT))

    def encode_body(self, body: Mapping[str, object]) -> bytes:
        """The body's bytes; the history's JSON is reused from earlier requests (same bytes)."""
        return encode_body(body)

    def format_request(
        self, request: ModelRequest, *, stream: bool | None = None
    ) -> dict[str, object]:
        """The Chat Completions request body of a call (exactly what is sent).

        Function tools become ``{"type": "function", ...}`` entries; built-in tools
        (``openrouter:web_search``...) are sent as given; a native-mode ``output`` becomes
        ``response_format`` (json_schema, strict when the schema allows it);
        ``parallel_tool_calls`` is sent only with tools.

        Args:
            request: The request.
            stream: Override ``self.stream``.

        Returns:
            The JSON body.
        """
        kwargs = body_fields(request.settings)
        parallel = kwargs.pop("parallel_tool_calls", None)
        cache = openai_cache_fields(cast("PromptCache | None", kwargs.pop("cache", None)))
        body: dict[str, object] = {
            "model": self.model_name,
            "messages": format_messages(request.messages, reasoning=self.reasoning_content),
        }
        body.update(self.generate_kwargs)
        body.update(kwargs)
        body.update(cache)
        _check_audio_output(body)
        tools = [*(t.to_openai() for t in request.tools), *request.builtin_tools]
        if tools:
            body["tools"] = tools
            tool_choice = request.settings.get("tool_choice")
            if tool_choice is not None:
                body["tool_choice"] = format_tool_choice(tool_choice)
            if parallel is not None:
                body["parallel_tool_calls"] = bool(parallel)
        structured = request.native_output
        if structured is not None:
            body["response_format"] = _response_format(structured)
        if self.stream if stream is None else stream:
            body["stream"] = True
            body.setdefault("stream_options", {"include_usage": True})
        else:
            body.pop("stream", None)
        return body

    def _parse(
        self, data: JSONValue, status: int, elapsed: float, structured: type[BaseModel] | None
    ) -> ChatResponse:
        if isinstance(data, dict) and data.get("error"):
            status = embedded_error_status(data)
            raise map_status_error(self.provider, status, data, "error in a 200 answer")
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise ModelResponseError(
                f"{self.provider}: unexpected response shape: {str(data)[:200]!r}",
                provider=self.provider,
            )
        return self._finish_stream(parse_completion(data, elapsed), structured)

    def _new_state(self) -> StreamState:
        return OpenAIStreamState()

    def _check_event(self, event: str, data: bytes) -> JSONObject | StreamMark | None:
        if data == b"[DONE]":
            return StreamMark.END
        chunk = loads_body(self.provider, data)
        if not isinstance(chunk, dict):
            return None
        # OpenRouter's mid-stream failure carries choices too (finish_reason "error"): an
        # error object decides, whatever else the chunk holds (``"error": null`` does not).
        if chunk.get("error"):
            status = embedded_error_status(chunk)
            raise map_status_error(self.provider, status, chunk, "error event in the stream")
        return chunk


def _check_audio_output(body: Mapping[str, object]) -> None:
    """A spoken answer needs both ``modalities`` with ``"audio"`` and the ``audio`` options."""
    modalities = body.get("modalities")
    wants = isinstance(modalities, list | tuple) and "audio" in modalities
    if wants and not isinstance(body.get("audio"), Mapping):
        raise UsageError(
            "modalities=['text', 'audio'] needs audio={'voice': 'alloy', 'format': 'wav'}"
        )
    if "audio" in body and not wants:
        raise UsageError("audio options need modalities=['text', 'audio']")


def _response_format(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    strict = strict_schema(schema)
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", model.__name__)[:64]
    spec: dict[str, Any] = {"name": name, "schema": strict or schema, "strict": strict is not None}
    if isinstance(schema.get("description"), str):
        spec["description"] = schema["description"]
    return {"type": "json_schema", "json_schema": spec}


def _builds_own_client(cls: type[OpenAIChatModel]) -> bool:
    """Whether a subclass of ``OpenAIChatModel`` builds its SDK client its own way."""
    return any(
        "_make_client" in vars(c)
        for c in cls.__mro__
        if c is not OpenAIChatModel and issubclass(c, OpenAIChatModel)
    )

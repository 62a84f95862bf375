"""HTTP plumbing shared by the provider adapters: retries, error mapping, lean SSE parsing.

The adapters send their own wire-format bodies through the official SDK clients' low-level
``post`` (keeping the SDKs' auth, base URL, timeouts and error types) with the SDKs' own
retries disabled, so the retry policy here is the only one. Responses and SSE streams are
parsed with ``json.loads`` straight from bytes: no typed model is built per chunk.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from agentkit.exceptions import (
    AuthenticationError,
    BadRequestError,
    ContextWindowError,
    ModelAPIError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    RateLimitError,
)

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "RetryPolicy",
    "broken_off",
    "dumps",
    "embedded_error_status",
    "iter_sse",
    "loads_body",
    "map_status_error",
    "owned",
    "parse_retry_after",
    "send_with_retries",
]

T = TypeVar("T")

_RETRY_STATUSES = frozenset((408, 409, 429))
_CONTEXT_CODES = frozenset(("context_length_exceeded", "string_above_max_length"))
_CONTEXT_PHRASES = (
    "context length",
    "context_length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "maximum number of tokens",
    "input is too long",
    "exceeds the max",
    "reduce the length",
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a model adapter retries failed requests.

    Retried: HTTP 408, 409, 429 and 5xx answers (unless the server says
    ``x-should-retry: false``), connection errors and timeouts, a stream cut before its
    first content or tool-call delta, and an error event before it whose status is one of
    these (an in-stream ``overloaded_error``, a 5xx chunk). Never retried: other 4xx, and
    failures after a streamed answer has started (its chunks already reached the caller).

    Args:
        max_retries: Retries after the first attempt (0 disables retrying).
        initial_delay: Backoff before the first retry, in seconds; doubles each retry.
        max_delay: Upper bound of the exponential backoff.
        jitter: Fraction of the backoff removed at random (0.25: wait 75-100 %), so many
            clients rate-limited together do not retry in lockstep.
        max_retry_after: The longest server-requested wait (``Retry-After``) honoured; a
            longer one is not waited for: the error is raised at once.
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")

    def backoff(self, retry: int) -> float:
        """The jittered exponential delay before retry number ``retry`` (0-based)."""
        delay = min(self.max_delay, self.initial_delay * 2.0 ** min(retry, 60))
        return delay * (1.0 - self.jitter * random.random())


def parse_retry_after(headers: httpx2.Headers | dict[str, str]) -> float | None:
    """Seconds the server asks us to wait, or None when it does not say (or unreadably).

    Reads ``retry-after-ms``, then ``retry-after`` (seconds or an HTTP date).
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            ms = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(ms):
                return max(0.0, ms / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _retry_delay(policy: RetryPolicy, retry: int, status: int | None, headers: Any) -> float | None:
    """The wait before the next attempt, or None when this failure must not be retried."""
    if retry >= policy.max_retries:
        return None
    if status is not None:
        hint = headers.get("x-should-retry") if headers is not None else None
        if hint == "false":
            return None
        if hint != "true" and status not in _RETRY_STATUSES and status < 500:
            return None
        wait = parse_retry_after(headers) if headers is not None else None
        if wait is not None:
            return wait if wait <= policy.max_retry_after else None
    return policy.backoff(retry)


def _error_message(body: object, fallback: str) -> tuple[str, str | None]:
    """The provider's own message and error code/type from an error body."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            code = inner.get("code") or inner.get("type")
            if isinstance(message, str) and message:
                return message, code if isinstance(code, str) else None
        elif isinstance(inner, str) and inner:
            return inner, None
    if isinstance(body, str) and body.strip():
        return body.strip()[:2000], None
    return fallback, None


def map_status_error(
    provider: str, status: int, body: object, fallback: str, kind: str | None = None
) -> ModelError:
    """Map an HTTP error answer to the matching ``ModelError`` subclass.

    Args:
        provider: Provider name for the error.
        status: HTTP status (529 is Anthropic's "overloaded").
        body: The decoded error body (dict or text), or None.
        fallback: Message to use when the body has none.
        kind: Provider error type (``overloaded_error``...) if known separately.

    Returns:
        The exception to raise, carrying the provider's message and ``status_code``.
    """
    message, code = _error_message(body, fallback)
    code = code or kind
    text = f"{provider} API error {status}: {message}"
    lowered = message.lower()
    cls: type[ModelError]
    if status == 429 or status == 529 or code in ("rate_limit_error", "overloaded_error"):
        cls = RateLimitError
    elif status in (401, 403):
        cls = AuthenticationError
    elif code in _CONTEXT_CODES or (
        status in (400, 413, 422) and any(p in lowered for p in _CONTEXT_PHRASES)
    ):
        cls = ContextWindowError
    elif status in (400, 404, 413, 422):
        cls = BadRequestError
    else:
        cls = ModelAPIError
    return cls(text, provider=provider, status_code=status)


def embedded_error_status(event: object) -> int:
    """The HTTP status an error inside a 200 answer stands for (a stream event, a body).

    The answer itself was a 200, so the error's own status decides: Groq sends
    ``{"error": {...}, "status_code": 400}`` (``tool_use_failed``), others put ``status``
    or ``code`` in the error object. Without one, the failure counts as the server's (5xx).
    """
    if not isinstance(event, dict):
        return 500
    inner = event.get("error")
    candidates = [event.get("status_code"), event.get("status"), event.get("code")]
    if isinstance(inner, dict):
        candidates += [inner.get("status_code"), inner.get("status"), inner.get("code")]
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
    return 500


async def send_with_retries(
    send: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    provider: str,
    status_error: type[Exception],
    connection_error: type[Exception],
    base_error: type[Exception] = Exception,
) -> T:
    """Call ``send`` until it succeeds or the policy gives up, mapping SDK errors.

    Args:
        send: One attempt (the SDK's low-level post, SDK retries disabled).
        policy: Our retry policy.
        provider: Provider name used in errors.
        status_error: The SDK's ``APIStatusError`` class (has ``status_code``, ``response``,
            ``body``, ``message``).
        connection_error: The SDK's ``APIConnectionError`` class (timeouts included).
        base_error: The SDK's root error class; other SDK failures become ``ModelError``.

    Raises:
        ModelError: the mapped failure once retries are exhausted or not allowed.
    """
    retry = 0
    while True:
        try:
            return await send()
        except status_error as err:
            status: int = getattr(err, "status_code", 500)
            response = getattr(err, "response", None)
            headers = response.headers if response is not None else None
            delay = _retry_delay(policy, retry, status, headers)
            if delay is None:
                body = getattr(err, "body", None)
                raise map_status_error(provider, status, body, str(err)) from err
        except connection_error as err:
            delay = _retry_delay(policy, retry, None, None)
            if delay is None:
                cause = f" ({err.__cause__!r})" if err.__cause__ else ""
                raise ModelConnectionError(f"{provider}: {err}{cause}", provider=provider) from err
        except ModelConnectionError:
            # Ours, from an attempt that reads on past the HTTP answer: a stream cut before
            # its first delta, which is retried like a refused connection.
            delay = _retry_delay(policy, retry, None, None)
            if delay is None:
                raise
        except ModelAPIError as err:
            # Ours too: an error event in a stream before its first delta (Anthropic's
            # overloaded_error, a 5xx chunk), retried by its status as the same error
            # answered over HTTP would be. Without a status (usage that cannot be counted)
            # it is the answer's fault: raised.
            if err.status_code is None:
                raise
            delay = _retry_delay(policy, retry, err.status_code, None)
            if delay is None:
                raise
        except base_error as err:  # any other SDK failure (credentials provider...)
            raise ModelError(f"{provider}: {err}", provider=provider) from err
        retry += 1
        await anyio.sleep(delay)


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(value: object) -> bytes:
    """Compact UTF-8 JSON, as the SDKs send it."""
    return _compact(value).encode()


# Called straight on the decoded text, the decoder's scan skips the encoding sniffing and the
# two whitespace matches of ``json.loads``: a sizeable part of decoding a small SSE event.
_raw_decode = json.JSONDecoder().raw_decode


def loads_body(provider: str, data: bytes) -> Any:
    """Decode a JSON response body, raising ``ModelResponseError`` when it is not JSON."""
    try:
        text = data.decode()
        value, end = _raw_decode(text)
        if end == len(text):
            return value
    except (ValueError, RecursionError):
        pass  # not plain UTF-8 JSON: ``json.loads`` decides (a BOM, whitespace, an error)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as err:  # not JSON, or nested too deeply
        snippet = data[:200].decode("utf-8", "replace")
        raise ModelResponseError(
            f"{provider}: the response is not valid JSON: {snippet!r}", provider=provider
        ) from err


async def iter_sse(chunks: AsyncIterator[bytes]) -> AsyncGenerator[list[tuple[str, bytes]]]:
    """Parse a server-sent-events byte stream into ``(event, data)`` pairs, per network chunk.

    Each item is the list of the events one network chunk completed (never empty): a server
    that sends many events at once costs one step of this generator, not one per event.
    Lean by design: works on bytes (a UTF-8 character split across network chunks is never
    decoded half), ignores ``id``/``retry`` fields and comments, joins multi-line data with
    a newline as the SSE spec says. ``event`` is ``""`` when the event has no name.
    """
    buffer = b""
    event = ""
    data: list[bytes] = []
    async for chunk in chunks:
        lines = (buffer + chunk).split(b"\n") if buffer else chunk.split(b"\n")
        buffer = lines.pop()  # an unfinished line waits for the next chunk
        out: list[tuple[str, bytes]] = []
        for raw in lines:
            line = raw[:-1] if raw[-1:] == b"\r" else raw
            if line.startswith(b"data: "):  # nearly every line of a stream
                data.append(line[6:])
                continue
            if not line:
                if data:
                    out.append((event, data[0] if len(data) == 1 else b"\n".join(data)))
                event, data = "", []
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                event = value.decode("utf-8", "replace")
        if out:
            yield out
    if buffer.rstrip(b"\r").startswith(b"data:"):
        data.append(buffer.rstrip(b"\r")[5:].lstrip(b" "))
    if data:
        yield [(event, b"\n".join(data))]


async def broken_off(
    provider: str,
    chunks: AsyncGenerator[T, None],
    status_error: type[Exception],
    connection_error: type[Exception],
) -> AsyncGenerator[T, None]:
    """``chunks`` after the first visible one: an SDK failure raised as a ``ModelError``.

    For adapters on a provider SDK that wrap its failures in ``status_error`` (with
    ``status_code`` and ``body``) and ``connection_error``: past the first visible chunk a
    failure is not retried, it ends the answer.
    """
    try:
        async for chunk in chunks:
            yield chunk
    except status_error as err:
        status, body = getattr(err, "status_code", 500), getattr(err, "body", None)
        raise map_status_error(provider, status, body, str(err)) from err
    except connection_error as err:
        raise ModelConnectionError(
            f"{provider}: the stream broke off: {err}", provider=provider
        ) from err


def owned(provider: str, err: ModelError) -> ModelError:
    """``err`` naming ``provider`` (as it is, when it already names one)."""
    if err.provider is not None:
        return err
    return type(err)(f"{provider}: {err}", provider=provider)

"""The machinery the OpenAI and Anthropic adapters share.

The SDK client (built with the model), requests through the SDK's low-level ``post`` with our
retries, and the cancellation-safe streaming loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar, cast

import anyio
import httpx2

from agentkit.exceptions import (
    AuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
)
from agentkit.models._base import ChatModel, ChatResponse, ModelRequest
from agentkit.models._clients import SDK, SDKClient, SDKErrors
from agentkit.models._common import apply_structured_output
from agentkit.models._http import (
    RetryPolicy,
    dumps,
    iter_sse,
    loads_body,
    owned,
    send_with_retries,
)
from agentkit.models._json import JSONObject, JSONValue
from agentkit.models._lean import LeanConnectionError, LeanError, LeanHTTP, LeanStatusError
from agentkit.models._prices import fill_cost
from agentkit.models._prices import warm_up as warm_prices

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["HTTPChatModel", "PreparedCall", "StreamMark", "StreamState"]

_T = TypeVar("_T")

# Bounds on reading the rest of a body after its end-of-stream event (see ``_drain``).
_DRAIN_BYTES = 16 * 1024
_DRAIN_SECONDS = 0.1

# What a well-typed parser hits on JSON of the wrong shape (a list where a dict belongs...).
_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError)


def _shows_something(chunk: ChatResponse) -> bool:
    """Whether a snapshot holds anything for the caller (not only empty blocks)."""
    for block in chunk.content:
        if block["type"] == "text":
            if block["text"]:
                return True
        elif block["type"] == "thinking":
            if block["thinking"] or "redacted_data" in block:
                return True
        else:
            return True
    return False


def _running_loop() -> object:
    """The running asyncio loop (None under another event loop, e.g. trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a stream's body after its end-of-stream event, bounded.

    The end-of-stream event usually comes a few bytes before the end of the HTTP body (the
    chunked-encoding terminator). A response closed before its body ended makes httpcore
    drop the connection, so every streamed request would open a new one; read to the end,
    so that the connection goes back to the pool. A server that keeps sending, or is slow
    to end the body, is not waited for: the response is closed and only the connection is
    lost. The answer is complete already, so a broken connection here is no error.
    """
    received = 0
    with anyio.move_on_after(_DRAIN_SECONDS):
        try:
            async for chunk in chunks:
                received += len(chunk)
                if received > _DRAIN_BYTES:
                    return
        except httpx2.TransportError:
            return


async def _finish(events: AsyncGenerator[object], chunks: AsyncGenerator[bytes]) -> None:
    """End a body's iterators after its response was closed, in this task.

    Closed from outside mid-body (an interrupt between two reads, a consumer that stops, an
    error event), httpx2's response stream leaves the connection pool's body iterator below
    it suspended (its own close does not close that one): the garbage collector would close
    it in a task of its own, after the reply. The byte iterator resumed instead, with the
    response closed, every layer below ends at once, in this task: at the closed
    connection's read error (nothing is read from the network), or after the bytes already
    received (not parsed).
    """
    try:
        if getattr(chunks, "ag_frame", None) is not None:  # not ended (no timer otherwise)
            # Bounded as the drain: a transport that would wait on the network is not waited
            # for (HTTP/1.1 does not: its connection is closed).
            with anyio.move_on_after(_DRAIN_SECONDS):
                async for _ in chunks:
                    pass
    except Exception:
        # The body is closed: how its rest fails is no news (mostly the closed connection's
        # read error); raised here, in the stream's ``finally``, it would replace the
        # answer's own outcome.
        pass
    finally:
        await events.aclose()  # suspended above the bytes, or ended: closed at once
        await chunks.aclose()  # ended, but after an unexpected error


# ``_client_loop`` of a client built outside any event loop and not used yet: the first
# event loop that uses it adopts it.
_UNBOUND = object()
# Transports replaced after a settings change that stay open for the requests still using
# them; past this many, the oldest (replaced long ago) is closed.
_KEEP_RETIRED = 4


async def _close_transport(lean: LeanHTTP | None, client: SDKClient | None, owner: object) -> None:
    """Close a model's transport: the lean client and the SDK client of this event loop."""
    loop = _running_loop()
    if lean is not None:
        await lean.aclose(loop)
    # A client of another (finished) event loop cannot be closed from this one.
    if client is not None and (owner is _UNBOUND or owner is loop):
        await client.close()


class StreamMark(enum.Enum):
    """What ``_check_event`` returns for an event that is a marker, not a payload.

    The provider's end-of-stream marker is the normal end of an answer, so it is a value
    the streaming loop tests for, not an exception it catches.
    """

    END = "end"


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedCall:
    """What one request sends: its JSON body, the SDK's request options, the output type."""

    body: dict[str, object]
    options: dict[str, object]
    structured: type[BaseModel] | None


_LEAN_ERRORS: SDKErrors = (LeanStatusError, LeanConnectionError, LeanError)


class _LeanAttempt:
    """One try at a request on the lean path (what the retry policy calls again).

    One object where a closure would hold a function, its cell tuple and a cell per
    variable, all tracked by the cycle collector for as long as the request waits.
    """

    __slots__ = ("body", "headers", "lean", "loop", "path", "stream", "timeout")

    def __init__(
        self,
        lean: LeanHTTP,
        loop: object,
        path: str,
        body: bytes,
        stream: bool,
        headers: dict[str, str] | None,
        timeout: object,
    ) -> None:
        self.lean, self.loop, self.path, self.body = lean, loop, path, body
        self.stream, self.headers, self.timeout = stream, headers, timeout

    def __call__(self) -> Awaitable[httpx2.Response]:
        return self.lean.post(
            self.loop,
            self.path,
            self.body,
            stream=self.stream,
            headers=self.headers,
            request_timeout=self.timeout,
        )


class StreamState(Protocol):
    """Accumulates one provider's stream events into cumulative snapshots."""

    finish_reason: str | None

    def feed(self, event: JSONObject) -> bool:
        """Apply one event; return whether the visible content changed."""

    def snapshot(self, *, final: bool, elapsed: float = 0.0) -> ChatResponse:
        """The cumulative response so far."""


class HTTPChatModel(ChatModel):
    """Base of the SDK-backed adapters (not public API).

    A subclass names its SDK and client class; ``_client_kwargs`` may add the flavour's
    own arguments (Azure endpoint, AWS region...).
    """

    _path: str = ""
    sdk: ClassVar[SDK]
    client_class: ClassVar[str]
    auth_hint: ClassVar[str] = ""
    """Appended to a client-construction error (where the credentials come from)."""

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None,
        base_url: str | None,
        stream: bool,
        client_kwargs: Mapping[str, object] | None,
        generate_kwargs: Mapping[str, object] | None,
        retry: RetryPolicy | None,
        max_retries: int | None,
    ) -> None:
        super().__init__(model_name, stream)
        self.api_key = api_key
        self.base_url = base_url
        self.client_kwargs = dict(client_kwargs or {})
        self.generate_kwargs = dict(generate_kwargs or {})
        retry = retry or RetryPolicy()
        if max_retries is not None:
            retry = dataclasses.replace(retry, max_retries=max_retries)
        self.retry = retry
        self._client: SDKClient | None = None
        self._client_loop: object = None
        self._lean: LeanHTTP | None = None
        self._built_with: tuple[object, ...] | None = None  # see ``_follow_settings``
        # Transports replaced after a settings change, closed by ``aclose``.
        self._retired: list[tuple[LeanHTTP | None, SDKClient | None, object]] = []

    def _client_kwargs(self) -> dict[str, object]:
        """SDK client arguments: the user's ``client_kwargs``, our key and URL, SDK retries off.

        Retries are ours (``RetryPolicy``), so the SDK must never retry on its own.
        """
        kwargs: dict[str, object] = {**self.client_kwargs, "max_retries": 0}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        return kwargs

    # -- provider hooks ------------------------------------------------------------------
    def _make_client(self) -> SDKClient:
        """Construct the SDK client (``client_class`` of ``sdk``, SDK retries off)."""
        return self.sdk.build(
            self.client_class, self._client_kwargs(), provider=self.provider, hint=self.auth_hint
        )

    def _lean_transport(self) -> LeanHTTP | None:
        """The SDK-free transport for this configuration, or None to go through the SDK."""
        return None

    def _sdk_errors(self) -> SDKErrors:
        """The SDK's (status error, connection error, root error) classes."""
        return self.sdk.errors()

    def _request_options(self) -> dict[str, object]:
        """Base SDK request options (auth scheme...)."""
        return self.sdk.request_options()

    def _request_path(self, stream: bool) -> str:
        """The URL path of a request (after the client's base URL)."""
        return self._path

    @abstractmethod
    def format_request(
        self, request: ModelRequest, *, stream: bool | None = None
    ) -> dict[str, object]:
        """The wire-format request body of ``request`` (``stream``: override ``self.stream``)."""

    @abstractmethod
    def _parse(
        self, data: JSONValue, status: int, elapsed: float, structured: type[BaseModel] | None
    ) -> ChatResponse:
        """Build the response of a non-streaming call."""

    @abstractmethod
    def _new_state(self) -> StreamState:
        """A fresh stream accumulator."""

    @abstractmethod
    def _check_event(self, event: str, data: bytes) -> JSONObject | StreamMark | None:
        """Decode one SSE event: the payload, ``StreamMark.END`` or None to skip it.

        Returns ``StreamMark.END`` at the provider's end-of-stream marker (the loop reads
        no further event) and raises a ``ModelError`` for an error event.
        """

    def _finish_stream(
        self, response: ChatResponse, structured: type[BaseModel] | None
    ) -> ChatResponse:
        """Post-process the final response: the structured output, validated from its text."""
        if structured is not None:
            apply_structured_output(response, structured, response.get_text() or None)
        return response

    # -- client --------------------------------------------------------------------------
    def _prepare_client(self) -> None:
        """Import the SDK and build the client now, at construction (subclasses call this).

        Importing a provider SDK takes a few hundred milliseconds: paid here, it does not
        stall the first request. Without credentials the client is left unbuilt: the first
        call builds it again and raises ``AuthenticationError`` then, as a lazy client would.
        A configuration the lean path covers (``_lean_transport``) imports no SDK at all: its
        requests go through ``httpx2`` directly (``client`` still builds the SDK client, on
        first access).
        """
        self._built_with = self._connection_settings()
        warm_prices(self.provider, self.base_url)  # the first answer's price, in the background
        self._lean = self._lean_transport()
        if self._lean is not None:
            return
        try:
            self._client = self._make_client()
        except AuthenticationError:
            return
        loop = _running_loop()
        self._client_loop = _UNBOUND if loop is None else loop

    def _connection_settings(self) -> tuple[object, ...]:
        """What the transport is built from and a user may change on a live model."""
        kwargs = {k: dict(v) if isinstance(v, dict) else v for k, v in self.client_kwargs.items()}
        return (self.api_key, self.base_url, kwargs)

    def _follow_settings(self) -> None:
        """Rebuild the transport if ``api_key``, ``base_url`` or ``client_kwargs`` changed.

        Checked before every request (a few comparisons): a key rotated or an endpoint
        moved on a live model is used from the next request on, by either transport. The
        old transport is not closed under the requests still using it: ``aclose`` closes it.
        """
        built = self._built_with  # (key, url, a copy of client_kwargs down to its dicts)
        if (
            built is not None
            and built[0] == self.api_key
            and built[1] == self.base_url
            and built[2] == self.client_kwargs
        ):
            return
        self._retired.append((self._lean, self._client, self._client_loop))
        self._client = None
        self._prepare_client()

    @property
    def client(self) -> SDKClient:
        """The SDK client (built at construction; rebuilt after ``aclose`` or a new loop).

        Raises:
            AuthenticationError: when no API key is given or found in the environment.
        """
        loop = _running_loop()
        if self._client is not None and self._client_loop is not loop:
            if self._client_loop is _UNBOUND:
                self._client_loop = loop  # built outside any loop, never used: adopt it
            else:
                # Its pooled connections belong to another (likely closed) event loop, as
                # when a script calls asyncio.run() twice with one model: a fresh client.
                self._client = None
        if self._client is None:
            self._client = self._make_client()
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the SDK client (its connection pool). Safe to call more than once."""
        transports = [*self._retired, (self._lean, self._client, self._client_loop)]
        self._retired, self._client = [], None
        for lean, client, owner in transports:
            await _close_transport(lean, client, owner)

    # -- requests ------------------------------------------------------------------------
    async def _request(self, request: ModelRequest) -> ChatResponse:
        """Ask for the next assistant turn and wait for the whole answer.

        See ``ChatModel.request``. ``settings`` keys this adapter does not know are sent as
        request-body fields; ``extra_headers`` and ``timeout`` shape the HTTP request.

        Raises:
            ModelError: a subclass describing the failure, after retries.
        """
        started = time.perf_counter()
        attempt, errors, structured = await self._attempt(request, stream=False)
        response = await self._with_retries(attempt, errors)
        data = loads_body(self.provider, response.content)
        elapsed = time.perf_counter() - started
        try:
            parsed = self._parse(data, response.status_code, elapsed, structured)
        except _SHAPE_ERRORS as err:
            raise self._shape_error(data, err) from err
        except ModelError as err:
            raise self.owned(err) from err
        return fill_cost(parsed, self.model_name, self.provider, self.base_url)  # USD price

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Ask for the next assistant turn as cumulative chunks (the last one complete).

        The request is sent when the first chunk is asked for; the HTTP response is closed
        however the iteration ends. Same arguments and errors as :meth:`request`.
        """
        started = time.perf_counter()
        attempt, errors, structured = await self._attempt(request, stream=True)

        async def open_stream() -> AsyncGenerator[ChatResponse, None]:
            return self._stream(await attempt(), started, structured)

        first, rest = await self._start_stream(open_stream, errors)
        # The rest is read here, not through a generator of its own: every layer between the
        # parser and the agent costs each delta a generator switch.
        try:
            if first is not None:
                yield first
            async for chunk in rest:
                yield chunk
        finally:
            await rest.aclose()

    async def _start_stream(
        self,
        open_stream: Callable[[], Awaitable[AsyncGenerator[ChatResponse, None]]],
        errors: SDKErrors | None = None,
    ) -> tuple[ChatResponse | None, AsyncGenerator[ChatResponse, None]]:
        """The stream of one request, started: its first visible chunk and the rest.

        Opening the stream and reading it up to its first content or tool-call delta is one
        attempt of the retry policy: a connection dropped before anything reached the
        caller is retried like a refused connection (the snapshots before it, which show
        nothing, are dropped). Once a chunk with content has been yielded, a failure is
        raised, never retried: the caller has seen part of the answer.

        Args:
            open_stream: One attempt: send the request, return its snapshots.
            errors: The client's error classes (see ``_with_retries``).

        Returns:
            The first visible chunk (None: the stream ended without one) and the stream
            of the chunks after it, which the caller must close.
        """

        async def attempt() -> tuple[ChatResponse | None, AsyncGenerator[ChatResponse, None]]:
            chunks = await open_stream()
            try:
                async for chunk in chunks:
                    if chunk.usage is not None or _shows_something(chunk):  # or the final one
                        return chunk, chunks
            except BaseException:
                await chunks.aclose()
                raise
            return None, chunks

        return await self._with_retries(attempt, errors)

    def _prepare(self, request: ModelRequest, *, stream: bool) -> PreparedCall:
        """The body, SDK request options and structured-output model of one request."""
        settings = request.settings
        options = self._request_options()
        if "extra_headers" in settings:
            options["headers"] = settings["extra_headers"]
        if "timeout" in settings:
            options["timeout"] = settings["timeout"]
        body = self.format_request(request, stream=stream)
        return PreparedCall(body, options, request.native_output)

    def encode_body(self, body: Mapping[str, object]) -> bytes:
        """The request body's bytes (compact UTF-8 JSON; a provider may reuse cached parts)."""
        return dumps(body)

    async def _attempt(
        self, request: ModelRequest, *, stream: bool
    ) -> tuple[Callable[[], Awaitable[httpx2.Response]], SDKErrors | None, type[BaseModel] | None]:
        """One try at ``request`` on the current transport, its client's errors, its output type.

        Called once per request (the transport follows changed settings here); the try it
        returns is what the retry policy repeats. The body's dicts and lists die here: the
        try holds only its bytes, so that a request waiting for its answer holds few objects
        that the cycle collector tracks (their number sets how often it runs; see
        ``docs/benchmarks.md``, Round 6).
        """
        call = self._prepare(request, stream=stream)
        body, options = self.encode_body(call.body), call.options
        self._follow_settings()
        if len(self._retired) > _KEEP_RETIRED:  # settings changed again and again: bounded
            await _close_transport(*self._retired.pop(0))
        if self._lean is not None:
            lean = self._lean_attempt(self._lean, body, stream, options)
            return lean, _LEAN_ERRORS, call.structured
        return self._sdk_attempt(body, stream, options), None, call.structured

    def _sdk_attempt(
        self, body: bytes, stream: bool, options: dict[str, object]
    ) -> Callable[[], Awaitable[httpx2.Response]]:
        # A method of its own: the variables a closure captures get their cells when the
        # function that defines it starts, whichever path it then takes.
        client = self.client
        path = self._request_path(stream)

        async def attempt() -> httpx2.Response:
            # Pre-serialized ``content``: the SDK neither walks nor re-encodes the body.
            result = await client.post(
                path, cast_to=httpx2.Response, content=body, options=options, stream=stream
            )
            return cast(httpx2.Response, result)

        return attempt

    def _with_retries(
        self, attempt: Callable[[], Awaitable[_T]], errors: SDKErrors | None = None
    ) -> Awaitable[_T]:
        """Run ``attempt`` under the retry policy, the client's errors mapped to ours.

        A plain function returning the retry loop's coroutine: a layer that only awaited
        it would be one more object held by every waiting request.

        Args:
            attempt: One try.
            errors: The (status, connection, root) error classes of the client that
                ``attempt`` uses (None: the SDK's).
        """
        status_error, connection_error, base_error = errors or self._sdk_errors()
        return send_with_retries(
            attempt,
            self.retry,
            provider=self.provider,
            status_error=status_error,
            connection_error=connection_error,
            base_error=base_error,
        )

    def _lean_attempt(
        self, lean: LeanHTTP, body: bytes, stream: bool, options: dict[str, object]
    ) -> _LeanAttempt:
        given = options.get("headers")
        headers = {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else None
        path, timeout = self._request_path(stream), options.get("timeout")
        return _LeanAttempt(lean, _running_loop(), path, body, stream, headers, timeout)

    def owned(self, err: ModelError) -> ModelError:
        """``err`` naming this model's provider (a parser raises without knowing it)."""
        return owned(self.provider, err)

    def _shape_error(self, data: object, err: Exception) -> ModelResponseError:
        return ModelResponseError(
            f"{self.provider}: unexpected answer shape ({err!r}): {str(data)[:200]}",
            provider=self.provider,
        )

    async def _stream(
        self,
        response: httpx2.Response,
        started: float,
        structured: type[BaseModel] | None,
    ) -> AsyncGenerator[ChatResponse, None]:
        """Yield cumulative snapshots; the HTTP response is closed however this ends."""
        state = self._new_state()
        chunks = response.aiter_bytes()
        events = iter_sse(chunks)
        done = False
        # Bound once: the loop below runs once per streamed token.
        check, feed, snapshot, end = self._check_event, state.feed, state.snapshot, StreamMark.END
        try:
            async for batch in events:
                for name, data in batch:
                    payload = check(name, data)
                    if payload is end:
                        done = True
                        break
                    if payload is None:
                        continue
                    try:
                        changed = feed(payload)
                    except _SHAPE_ERRORS as err:
                        raise self._shape_error(payload, err) from err
                    except ModelError as err:
                        raise self.owned(err) from err
                    if changed:
                        yield snapshot(final=False)
                if done:
                    break
            if done:
                await _drain(chunks)
        except httpx2.TransportError as err:
            raise ModelConnectionError(
                f"{self.provider}: the stream broke off: {err!r}", provider=self.provider
            ) from err
        finally:
            # Shielded: a cancelled consumer must still release the connection, now.
            with anyio.CancelScope(shield=True):
                await response.aclose()
                await _finish(events, chunks)
        yield self._stream_end(state, done, started, structured)

    def _stream_end(
        self, state: StreamState, done: bool, started: float, structured: type[BaseModel] | None
    ) -> ChatResponse:
        """The final response of a stream (``done``: its end marker came), priced."""
        if not done and state.finish_reason is None:
            raise ModelConnectionError(
                f"{self.provider}: the stream ended before the answer was complete",
                provider=self.provider,
            )
        try:
            final = state.snapshot(final=True, elapsed=time.perf_counter() - started)
        except ModelError as err:  # usage that cannot be counted
            raise self.owned(err) from err
        fill_cost(final, self.model_name, self.provider, self.base_url)  # USD, when priced
        return self._finish_stream(final, structured)

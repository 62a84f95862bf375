"""``AnthropicBedrockModel``: Claude on Amazon Bedrock.

Built on the ``anthropic`` SDK's own ``AsyncAnthropicBedrock`` client (its regional endpoint,
AWS SigV4 signing through ``botocore``, or a Bedrock API key). A plain request takes the lean
path of ``AnthropicChatModel`` (``POST /model/{model}/invoke``, the Messages body without
``model``). Streams are AWS event-stream frames, not SSE, so a streamed request takes the SDK's
typed path (``client.messages.create(stream=True)``, decoded by the SDK) and its events feed
the same accumulator as every Anthropic stream.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx2

from agentkit.exceptions import ModelConnectionError
from agentkit.models._anthropic import AnthropicChatModel
from agentkit.models._anthropic_format import AnthropicStreamState
from agentkit.models._base import ChatResponse, ModelRequest
from agentkit.models._common import require_extra
from agentkit.models._http import map_status_error

if TYPE_CHECKING:
    from anthropic import AsyncAnthropicBedrock, AsyncStream
    from anthropic.types import MessageParam, RawMessageStreamEvent
    from pydantic import BaseModel

__all__ = ["BEDROCK_ANTHROPIC_VERSION", "AnthropicBedrockModel"]

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
"""The ``anthropic_version`` Bedrock documents for the Messages body."""


class AnthropicBedrockModel(AnthropicChatModel):
    """Claude served by Amazon Bedrock.

    Args:
        model_name: The Bedrock model or inference profile id, e.g.
            ``"us.anthropic.claude-sonnet-4-5-20250929-v1:0"``.
        aws_region: ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / the profile's when None.
        aws_access_key: With ``aws_secret_key`` (and ``aws_session_token``): explicit
            credentials; otherwise botocore's chain (environment, profile, instance role).
        aws_secret_key: See ``aws_access_key``.
        aws_session_token: See ``aws_access_key``.
        aws_profile: A named AWS profile.
        api_key: A Bedrock API key (``AWS_BEARER_TOKEN_BEDROCK``), instead of SigV4.
        **kwargs: ``AnthropicChatModel`` arguments (``stream``, ``max_tokens``, ``thinking``,
            ``base_url``, ``retry``...).

    Raises:
        MissingDependencyError: SigV4 signing without ``botocore`` (names the extra).
    """

    provider = "bedrock"
    client_class = "AsyncAnthropicBedrock"
    native_tool_search = False  # tool search there is behind a platform beta
    check_api_credentials = False
    beta_header = False  # Bedrock's Messages body takes ``anthropic_beta`` instead
    auth_hint = " (AWS_REGION, AWS credentials or AWS_BEARER_TOKEN_BEDROCK)"

    def __init__(
        self,
        model_name: str,
        *,
        aws_region: str | None = None,
        aws_access_key: str | None = None,
        aws_secret_key: str | None = None,
        aws_session_token: str | None = None,
        aws_profile: str | None = None,
        api_key: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.aws = {
            "aws_region": aws_region,
            "aws_access_key": aws_access_key,
            "aws_secret_key": aws_secret_key,
            "aws_session_token": aws_session_token,
            "aws_profile": aws_profile,
        }
        super().__init__(model_name, api_key=api_key, **kwargs)

    def _client_kwargs(self) -> dict[str, object]:
        kwargs = super()._client_kwargs()
        kwargs.update({k: v for k, v in self.aws.items() if v is not None})
        if "api_key" not in kwargs and not os.environ.get("AWS_BEARER_TOKEN_BEDROCK"):
            require_extra("botocore", "bedrock", "Bedrock with AWS credentials (SigV4)")
        return kwargs

    def _request_path(self, stream: bool) -> str:
        # Only plain requests are sent as raw bytes: streams take the SDK's typed path.
        return f"/model/{urllib.parse.quote(self.model_name, safe=':')}/invoke"

    def format_request(
        self, request: ModelRequest, *, stream: bool | None = None
    ) -> dict[str, object]:
        """The Messages body as Bedrock takes it (``model`` and ``stream`` go in the URL)."""
        body = super().format_request(request, stream=stream)
        body.pop("model", None)
        body.pop("stream", None)
        body.setdefault("anthropic_version", BEDROCK_ANTHROPIC_VERSION)
        return body

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """Stream the next assistant turn through the SDK's event-stream decoder.

        Same argument as ``AnthropicChatModel.request_stream``.
        """
        from anthropic import NOT_GIVEN

        started = time.perf_counter()
        call = self._prepare(request, stream=False)
        body = call.body
        body.pop("anthropic_version", None)  # the SDK adds its own
        max_tokens = cast(int, body.pop("max_tokens"))
        turns = cast("list[MessageParam]", body.pop("messages"))
        headers = cast("dict[str, str] | None", call.options.get("headers"))
        timeout = cast("float | None", call.options.get("timeout"))
        client = cast("AsyncAnthropicBedrock", self.client)

        async def attempt() -> AsyncStream[RawMessageStreamEvent]:
            return await client.messages.create(
                model=self.model_name,
                max_tokens=max_tokens,
                messages=turns,
                stream=True,
                extra_body=body,
                extra_headers=headers,
                timeout=timeout if timeout is not None else NOT_GIVEN,
            )

        async def open_stream() -> AsyncGenerator[ChatResponse, None]:
            return self._typed_stream(await attempt(), started, call.structured)

        first, rest = await self._start_stream(open_stream)  # a cut before any delta is retried
        try:
            if first is not None:
                yield first
            async for chunk in rest:
                yield chunk
        finally:
            await rest.aclose()

    async def _typed_stream(
        self,
        events: AsyncStream[RawMessageStreamEvent],
        started: float,
        structured: type[BaseModel] | None,
    ) -> AsyncGenerator[ChatResponse, None]:
        """Cumulative snapshots from the SDK's decoded events.

        The stream is closed however this ends (shielded from cancellation).
        """
        import anthropic

        state = AnthropicStreamState()
        done = False
        try:
            async for event in events:
                payload = event.model_dump(mode="json", exclude_none=True)
                if payload.get("type") == "message_stop":
                    done = True
                    break
                if state.feed(payload):
                    yield state.snapshot(final=False)
        except anthropic.APIStatusError as err:
            raise map_status_error(self.provider, err.status_code, err.body, str(err)) from err
        except (anthropic.APIError, httpx2.TransportError) as err:
            raise ModelConnectionError(
                f"{self.provider}: the stream broke off: {err!r}", provider=self.provider
            ) from err
        finally:
            with anyio.CancelScope(shield=True):
                await events.close()
        yield self._stream_end(state, done, started, structured)

"""The SDK clients behind the HTTP adapters, set up in one place.

Every adapter talks to its provider through an official SDK client (``openai`` or
``anthropic``, in one of their flavours: plain, Azure, Bedrock, Vertex). What differs between
them is data: the SDK, the client class, its arguments. ``SDK.build`` constructs any of
them the same way (SDK retries off, constructor errors turned into ``AuthenticationError``),
and ``SDK.errors`` gives the exception classes ``send_with_retries`` maps.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from agentkit.exceptions import AuthenticationError

if TYPE_CHECKING:
    import httpx2

__all__ = ["ANTHROPIC", "OPENAI", "SDK", "SDKClient", "SDKErrors"]

SDKErrors = tuple[type[Exception], type[Exception], type[Exception]]
"""An SDK's (status error, connection error, root error) classes."""


class SDKClient(Protocol):
    """What the adapters use of an SDK client: its low-level ``post`` and ``close``."""

    async def post(
        self,
        path: str,
        *,
        cast_to: type[httpx2.Response],
        content: bytes,
        options: Mapping[str, object],
        stream: bool,
    ) -> object:
        """Send one request through the SDK (auth, base URL, headers, timeouts)."""

    async def close(self) -> None:
        """Close the connection pool."""


@dataclass(frozen=True, slots=True)
class SDK:
    """One provider SDK.

    Attributes:
        module: The package to import (``"openai"``, ``"anthropic"``).
        root_error: The name of its root exception class.
        options: The request options every call carries (the auth scheme...).
    """

    module: str
    root_error: str
    options: Mapping[str, object] = field(default_factory=dict)

    def errors(self) -> SDKErrors:
        """The SDK's (status error, connection error, root error) classes."""
        sdk = importlib.import_module(self.module)
        return sdk.APIStatusError, sdk.APIConnectionError, getattr(sdk, self.root_error)

    def request_options(self) -> dict[str, object]:
        """A fresh copy of the base request options (a call adds its headers, timeout)."""
        return dict(self.options)

    def build(
        self, client_class: str, kwargs: Mapping[str, object], *, provider: str, hint: str = ""
    ) -> SDKClient:
        """Construct ``client_class`` of this SDK with ``kwargs``.

        Args:
            client_class: The class name (``"AsyncOpenAI"``, ``"AsyncAnthropicBedrock"``...).
            kwargs: Its arguments (the adapter's ``_client_kwargs``: SDK retries off).
            provider: Provider name for errors.
            hint: Appended to the error message (where credentials come from).

        Raises:
            AuthenticationError: the SDK refused the arguments (no key, no endpoint...).
        """
        sdk = importlib.import_module(self.module)
        factory = getattr(sdk, client_class)
        try:
            return cast(SDKClient, factory(**kwargs))
        except (getattr(sdk, self.root_error), ValueError) as err:
            raise AuthenticationError(f"{provider}: {err}{hint}", provider=provider) from err


OPENAI = SDK("openai", "OpenAIError", {"security": {"bearer_auth": True}})
"""The ``openai`` SDK (OpenAI, Azure OpenAI, compatible servers)."""

ANTHROPIC = SDK("anthropic", "AnthropicError")
"""The ``anthropic`` SDK (Anthropic, Bedrock, Vertex)."""

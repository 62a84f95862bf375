"""Azure OpenAI: both OpenAI adapters through ``openai.AsyncAzureOpenAI``.

Azure serves a model under a *deployment* name chosen by the resource owner; the adapters take
that name as ``model_name``. Chat Completions go to
``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...``, Responses to
``{endpoint}/openai/responses?api-version=...`` with the deployment as ``model``, exactly as
the SDK's own typed methods send them. Credentials follow the SDK: an API key (``api-key``
header), a Microsoft Entra ID token, or a token provider called before every request.

Example:
    >>> from azure.identity.aio import DefaultAzureCredential, get_bearer_token_provider
    >>> token = get_bearer_token_provider(  # doctest: +SKIP
    ...     DefaultAzureCredential(), "https://cognitiveservices.azure.com/.default"
    ... )
    >>> model = AzureOpenAIChatModel(  # doctest: +SKIP
    ...     "my-gpt-4o", azure_endpoint="https://res.openai.azure.com",
    ...     api_version="2024-10-21", azure_ad_token_provider=token,
    ... )
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from agentkit.exceptions import AuthenticationError
from agentkit.models._openai import OpenAIChatModel
from agentkit.models._openai_responses import OpenAIResponsesModel

__all__ = ["AzureOpenAIChatModel", "AzureOpenAIResponsesModel", "azure_client_kwargs"]

TokenProvider = Callable[[], "str | Awaitable[str]"]


def azure_client_kwargs(
    base: dict[str, object],
    *,
    azure_endpoint: str | None,
    api_version: str | None,
    azure_ad_token: str | None,
    azure_ad_token_provider: TokenProvider | None,
    provider: str,
) -> dict[str, object]:
    """``AsyncAzureOpenAI`` arguments, checked: a missing setting names its variable.

    Args:
        base: The adapter's client arguments (user ``client_kwargs``, key, base URL).
        azure_endpoint: ``https://<resource>.openai.azure.com``; ``AZURE_OPENAI_ENDPOINT``
            when None (unused when ``base`` holds a ``base_url``).
        api_version: The API version; ``OPENAI_API_VERSION`` when None.
        azure_ad_token: A Microsoft Entra ID token; ``AZURE_OPENAI_AD_TOKEN`` when None.
        azure_ad_token_provider: Called before each request for a fresh token.
        provider: Provider name for errors.

    Raises:
        AuthenticationError: no endpoint, API version or credential anywhere.
    """
    kwargs = dict(base)
    version = api_version or os.environ.get("OPENAI_API_VERSION")
    if not version:
        raise AuthenticationError(
            f"{provider}: no API version: pass api_version= or set OPENAI_API_VERSION",
            provider=provider,
        )
    kwargs["api_version"] = version
    if "base_url" not in kwargs:
        endpoint = azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
        if not endpoint:
            raise AuthenticationError(
                f"{provider}: no endpoint: pass azure_endpoint= or set AZURE_OPENAI_ENDPOINT",
                provider=provider,
            )
        kwargs["azure_endpoint"] = endpoint
    if azure_ad_token_provider is not None:
        kwargs["azure_ad_token_provider"] = azure_ad_token_provider
    elif azure_ad_token is not None:
        kwargs["azure_ad_token"] = azure_ad_token
    env = ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")
    credentials = ("api_key", "azure_ad_token", "azure_ad_token_provider", "default_headers")
    if not any(kwargs.get(k) for k in credentials) and not any(os.environ.get(e) for e in env):
        raise AuthenticationError(
            f"{provider}: no credentials: pass api_key=, azure_ad_token= or "
            "azure_ad_token_provider=, or set AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN",
            provider=provider,
        )
    return kwargs


class _AzureClient:
    """The Azure flavour of an OpenAI adapter: ``AsyncAzureOpenAI`` and its settings."""

    client_class = "AsyncAzureOpenAI"
    provider: str
    azure_endpoint: str | None
    api_version: str | None
    azure_ad_token: str | None
    azure_ad_token_provider: TokenProvider | None

    def _azure_settings(
        self,
        azure_endpoint: str | None,
        api_version: str | None,
        azure_ad_token: str | None,
        azure_ad_token_provider: TokenProvider | None,
    ) -> None:
        self.azure_endpoint = azure_endpoint
        self.api_version = api_version
        self.azure_ad_token = azure_ad_token
        self.azure_ad_token_provider = azure_ad_token_provider

    def _azure_kwargs(self, base: dict[str, object]) -> dict[str, object]:
        return azure_client_kwargs(
            base,
            azure_endpoint=self.azure_endpoint,
            api_version=self.api_version,
            azure_ad_token=self.azure_ad_token,
            azure_ad_token_provider=self.azure_ad_token_provider,
            provider=self.provider,
        )


class AzureOpenAIChatModel(_AzureClient, OpenAIChatModel):
    """Chat Completions on Azure OpenAI.

    Args:
        model_name: The *deployment* name.
        azure_endpoint: ``https://<resource>.openai.azure.com``; ``AZURE_OPENAI_ENDPOINT``
            when None.
        api_version: e.g. ``"2024-10-21"``; ``OPENAI_API_VERSION`` when None.
        api_key: API key; ``AZURE_OPENAI_API_KEY`` when None and no token is given.
        azure_ad_token: A Microsoft Entra ID token; ``AZURE_OPENAI_AD_TOKEN`` when None.
        azure_ad_token_provider: Returns a fresh Entra ID token (sync or async); called
            before every request.
        **kwargs: ``OpenAIChatModel`` arguments (``stream``, ``base_url``, ``retry``...);
            a ``base_url`` replaces ``azure_endpoint`` (it may include the deployment).
    """

    def __init__(
        self,
        model_name: str,
        *,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        azure_ad_token: str | None = None,
        azure_ad_token_provider: TokenProvider | None = None,
        **kwargs: Any,
    ) -> None:
        self._azure_settings(azure_endpoint, api_version, azure_ad_token, azure_ad_token_provider)
        kwargs.setdefault("provider", "azure")
        super().__init__(model_name, api_key=api_key, **kwargs)
        if "/deployments/" not in (self.base_url or ""):
            # The SDK adds the deployment only for typed calls; ours give the full path.
            deployment = urllib.parse.quote(model_name, safe="")
            self._path = f"/deployments/{deployment}/chat/completions"

    def _client_kwargs(self) -> dict[str, object]:
        return self._azure_kwargs(super()._client_kwargs())


class AzureOpenAIResponsesModel(_AzureClient, OpenAIResponsesModel):
    """The Responses API on Azure OpenAI (same arguments as ``AzureOpenAIChatModel``)."""

    def __init__(
        self,
        model_name: str,
        *,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        azure_ad_token: str | None = None,
        azure_ad_token_provider: TokenProvider | None = None,
        **kwargs: Any,
    ) -> None:
        self._azure_settings(azure_endpoint, api_version, azure_ad_token, azure_ad_token_provider)
        kwargs.setdefault("provider", "azure-responses")
        super().__init__(model_name, api_key=api_key, **kwargs)

    def _client_kwargs(self) -> dict[str, object]:
        return self._azure_kwargs(super()._client_kwargs())

"""``AnthropicVertexModel``: Claude on Google Cloud Vertex AI.

Built on the ``anthropic`` SDK's own ``AsyncAnthropicVertex`` client (its base URL per region
and its Google authentication), with the same lean request path as ``AnthropicChatModel``:
Vertex speaks the Messages format with the model in the URL
(``/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict``,
``:streamRawPredict`` for streams, which are SSE) and ``anthropic_version`` in the body.

Credentials: an ``access_token``, explicit google-auth ``credentials``, or Application Default
Credentials (needs ``google-auth``: ``pip install 'agentkit[vertex]'``).
"""

from __future__ import annotations

import os
import urllib.parse
from typing import TYPE_CHECKING, Any

from agentkit.exceptions import AuthenticationError
from agentkit.models._anthropic import AnthropicChatModel
from agentkit.models._common import require_extra

if TYPE_CHECKING:
    from agentkit.models._base import ModelRequest

__all__ = ["VERTEX_ANTHROPIC_VERSION", "AnthropicVertexModel"]

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
"""The ``anthropic_version`` Vertex AI expects in the body."""


class AnthropicVertexModel(AnthropicChatModel):
    """Claude served by Google Cloud Vertex AI.

    Args:
        model_name: The Vertex model id, e.g. ``"claude-sonnet-4-5@20250929"``.
        region: ``"us-east5"``, ``"global"``...; ``CLOUD_ML_REGION`` when None.
        project_id: The Google Cloud project; ``ANTHROPIC_VERTEX_PROJECT_ID`` when None.
        access_token: A ready OAuth access token (else ``credentials`` or Application
            Default Credentials, refreshed by the SDK).
        credentials: google-auth credentials.
        **kwargs: ``AnthropicChatModel`` arguments (``stream``, ``max_tokens``, ``thinking``,
            ``base_url``, ``retry``...).

    Raises:
        MissingDependencyError: default credentials without ``google-auth`` (the message names the
            extra).
    """

    provider = "vertex"
    client_class = "AsyncAnthropicVertex"
    native_tool_search = False  # tool search there is behind a platform beta
    check_api_credentials = False

    def __init__(
        self,
        model_name: str,
        *,
        region: str | None = None,
        project_id: str | None = None,
        access_token: str | None = None,
        credentials: Any = None,
        **kwargs: Any,
    ) -> None:
        self.region = region or os.environ.get("CLOUD_ML_REGION")
        self.project_id = project_id or os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID")
        self.access_token = access_token
        self.credentials = credentials
        super().__init__(model_name, **kwargs)

    def _client_kwargs(self) -> dict[str, object]:
        if not self.region:
            raise AuthenticationError(
                "vertex: no region: pass region= or set CLOUD_ML_REGION", provider=self.provider
            )
        if not self.project_id:
            raise AuthenticationError(
                "vertex: no project: pass project_id= or set ANTHROPIC_VERTEX_PROJECT_ID",
                provider=self.provider,
            )
        kwargs = {k: v for k, v in super()._client_kwargs().items() if k != "api_key"}
        kwargs.update(region=self.region, project_id=self.project_id)
        if self.access_token is not None:
            kwargs["access_token"] = self.access_token
        if self.credentials is not None:
            kwargs["credentials"] = self.credentials
        if self.access_token is None and self.credentials is None:
            require_extra("google.auth", "vertex", "Vertex AI with Google default credentials")
        return kwargs

    def format_request(
        self, request: ModelRequest, *, stream: bool | None = None
    ) -> dict[str, object]:
        """The Messages body as Vertex takes it.

        No ``model`` (it is in the URL), and ``anthropic_version`` added.
        """
        body = super().format_request(request, stream=stream)
        body.pop("model", None)
        body["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        return body

    def _request_path(self, stream: bool) -> str:
        model = urllib.parse.quote(self.model_name, safe="@")
        specifier = "streamRawPredict" if stream else "rawPredict"
        project = urllib.parse.quote(str(self.project_id), safe="")
        region = urllib.parse.quote(str(self.region), safe="")
        return (
            f"/projects/{project}/locations/{region}/publishers/anthropic/models/"
            f"{model}:{specifier}"
        )

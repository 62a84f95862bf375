"""An OAuth-protected MCP server on 127.0.0.1, built from the mcp SDK's own auth pieces.

``python tests/_oauth_server.py PORT [ACCESS_TTL_SECONDS]`` serves, on one origin:

- the authorization server (the SDK's ``create_auth_routes``: RFC 8414 metadata, dynamic
  client registration, ``/authorize``, ``/token`` with PKCE, refresh and revocation), backed
  by the in-memory provider below, which approves every authorization request at once (the
  "user" always clicks *allow*; the redirect still goes through the client's loopback
  listener);
- the resource server: streamable HTTP at ``/mcp`` behind the SDK's ``RequireAuthMiddleware``
  (RFC 9728 protected-resource metadata, ``WWW-Authenticate`` challenges, audience checked
  against the RFC 8707 ``resource``), with a ``whoami`` tool;
- ``GET /_stats`` (no auth): what happened, as JSON, for the tests to assert on.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections import Counter
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

SCOPE = "mcp:tools"


class AutoApproveProvider:
    """An in-memory authorization server that grants every request (test fixture)."""

    def __init__(self, access_ttl: int) -> None:
        self.access_ttl = access_ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats: Counter[str] = Counter()

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.stats["register"] += 1

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="test-user",
        )
        self.stats["authorize"] += 1
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            # One second of grace: never reject a token the client still believes valid
            # (it computes the expiry from expires_in, to the sub-second).
            expires_at=int(time.time()) + self.access_ttl + 1,
            resource=resource,
            subject="test-user",
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh,
            client_id=client_id,
            scopes=scopes,
            resource=resource,
            subject="test-user",
        )
        return OAuthToken(
            access_token=access,
            expires_in=self.access_ttl,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        self.stats["token:authorization_code"] += 1
        assert client.client_id is not None
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        del self.refresh[refresh_token.token]  # rotated
        self.stats["token:refresh_token"] += 1
        assert client.client_id is not None
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            self.stats["rejected_access_token"] += 1
            return None
        self.stats["accepted_access_token"] += 1
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def build(port: int, access_ttl: int) -> tuple[MCPServer, AutoApproveProvider]:
    base = f"http://127.0.0.1:{port}"
    provider = AutoApproveProvider(access_ttl)
    server = MCPServer(
        "oauth-demo",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=True,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Who the bearer token belongs to."""
        token = get_access_token()
        assert token is not None
        provider.stats["whoami"] += 1
        return f"{token.subject} via {token.client_id} ({' '.join(token.scopes)})"

    @server.custom_route("/_stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        data: dict[str, Any] = dict(provider.stats)
        data["clients"] = [
            {"client_id": c.client_id, "redirect_uris": [str(u) for u in c.redirect_uris or []]}
            for c in provider.clients.values()
        ]
        return JSONResponse(data)

    return server, provider


def main() -> None:
    import uvicorn

    port = int(sys.argv[1])
    ttl = int(sys.argv[2]) if len(sys.argv) > 2 else 3600
    server, _ = build(port, ttl)
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

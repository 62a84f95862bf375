"""Who may call a served MCP HTTP endpoint: bind policy, bearer token, Host/Origin checks.

The threat: a served toolkit can run commands. On loopback any local process (or a web page
through DNS rebinding) can reach it; on any other address, the network can. So:

- a bind to a non-loopback address is refused unless a bearer token is set;
- ``Host``/``Origin`` headers are checked on every bind (the SDK switches the check off for
  anything but ``127.0.0.1``/``localhost``/``::1``; we never do);
- a token can be required on loopback too (``--token`` / ``AGENTKIT_MCP_TOKEN``);
- the URL and the auth mode are printed when the server starts.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "TOKEN_ENV",
    "BearerTokenMiddleware",
    "check_bind",
    "is_loopback",
    "security_settings",
    "startup_message",
]

TOKEN_ENV = "AGENTKIT_MCP_TOKEN"
_WILDCARDS = {"0.0.0.0", "::", ""}


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to expose tools to the network without a token.

    Raises:
        ValueError: ``host`` is reachable from other machines and no token is set.
    """
    if not token and not is_loopback(host):
        raise ValueError(
            f"refusing to serve MCP on {host!r} without a token: anyone who can reach that "
            f"address could call these tools; pass --token (or set {TOKEN_ENV}), or bind "
            "127.0.0.1"
        )


def _host_pattern(host: str) -> str:
    return f"[{host}]:*" if ":" in host and not host.startswith("[") else f"{host}:*"


def _own_names() -> list[str]:
    """Names and addresses this machine answers to (for a wildcard bind)."""
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        infos = []
    names.update(str(info[4][0]) for info in infos)
    return sorted(n for n in names if n)


def _has_port(host: str) -> bool:
    """``name:port`` / ``[v6]:port`` carry a port; ``name``, ``[v6]`` and bare IPv6 do not."""
    if host.startswith("["):
        return "]:" in host
    return host.count(":") == 1


def security_settings(
    host: str, allowed_hosts: Sequence[str] | None = None
) -> TransportSecuritySettings:
    """DNS-rebinding protection for ``host``: always on, whatever the bind address.

    Allowed ``Host`` values: loopback names, the bind address itself (or this machine's
    names and addresses for ``0.0.0.0``/``::``), and ``allowed_hosts`` (``name`` or
    ``name:port``). ``Origin``, when a browser sends one, must be ``http(s)://`` one of them.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    names = ["127.0.0.1", "localhost", "::1"]
    if host in _WILDCARDS:
        names += _own_names()
    elif host not in names:
        names.append(host)
    hosts = [_host_pattern(n) for n in names]
    for extra in allowed_hosts or ():
        hosts.append(extra if _has_port(extra) else _host_pattern(extra))
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class BearerTokenMiddleware:
    """Answer 401 to any HTTP request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authorised HTTP requests (and non-HTTP scopes) through; 401 the rest."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):  # constant time: no timing oracle
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32001, "message": "missing or wrong bearer token"},
            }
        ).encode()
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"www-authenticate", b'Bearer realm="agentkit-mcp"'),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def resolve_token(token: str | None) -> str | None:
    """``token``, else the ``AGENTKIT_MCP_TOKEN`` environment variable, else None."""
    return token or os.environ.get(TOKEN_ENV) or None


def startup_message(host: str, port: int, path: str, token: str | None) -> str:
    """The line printed when an HTTP server starts: where it is and who may call it."""
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{path}"
    if token:
        auth = "bearer token required (Authorization: Bearer ...)"
    else:
        auth = "none - loopback only; any local process can call these tools (set --token)"
    return f"agentkit MCP server on {url} (auth: {auth}; Host/Origin checked)"

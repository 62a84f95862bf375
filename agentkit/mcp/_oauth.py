"""Turnkey OAuth for remote MCP servers: ``HttpServer(url, oauth=OAuth(...))``.

What happens on the first request a server answers with 401 (all of it is the mcp SDK's
``OAuthClientProvider``, which this module configures and feeds):

1. discovery: protected-resource metadata (RFC 9728), then the authorization server's
   metadata (RFC 8414);
2. registration: dynamic client registration (RFC 7591), or a client-ID metadata document
   (``client_metadata_url``), or the pre-registered ``client_id`` you pass;
3. authorization code + PKCE (S256): the authorization URL is printed (and opened in the
   system browser with ``open_browser=True``), and a listener on ``127.0.0.1`` takes the
   redirect (:mod:`agentkit.mcp._loopback`);
4. the code is exchanged for tokens, which are stored (:class:`FileTokenStorage`: one JSON
   file per server under ``~/.config/agentkit/mcp-oauth/``, mode 0600) and refreshed with the
   refresh token when they expire, also after a restart.

``agentkit mcp login URL`` runs the same flow from the command line.

This module imports neither the SDK nor an HTTP stack until a connection is made.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import re
import socket
import sys
import time
import webbrowser
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

import anyio
import anyio.to_thread
from pydantic import AnyUrl

from agentkit.mcp._loopback import wait_for_redirect

if TYPE_CHECKING:
    from mcp.client.auth import OAuthClientProvider, TokenStorage
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

__all__ = ["FileTokenStorage", "OAuth", "build_auth", "default_token_dir"]

logger = logging.getLogger("agentkit.mcp._oauth")

REDIRECT_HOST = "127.0.0.1"
REDIRECT_PATH = "/callback"
_FORMAT = 1  # version of the token file's layout


def default_token_dir() -> Path:
    """Where tokens live: ``$XDG_CONFIG_HOME/agentkit/mcp-oauth`` (``~/.config/...``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "agentkit" / "mcp-oauth"


def _file_name(server_url: str) -> str:
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", urlparse(server_url).netloc or "server")
    digest = hashlib.sha256(server_url.encode()).hexdigest()[:16]
    return f"{host}-{digest}.json"


class FileTokenStorage:
    """The mcp SDK's ``TokenStorage``, in one JSON file readable by its owner only (0600).

    The file holds the server URL, the tokens, when the access token expires (so a
    restarted process refreshes an expired token instead of sending it), and the client
    registration. Writes are atomic (a temporary file renamed over the old one). A file
    that cannot be parsed is reported and treated as empty: the next login overwrites it.

    Args:
        path: The file. :meth:`for_server` picks one per server URL.
        server_url: The server the file belongs to (recorded in it, for humans).
    """

    def __init__(self, path: str | os.PathLike[str], server_url: str | None = None) -> None:
        self.path = Path(path)
        self.server_url = server_url

    @classmethod
    def for_server(
        cls, server_url: str, directory: str | os.PathLike[str] | None = None
    ) -> FileTokenStorage:
        """The storage of ``server_url`` in ``directory`` (default :func:`default_token_dir`)."""
        folder = Path(directory) if directory is not None else default_token_dir()
        return cls(folder / _file_name(server_url), server_url)

    def __repr__(self) -> str:
        return f"FileTokenStorage({str(self.path)!r})"

    # -- file access (in a worker thread: never block the event loop on disk) ----------
    def _read_sync(self) -> dict[str, object]:
        try:
            mode = self.path.stat().st_mode
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        if mode & 0o077:
            logger.warning("%s was readable by others; its mode is now 0600", self.path)
            self.path.chmod(0o600)
        try:
            data = json.loads(text)
        except ValueError:
            logger.warning("%s is not valid JSON; ignoring it (log in again)", self.path)
            return {}
        return data if isinstance(data, dict) else {}

    def _write_sync(self, data: dict[str, object]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    async def _read(self) -> dict[str, object]:
        return await anyio.to_thread.run_sync(self._read_sync)

    async def _update(self, **changes: object) -> None:
        data = await self._read()
        data.update(changes, format=_FORMAT)
        if self.server_url is not None:
            data["server_url"] = self.server_url
        await anyio.to_thread.run_sync(self._write_sync, data)

    # -- TokenStorage ------------------------------------------------------------------
    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, or None."""
        from mcp.shared.auth import OAuthToken

        raw = (await self._read()).get("tokens")
        return OAuthToken.model_validate(raw) if isinstance(raw, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store ``tokens``, with the absolute time their access token expires."""
        expires = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        await self._update(tokens=tokens.model_dump(mode="json"), token_expires_at=expires)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, or None."""
        from mcp.shared.auth import OAuthClientInformationFull

        raw = (await self._read()).get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if isinstance(raw, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store the client registration."""
        await self._update(client_info=client_info.model_dump(mode="json", exclude_none=True))

    # -- extras --------------------------------------------------------------------------
    async def get_token_expiry(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), if known."""
        value = (await self._read()).get("token_expires_at")
        return float(value) if isinstance(value, int | float) else None

    async def clear(self) -> bool:
        """Forget everything stored for this server (log out). Whether there was a file."""

        def unlink() -> bool:
            try:
                self.path.unlink()
            except FileNotFoundError:
                return False
            return True

        return await anyio.to_thread.run_sync(unlink)


@dataclass(frozen=True, slots=True)
class OAuth:
    """Log in to an OAuth-protected MCP server (``HttpServer(url, oauth=OAuth(...))``).

    Args:
        client_name: The name the user sees on the consent screen (client registration).
        scopes: Scopes to ask for; None lets the server's challenge or metadata decide.
        token_store: Where tokens and the client registration are kept (any object with the
            mcp SDK's ``TokenStorage`` methods). Default: a :class:`FileTokenStorage` for the
            server under :func:`default_token_dir`.
        open_browser: Also open the authorization URL in the system browser (it is always
            printed to stderr unless ``browser`` is given).
        browser: ``(url) -> None`` (sync or async), called with the authorization URL instead
            of printing it: a GUI's own prompt, or a test driving the flow without a human.
        redirect_port: Port of the loopback redirect listener. Default: the port of the
            stored registration, else a free one.
        login_timeout: Seconds to wait for the user to approve in the browser; it is added
            to ``MCPClient(connect_timeout=...)``.
        client_id: A client registered with the authorization server beforehand (no
            dynamic registration).
        client_secret: Its secret, if it has one.
        token_endpoint_auth_method: How the pre-registered client authenticates at the
            token endpoint (default ``client_secret_basic`` with a secret, else ``none``).
        client_metadata_url: An HTTPS URL of a client-ID metadata document, used instead of
            dynamic registration when the server supports it.
    """

    client_name: str = "agentkit"
    scopes: Sequence[str] | None = None
    token_store: TokenStorage | None = field(default=None, repr=False, compare=False)
    open_browser: bool = False
    browser: Callable[[str], Awaitable[object] | object] | None = field(
        default=None, repr=False, compare=False
    )
    redirect_port: int | None = None
    login_timeout: float = 300.0
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: str | None = None
    client_metadata_url: str | None = None

    def storage_for(self, server_url: str) -> TokenStorage:
        """The token storage used for ``server_url``."""
        if self.token_store is not None:
            return self.token_store
        return FileTokenStorage.for_server(server_url)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((REDIRECT_HOST, 0))
        return int(sock.getsockname()[1])


def _registered_port(info: OAuthClientInformationFull | None) -> int | None:
    """The port of a stored registration's loopback redirect URI (it must not change)."""
    for uri in (info.redirect_uris or []) if info is not None else []:
        parsed = urlparse(str(uri))
        if parsed.hostname == REDIRECT_HOST and parsed.path == REDIRECT_PATH and parsed.port:
            return parsed.port
    return None


class _BrowserFlow:
    """The provider's redirect and callback handlers: show the URL, take the redirect."""

    def __init__(self, oauth: OAuth, server_url: str, port: int) -> None:
        self.oauth = oauth
        self.server_url = server_url
        self.port = port
        self.url: str | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.url = authorization_url  # shown in callback(), once the listener is up

    async def _show(self, url: str) -> None:
        if self.oauth.browser is not None:
            result = self.oauth.browser(url)
            if inspect.isawaitable(result):
                await result
            return
        print(
            f"To let agentkit use {self.server_url}, open this URL in a browser and approve:\n"
            f"  {url}",
            file=sys.stderr,
            flush=True,
        )
        if self.oauth.open_browser:
            await anyio.to_thread.run_sync(webbrowser.open, url)

    async def callback(self) -> AuthorizationCodeResult:
        from mcp.client.auth import OAuthFlowError
        from mcp.shared.auth import AuthorizationCodeResult

        from agentkit.mcp._loopback import LoopbackError

        url = self.url
        if url is None:  # the SDK always calls redirect() first
            raise OAuthFlowError("no authorization URL to open")
        state = parse_qs(urlparse(url).query).get("state", [""])[0]
        try:
            with anyio.fail_after(self.oauth.login_timeout):
                result = await wait_for_redirect(
                    REDIRECT_HOST, self.port, REDIRECT_PATH, state, lambda: self._show(url)
                )
        except TimeoutError:
            raise OAuthFlowError(
                f"OAuth login to {self.server_url} failed: no authorization arrived within "
                f"{self.oauth.login_timeout:g}s (OAuth(login_timeout=...))"
            ) from None
        except LoopbackError as exc:
            raise OAuthFlowError(f"OAuth login to {self.server_url} failed: {exc}") from None
        return AuthorizationCodeResult(code=result.code, state=result.state, iss=result.iss)


async def _pre_registration(
    oauth: OAuth, storage: TokenStorage, redirect_uri: str
) -> OAuthClientInformationFull | None:
    """Store the pre-registered client (if any) so the SDK uses it instead of registering."""
    from mcp.shared.auth import OAuthClientInformationFull

    if oauth.client_id is None:
        return None
    method = oauth.token_endpoint_auth_method or (
        "client_secret_basic" if oauth.client_secret else "none"
    )
    info = OAuthClientInformationFull(
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        redirect_uris=[AnyUrl(redirect_uri)],
        token_endpoint_auth_method=method,
        client_name=oauth.client_name,
    )
    stored = await storage.get_client_info()
    if stored is None or stored.client_id != info.client_id:
        await storage.set_client_info(info)
    return info


async def build_auth(oauth: OAuth, server_url: str) -> OAuthClientProvider:
    """The mcp SDK's ``OAuthClientProvider`` (an ``httpx2.Auth``) configured by ``oauth``."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    storage = oauth.storage_for(server_url)
    port = oauth.redirect_port
    if port is None:
        port = _registered_port(await storage.get_client_info()) or _free_port()
    redirect_uri = f"http://{REDIRECT_HOST}:{port}{REDIRECT_PATH}"
    await _pre_registration(oauth, storage, redirect_uri)
    metadata = OAuthClientMetadata(
        client_name=oauth.client_name,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(oauth.scopes) if oauth.scopes else None,
    )
    flow = _BrowserFlow(oauth, server_url, port)
    provider = OAuthClientProvider(
        server_url,
        metadata,
        storage,
        redirect_handler=flow.redirect,
        callback_handler=flow.callback,
        client_metadata_url=oauth.client_metadata_url,
    )
    if isinstance(storage, FileTokenStorage):
        # The SDK does not persist expiry: without this, a restarted process would send an
        # expired token, get a 401 and run the whole browser flow instead of refreshing.
        provider.context.token_expiry_time = await storage.get_token_expiry()
    return provider

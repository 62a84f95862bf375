"""Server configurations: how to reach an MCP server (no ``mcp`` import here).

``StdioServer`` spawns a local command and talks over its stdin/stdout; ``HttpServer`` reaches
a remote server over streamable HTTP or the legacy SSE transport. The transport is always
explicit: it is never guessed from the URL. Building the SDK transport happens in
:func:`open_transport`, which imports the ``mcp`` SDK lazily.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TextIO

if TYPE_CHECKING:
    import httpx2
    from mcp.client._transport import TransportStreams

    from agentkit.mcp._oauth import OAuth

__all__ = ["HttpServer", "ServerConfig", "StdioServer", "resolve_command"]

# Names that mean "a Python interpreter": they run the interpreter running agentkit, so
# ``StdioServer("python", ["-m", "my_server"])`` uses the same virtual environment.
_PYTHON_NAMES = frozenset({"python", "python3", f"python3.{sys.version_info[1]}"})


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A local MCP server started as a child process.

    The child gets a minimal environment (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``,
    ``TERM``, ``USER``) plus ``env``: API keys and other secrets of the parent process are
    not leaked to it unless passed explicitly.

    The command is resolved before it is started: a bare name is looked up on ``PATH`` (the
    one in ``env`` if given), then next to the running Python interpreter (a virtual
    environment's ``bin`` folder, even when it is not activated); ``"python"`` and
    ``"python3"`` mean the running interpreter (``sys.executable``). A command that cannot be
    found fails with one line naming it, the ``PATH`` searched and the fix.

    Args:
        command: Executable to run (``"node"``, ``"uvx"``, a path...).
        args: Command-line arguments.
        env: Extra environment variables for the child.
        cwd: Working directory of the child.
        stderr: Where the child's stderr goes: ``"log"`` (lines forwarded to the
            ``agentkit.mcp.<name>`` logger at DEBUG level), ``"devnull"``, or an open text
            file with a real file descriptor.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    stderr: Literal["log", "devnull"] | TextIO = "log"


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A remote MCP server reached over HTTP.

    Args:
        url: Endpoint URL (``http://host:port/mcp`` for streamable HTTP, ``.../sse`` for SSE).
        headers: Extra HTTP headers sent with every request.
        transport: ``"streamable_http"`` (current spec) or ``"sse"`` (legacy 2024-11-05).
        timeout: Seconds for connecting and for each plain HTTP operation.
        sse_read_timeout: Seconds to wait for the next event on a server-sent event stream.
        auth: An ``httpx2.Auth`` (for example ``mcp.client.auth.OAuthClientProvider``), or a
            ready ``httpx2.AsyncClient`` that the caller owns (it is never closed by us).
        oauth: Log in with OAuth (authorization code + PKCE in the browser, tokens stored
            and refreshed): see :class:`agentkit.mcp.OAuth`. Not together with ``auth``.
    """

    url: str
    headers: Mapping[str, str] | None = None
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    timeout: float = 30.0
    sse_read_timeout: float = 300.0
    auth: httpx2.Auth | httpx2.AsyncClient | None = field(default=None, repr=False)
    oauth: OAuth | None = None

    def __post_init__(self) -> None:
        if self.transport not in ("streamable_http", "sse"):
            raise ValueError(
                f"transport must be 'streamable_http' or 'sse', got {self.transport!r}"
            )
        if self.oauth is not None and self.auth is not None:
            raise ValueError("give HttpServer either auth= or oauth=, not both")


ServerConfig = StdioServer | HttpServer


def resolve_command(server: StdioServer) -> str:
    """The executable ``server.command`` names, as a path.

    Raises:
        FileNotFoundError: one line naming the command, the PATH searched and the fix.
    """
    command = server.command
    if command in _PYTHON_NAMES:
        return sys.executable
    if os.sep in command or (os.altsep and os.altsep in command):
        if os.path.isfile(command) and os.access(command, os.X_OK):
            return command
        raise FileNotFoundError(
            f"MCP server command {command!r} does not exist or is not executable"
        )
    path = (server.env or {}).get("PATH") or os.environ.get("PATH", os.defpath)
    here = os.path.dirname(sys.executable)
    found = shutil.which(command, path=path) or shutil.which(command, path=here)
    if found:
        return found
    raise FileNotFoundError(
        f"MCP server command {command!r} not found on PATH ({path}) nor next to the Python "
        f"interpreter ({here}); install it (e.g. pip install {command}), activate its virtual "
        f"environment, or pass its full path to StdioServer"
    )


async def open_transport(
    stack: AsyncExitStack,
    server: ServerConfig,
    errlog: TextIO | None,
    *,
    max_message_bytes: int | None = None,
    on_broken: Callable[[str], None] | None = None,
    on_session_lost: Callable[[str], None] | None = None,
) -> TransportStreams:
    """Enter the transport for ``server`` on ``stack`` and return its stream pair.

    Args:
        stack: Exit stack that owns the transport (closed by the connection's runner task).
        server: The configuration.
        errlog: File receiving a stdio child's stderr (ignored for HTTP).
        max_message_bytes: Longest stdio message kept (longer tool results are truncated).
        on_broken: Called with a reason when a stdio stream breaks (invalid UTF-8).
        on_session_lost: Called when a streamable-HTTP server answers 404 for our session
            (it restarted or expired it): the spec says to start a new session.
    """
    if isinstance(server, StdioServer):
        if sys.platform == "win32":  # pragma: no cover - agentkit's transport is POSIX-only
            return await _open_stdio(stack, server, errlog)
        from agentkit.mcp._stdio import DEFAULT_MAX_MESSAGE_BYTES, stdio_transport

        assert errlog is not None  # the connection always provides one for stdio
        transport = stdio_transport(
            [resolve_command(server), *server.args],
            env=server.env,
            cwd=os.fspath(server.cwd) if server.cwd is not None else None,
            errlog=errlog,
            max_message_bytes=max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES,
            on_broken=on_broken or (lambda reason: None),
        )
        return await stack.enter_async_context(transport)
    if server.transport == "sse":
        return await _open_sse(stack, server)
    return await _open_streamable_http(stack, server, on_session_lost)


async def _open_stdio(
    stack: AsyncExitStack, server: StdioServer, errlog: TextIO | None
) -> TransportStreams:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=resolve_command(server),
        args=list(server.args),
        env=dict(server.env) if server.env is not None else None,
        cwd=os.fspath(server.cwd) if server.cwd is not None else None,
    )
    assert errlog is not None  # the connection always provides one for stdio
    return await stack.enter_async_context(stdio_client(params, errlog=errlog))


async def _auth(server: HttpServer) -> Any:
    """``server.auth``, or the OAuth provider ``server.oauth`` asks for."""
    if server.oauth is None:
        return server.auth
    from agentkit.mcp._oauth import build_auth

    return await build_auth(server.oauth, server.url)


async def _http_client(server: HttpServer) -> tuple[httpx2.AsyncClient, bool]:
    """Return the HTTP client to use and whether we own (and must close) it."""
    import httpx2

    if isinstance(server.auth, httpx2.AsyncClient):
        return server.auth, False
    from agentkit.mcp._wire import recording_transport

    timeout = httpx2.Timeout(server.timeout, read=server.sse_read_timeout)
    client = httpx2.AsyncClient(
        headers=dict(server.headers or {}),
        timeout=timeout,
        auth=await _auth(server),
        transport=recording_transport(),  # a call that never reached the server: see _wire
    )
    return client, True


def _session_watch(on_lost: Callable[[str], None]) -> Callable[[Any], Awaitable[None]]:
    """An httpx2 response hook: a 404 to a request that carried our session id."""
    from agentkit.mcp._wire import note_refused

    async def check(response: Any) -> None:
        if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
            note_refused(response.request)  # a tools/call refused so never ran
            on_lost(
                "the server answered HTTP 404 for our session: it restarted or expired it; "
                "a new session is started"
            )

    return check


async def _open_streamable_http(
    stack: AsyncExitStack, server: HttpServer, on_session_lost: Callable[[str], None] | None
) -> TransportStreams:
    from mcp.client.streamable_http import streamable_http_client

    client, owned = await _http_client(server)
    if on_session_lost is not None:
        hooks = client.event_hooks.setdefault("response", [])
        hook = _session_watch(on_session_lost)
        hooks.append(hook)

        def unhook() -> None:  # a caller-owned client outlives this connection
            if hook in hooks:
                hooks.remove(hook)

        stack.callback(unhook)
    if owned:
        await stack.enter_async_context(client)
    elif server.headers:
        client.headers.update(dict(server.headers))
    return await stack.enter_async_context(streamable_http_client(server.url, http_client=client))


async def _open_sse(stack: AsyncExitStack, server: HttpServer) -> TransportStreams:
    import httpx2
    from mcp.client.sse import sse_client

    auth: Any = await _auth(server)
    headers = dict(server.headers or {})
    if isinstance(auth, httpx2.AsyncClient):
        # sse_client closes the client its factory returns, so borrow the caller's
        # credentials rather than the caller's client itself.
        headers = {**dict(auth.headers), **headers}
        auth = auth.auth
    return await stack.enter_async_context(
        sse_client(
            server.url,
            headers=headers,
            timeout=server.timeout,
            sse_read_timeout=server.sse_read_timeout,
            auth=auth,
        )
    )

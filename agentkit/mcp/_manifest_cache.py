"""The on-disk cache of MCP servers' tool manifests, for servers started on first use.

``register_mcp_client(client, defer=True)`` registers a server's tools from this cache
without starting the server. One JSON file per server identity, in the user's cache folder
(``$XDG_CACHE_HOME/agentkit/mcp-manifests``, else ``~/.cache/...``; folder mode 0700, files
0600: a manifest says which tools a user has, and only that user should read it). The file
name is a hash of what makes the server what it is: a stdio server's command, arguments and
environment (names and values; the values never appear in the file), an HTTP server's URL.
A server whose command or environment changes is a new server with a new manifest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.mcp._config import ServerConfig, StdioServer

if TYPE_CHECKING:
    import mcp_types

__all__ = ["Manifest", "cache_dir", "load_manifest", "save_manifest", "server_key"]

_VERSION = 1


def cache_dir() -> Path:
    """Where the manifests are kept (created on the first save)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentkit" / "mcp-manifests"


def server_key(server: ServerConfig) -> str:
    """The hash that names a server's manifest: command, arguments and environment."""
    if isinstance(server, StdioServer):
        identity: dict[str, object] = {
            "command": server.command,
            "args": list(server.args),
            "env": sorted((server.env or {}).items()),
            "cwd": str(server.cwd or ""),
        }
    else:
        identity = {"url": server.url}
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Manifest:
    """A cached tool list: the server's name and version, and its tools as it sent them."""

    def __init__(self, server_version: str | None, tools: list[mcp_types.Tool]) -> None:
        self.server_version = server_version
        self.tools = tools

    def same_tools(self, tools: list[mcp_types.Tool]) -> bool:
        """Whether ``tools`` (a fresh listing) is this manifest's list."""
        return _dump(tools) == _dump(self.tools)


def _dump(tools: list[mcp_types.Tool]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def _path(server: ServerConfig) -> Path:
    return cache_dir() / f"{server_key(server)}.json"


def load_manifest(server: ServerConfig) -> Manifest | None:
    """The cached manifest of ``server``, or None (none yet, unreadable or malformed)."""
    import mcp_types
    from pydantic import ValidationError

    try:
        data = json.loads(_path(server).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return None
        tools = [mcp_types.Tool.model_validate(t) for t in data["tools"]]
        version = data.get("server_version")
        return Manifest(version if isinstance(version, str) else None, tools)
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None  # a broken cache is no cache: the server is asked again


def save_manifest(server: ServerConfig, manifest: Manifest) -> None:
    """Write ``server``'s manifest atomically, readable by the user only."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = _path(server)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    body: dict[str, object] = {"version": _VERSION, "server_version": manifest.server_version}
    body["tools"] = _dump(manifest.tools)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out)
        os.chmod(tmp, 0o600)  # O_CREAT's mode is masked by the umask; 0600 is what we promise
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise

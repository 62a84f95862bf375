"""The task test server (tests/mcp_servers/task_server.py) as a subprocess on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

from tests._mcp_helpers import ROOT, free_port

SERVER = ROOT / "tests" / "mcp_servers" / "task_server.py"


@contextlib.contextmanager
def task_server(mode: str) -> Iterator[str]:
    """Serve the task app over streamable HTTP (``mode``: ``http`` or ``http-auth``).

    Yields:
        The MCP endpoint's URL.
    """
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), mode, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "no server"
            time.sleep(0.05)  # waiting for a port to open: no event to wait on
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)

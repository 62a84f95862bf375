"""Slow clients (slowloris) cannot lock others out of ``agentkit serve``: under a low file
descriptor limit, with more slow sockets than descriptors, a real request is still served
and every slow socket is closed by the server (header timeout, or evicted at the cap)."""

from __future__ import annotations

import os
import re
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).parent.parent
TOKEN = "slow-token"


def start(db: Path, fd_limit: int, header_timeout: float) -> tuple[subprocess.Popen[str], int]:
    cmd = (
        f"ulimit -n {fd_limit} && exec {sys.executable} -m agentkit serve "
        f"tests._serve_agents:make_agent --port 0 --sessions sqlite:///{db} "
        f"--header-timeout {header_timeout} --log-level warning"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTKIT_SERVE_TOKEN": TOKEN}
    proc = subprocess.Popen(
        ["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
    assert match, "the server did not print its URL"
    return proc, int(match.group(1))


def wait_until_up(port: int) -> None:
    for _ in range(300):
        try:
            httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            return
        except httpx2.TransportError:
            time.sleep(0.1)
    raise AssertionError("the server did not start")


def slow_sockets(port: int, count: int) -> list[socket.socket]:
    """Sockets that each send the start of a request's headers, and never the end."""
    out = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        out.append(s)
    return out


def closed_by_server(socks: list[socket.socket], bound: float) -> int:
    """How many of ``socks`` the server closed (EOF or reset) within ``bound`` seconds."""
    selector = selectors.DefaultSelector()
    for s in socks:
        selector.register(s, selectors.EVENT_READ)
    closed = 0
    deadline = time.monotonic() + bound
    while closed < len(socks) and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except ConnectionError:
                data = b""
            if not data:
                closed += 1
                selector.unregister(sock)
    selector.close()
    return closed


def test_slow_sockets_beyond_the_fd_limit_do_not_lock_out_a_real_request(tmp_path: Path) -> None:
    proc, port = start(tmp_path / "t.db", fd_limit=128, header_timeout=2)
    socks: list[socket.socket] = []
    try:
        wait_until_up(port)
        socks = slow_sockets(port, 150)
        answer = httpx2.get(
            f"http://127.0.0.1:{port}/healthz",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert answer.status_code == 200
        # Every slow socket is closed by the server (the bound only ends a failing run).
        assert closed_by_server(socks, bound=30) == len(socks)
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.communicate(timeout=15)

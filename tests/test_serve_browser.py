"""The web chat in a real headless Chromium, against a real server process.

Chromium comes from npm ``@sparticuz/chromium`` and is driven by ``playwright-core``;
``scripts/test`` installs both into ``tests/web/node_modules``. No skip: without them the
test fails and says how to install them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from tests._serve_process import (
    check_stored_threads,
    require_node_modules,
    run_node,
    start_server,
    stop_server,
)


@pytest.mark.timeout(240)
def test_web_chat_in_chromium(tmp_path: Path) -> None:
    require_node_modules("playwright-core", "@sparticuz/chromium")
    db, token = tmp_path / "threads.db", "browser-test-token"
    shot = tmp_path / "web_chat.png"
    server, port = start_server(db, token)
    try:
        steps = run_node("chat_browser.mjs", f"http://127.0.0.1:{port}", token, str(shot))
    finally:
        stop_server(server)
    assert steps == [
        "stopped",
        "follow-up answered",
        "typed while running",
        "reload mid-run",
        "approved",
        "denied",
        "xss inert",
        "reloaded",
        "done",
    ]
    assert shot.stat().st_size > 1000
    # The server's memory is valid for every thread, after Stop, follow-ups and approvals.
    assert anyio.run(check_stored_threads, db) >= 4


def _start_webchat_server(db: Path, token: str) -> tuple[subprocess.Popen[str], int]:
    """The web chat test agent (``tests._webchat_agents``) in its own process."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    cmd = [sys.executable, "-m", "tests._webchat_agents", "0", str(db), token]
    proc = subprocess.Popen(cmd, cwd=env["PYTHONPATH"], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("port "), first
    port = int(first.split()[1])
    for _ in range(300):
        try:
            headers = {"Authorization": f"Bearer {token}"}
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", headers=headers).status_code == 200:
                return proc, port
        except httpx2.TransportError:
            time.sleep(0.1)
    stop_server(proc)
    raise AssertionError("the server did not start")


@pytest.mark.timeout(240)
def test_web_chat_layout_markdown_states_and_accessibility(tmp_path: Path) -> None:
    require_node_modules("playwright-core", "@sparticuz/chromium", "axe-core")
    db, token = tmp_path / "threads.db", "browser-test-token"
    server, port = _start_webchat_server(db, token)
    try:
        steps = run_node("chat_ui_browser.mjs", f"http://127.0.0.1:{port}", token, str(tmp_path))
    finally:
        stop_server(server)
    assert steps == [
        "markdown",
        "hostile markdown inert",
        "long answer",
        "approved by keyboard",
        "stopped marked",
        "stopped mark kept after a reload",
        "error and retry",
        "reconnected",
        "nested approvals",
        "nested approved and denied",
        "steered",
        "axe desktop",
        "phone",
        "done",
    ]
    shots = sorted(p.name for p in tmp_path.glob("webchat_*.png"))
    assert shots == [
        "webchat_desktop.png",
        "webchat_desktop_dark.png",
        "webchat_phone.png",
        "webchat_phone_nav.png",
        "webchat_steer.png",
    ]
    keep = os.environ.get("AGENTKIT_SCREENSHOT_DIR")  # to look at them
    for name in shots:
        if keep:
            shutil.copyfile(tmp_path / name, Path(keep) / name)
    if os.environ.get("AGENTKIT_UPDATE_SCREENSHOT"):  # refresh the one in docs/serving.md
        shutil.copyfile(
            tmp_path / "webchat_desktop.png", Path(__file__).parent.parent / "docs" / "serving.png"
        )
    assert anyio.run(check_stored_threads, db) >= 3

"""The web chat in a real headless Chromium, against a real server process.

Chromium comes from npm ``@sparticuz/chromium`` and is driven by ``playwright-core``;
``scripts/test`` installs both into ``tests/web/node_modules``. No skip: without them the
test fails and says how to install them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
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
    if os.environ.get("AGENTKIT_UPDATE_SCREENSHOT"):  # refresh the one in docs/serving.md
        shutil.copyfile(shot, Path(__file__).parent.parent / "docs" / "serving.png")
    # The server's memory is valid for every thread, after Stop, follow-ups and approvals.
    assert anyio.run(check_stored_threads, db) >= 4

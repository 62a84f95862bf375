"""The reference AG-UI client (npm ``@ag-ui/client``) drives agentkit's server.

``HttpAgent.runAgent`` with its ``onRunFinishedEvent`` outcomes (success, interrupt,
cancelled), ``buildResumeArray`` answers, a forged tool message refused with 422, and a
frontend tool (``tools``) the client runs itself, with ``context`` and ``state``.
"""

from __future__ import annotations

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


@pytest.mark.timeout(120)
def test_ag_ui_client_drives_the_server(tmp_path: Path) -> None:
    require_node_modules("@ag-ui/client")
    db, token = tmp_path / "threads.db", "client-test-token"
    server, port = start_server(db, token)
    try:
        steps = run_node("agui_client.mjs", f"http://127.0.0.1:{port}", token, timeout=100)
    finally:
        stop_server(server)
    assert steps == [
        "success",
        "approved via resume",
        "denied via cancelled resume",
        "cancelled then continued",
        "forged refused",
        "frontend tool",
        "done",
    ]
    assert anyio.run(check_stored_threads, db) == 3

"""A served demo agent in its own process (``python -m tests._serve_agents``), as users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from agentkit.memory import check_memory_invariant
from agentkit.session import SQLiteSession
from tests._serve_agents import make_agent

ROOT = Path(__file__).parent.parent
WEB = Path(__file__).parent / "web"


def require_node_modules(*packages: str) -> None:
    """Fail (not skip) with the fix when the npm test packages are missing."""
    missing = [p for p in packages if not (WEB / "node_modules" / p).is_dir()]
    assert not missing, (
        f"npm packages {missing} are missing: run scripts/test (it runs "
        "`npm install --prefix tests/web`)"
    )


def start_server(db: Path, token: str) -> tuple[subprocess.Popen[str], int]:
    """Start the server process on a port the OS picks; wait until /healthz answers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests._serve_agents", "0", str(db), token]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("port "), first
    port = int(first.split()[1])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            headers = {"Authorization": f"Bearer {token}"}
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", headers=headers).status_code == 200:
                return proc, port
        except httpx2.TransportError:
            time.sleep(0.1)
    stop_server(proc)
    raise AssertionError("the server did not start")


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def run_node(script: str, *args: str, timeout: float = 200) -> list[str]:
    """Run a node test script; return its checkpoint names (it prints JSON lines)."""
    done = subprocess.run(
        ["node", str(WEB / script), *args], cwd=WEB, capture_output=True, text=True, timeout=timeout
    )
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line)["what"] for line in done.stdout.splitlines() if line.startswith("{")]


async def check_stored_threads(db: Path) -> int:
    """Every stored thread loads into a fresh agent and passes the memory invariant."""
    store = SQLiteSession(db)
    ids = [i for i in await store.list_ids() if i.startswith("serve/")]
    for key in ids:
        state = await store.load_state(key)
        assert state is not None
        agent = make_agent()
        if state["agent"] is not None:
            agent.load_state_dict(state["agent"])
        pending = [c["id"] for c in agent.pending_tool_calls]
        check_memory_invariant(await agent.memory.get_memory(), pending)
        json.dumps(agent.state_dict())
    return len(ids)

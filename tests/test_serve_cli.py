"""``agentkit serve``: refuses unsafe binds, parses --sessions URLs, serves for real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

import agentkit.session
from agentkit.cli import main
from agentkit.cli._serve_cmd import describe_store, load_target, open_sessions
from agentkit.session import RedisSession, SQLiteSession

ROOT = Path(__file__).parent.parent


def test_non_loopback_host_needs_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTKIT_SERVE_TOKEN", raising=False)
    assert main(["serve", "tests._serve_agents:make_agent", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve on 0.0.0.0 without a token" in err


def test_bad_target_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests._serve_agents"]) == 2
    assert "expected MODULE:ATTR" in capsys.readouterr().err
    assert main(["serve", "tests._serve_agents:nope"]) == 2
    assert "has no attribute 'nope'" in capsys.readouterr().err
    assert main(["serve", "no_such_module_xyz:app"]) == 2
    assert "no_such_module_xyz" in capsys.readouterr().err
    assert callable(load_target("tests._serve_agents:make_agent"))


def test_sessions_urls(tmp_path: Path) -> None:
    rel = open_sessions("sqlite:///threads.db")
    assert isinstance(rel, SQLiteSession) and str(rel.path) == "threads.db"
    absolute = open_sessions(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(absolute, SQLiteSession) and absolute.path == tmp_path / "x.db"
    assert isinstance(open_sessions("redis://localhost:6379/3"), RedisSession)
    with pytest.raises(ValueError, match=r"sqlite:///relative\.db"):
        open_sessions("sqlite://nothing")
    with pytest.raises(ValueError, match="unsupported --sessions URL"):
        open_sessions("ftp://example.com/x")
    if hasattr(agentkit.session, "PostgresSession"):
        assert open_sessions("postgresql://u@localhost/db").__class__.__name__ == "PostgresSession"
    else:
        with pytest.raises(ValueError, match="PostgresSession"):
            open_sessions("postgresql://u@localhost/db")


def test_serve_command_serves(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    cmd = [sys.executable, "-m", "agentkit", "serve", "tests._serve_agents:make_agent"]
    cmd += ["--port", "0", "--sessions", f"sqlite:///{db}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTKIT_SERVE_TOKEN": "cli-token"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"open http://127\.0\.0\.1:(\d+)/#token=<your token>", line)
        assert match, line
        assert f"threads in SQLite {db}" in line
        base = f"http://127.0.0.1:{match.group(1)}"
        headers = {"Authorization": "Bearer cli-token"}
        for _ in range(300):
            try:
                r = httpx2.get(f"{base}/healthz", headers=headers)
                break
            except httpx2.TransportError:
                time.sleep(0.1)
        assert r.status_code == 200
        assert httpx2.get(f"{base}/healthz").status_code == 401
        assert 'data-testid="chat-input"' in httpx2.get(f"{base}/").text
        assert httpx2.post(f"{base}/threads", headers=headers).status_code == 201
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
    assert db.exists()


def _help(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps: compare unwrapped


def test_help_is_plain_text_and_complete(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (("serve",), ("durable",), ("durable", "recover")):
        text = _help(capsys, *command)
        assert "``" not in text and "::" not in text, command
    text = _help(capsys, "serve")
    assert "--cors-origin ORIGIN a browser origin allowed to call the API" in text
    # The default thread store is a file in the home directory: the help says so.
    assert "in your home directory" in text and "~/.agentkit/serve.db" in text


def test_startup_line_names_the_thread_store() -> None:
    default = describe_store(None)
    assert str(Path("~/.agentkit/serve.db").expanduser()) in default and "default" in default
    assert describe_store("sqlite:///threads.db") == "SQLite threads.db"
    shown = describe_store("postgresql://app:s3cret@db.internal:5433/agents")
    assert shown == "postgresql://db.internal:5433" and "s3cret" not in shown


async def test_serve_with_a2a_mounts_both_protocols(tmp_path: Path) -> None:
    import httpx2

    from agentkit import ReActAgent
    from agentkit.cli._serve_cmd import with_a2a
    from agentkit.serve import create_app
    from agentkit.session import SQLiteSession
    from agentkit.testing import ScriptedModel
    from tests._serve_helpers import running

    agent = ReActAgent("helper", "You help.", ScriptedModel(["hi"]))
    sessions = SQLiteSession(tmp_path / "both.db")
    app = with_a2a(create_app(agent, sessions=sessions), agent, sessions=sessions, auth_token=None)
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as client:
        card = (await client.get("/a2a/.well-known/agent-card.json")).json()
        assert card["name"] == "helper"
        assert card["supportedInterfaces"][0]["url"].startswith(f"{base}/a2a")
        assert (await client.get("/healthz")).json()["status"] == "ok"
        assert (await client.get("/threads")).status_code == 200

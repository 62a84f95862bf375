"""Operators see failures: ``configure_logging`` sends a served agent's failed runs and failed
saves to a stream, one line each with the thread and the cause; the person using the chat
sees a friendly message, never the exception text."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentkit import ReActAgent
from agentkit.exceptions import ModelAPIError, SessionError
from agentkit.serve import configure_logging, create_app
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel
from tests._serve_helpers import run_events, run_input, running, user


@pytest.fixture
def log() -> Iterator[io.StringIO]:
    root = logging.getLogger("agentkit")
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    configure_logging("INFO", stream=stream)  # again: replaced, not doubled
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


class FailingSaves(SQLiteSession):
    """Saves fail once the thread has a reply in it (a full disk, a store that went away)."""

    async def save_state(self, session_id: str, state: dict[str, object], **kw: Any) -> int:
        agent: Any = state.get("agent") or {}
        if agent.get("memory", {}).get("messages"):
            raise SessionError("disk full")
        return await super().save_state(session_id, state, **kw)


def lines(stream: io.StringIO, needle: str) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if needle in line]


async def test_a_failed_run_is_one_log_line_and_a_friendly_message(
    tmp_path: Path, log: io.StringIO
) -> None:
    model = ScriptedModel([ModelAPIError("provider down: key sk-secret rejected")])
    agent = ReActAgent("a", "s", model)
    app = create_app(agent, sessions=SQLiteSession(tmp_path / "t.db"))
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("t1", user("hi")))
    assert events[-1]["type"] == "RUN_ERROR"
    assert "sk-secret" not in events[-1]["message"] and "went wrong" in events[-1]["message"]
    (line,) = lines(log, "failed: ModelAPIError")
    assert "ERROR agentkit.serve: run " in line and "of thread t1" in line
    assert "provider down: key sk-secret rejected" in line


async def test_a_failed_save_is_one_log_line_naming_the_thread(
    tmp_path: Path, log: io.StringIO
) -> None:
    app = create_app(
        ReActAgent("a", "s", ScriptedModel(["Hello."])),
        sessions=FailingSaves(tmp_path / "t.db"),
        lease_seconds=1,  # the commit is retried while the lease lasts: keep that short
    )
    async with running(app) as base, httpx2.AsyncClient(base_url=base) as c:
        events = await run_events(c, "/agui", run_input("t2", user("hi")))
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "store_unavailable"
    (line,) = lines(log, "lost the turn")
    assert "ERROR agentkit.serve: lost the turn of run " in line and "of thread t2" in line
    assert "disk full" in line


def test_an_unknown_level_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging("LOUD")

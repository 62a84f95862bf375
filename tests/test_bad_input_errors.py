"""Bad input gets a documented error and loses nothing (issue 13, items 18 and 19).

- A state whose messages share an id passed validation, then loaded a memory that broke
  the tool-call pairing (the memory skips a message it already holds).
- Errors escaped with undocumented types: ``RecursionError`` (deeply nested tool arguments
  or session JSON), ``sqlite3.DatabaseError`` (a corrupt session database),
  ``IsADirectoryError`` (a session path that is a folder), ``MessageValidationError`` from
  deep inside a reply (a tool returning a malformed block).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentkit import ReActAgent
from agentkit.exceptions import AgentkitError, SessionError, StateError
from agentkit.memory import InMemoryMemory, check_memory_invariant
from agentkit.messages import Msg
from agentkit.models import OpenAIChatModel
from agentkit.session import JSONSession, SQLiteSession
from agentkit.testing import ScriptedModel
from agentkit.tools import Toolkit
from tests._wire_server import Reply, WireServer, openai_completion


def _call(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "t", "input": {}}


def _result(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "tool_result", "id": call_id, "name": "t", "output": "ok"}


# -- item 18: duplicate ids -------------------------------------------------------------
def _state_with_duplicate_ids() -> dict[str, Any]:
    agent = ReActAgent("a", "sys", ScriptedModel([]))
    state = agent.state_dict()
    call = Msg("a", [_call()], "assistant", id="same")  # type: ignore[list-item]
    result = Msg("t", [_result()], "user", id="same")  # type: ignore[list-item]
    state["memory"]["messages"] = [call.to_dict(), result.to_dict()]
    return state


def test_agent_state_with_duplicate_message_ids_is_refused() -> None:
    agent = ReActAgent("a", "sys", ScriptedModel([]))
    with pytest.raises(StateError, match="same"):
        agent.load_state_dict(_state_with_duplicate_ids())
    assert agent.memory.state_dict() == {"messages": []}  # nothing was replaced


def test_memory_state_with_duplicate_message_ids_is_refused() -> None:
    memory = InMemoryMemory()
    with pytest.raises(StateError, match="same"):
        memory.load_state_dict(_state_with_duplicate_ids()["memory"])


async def test_session_with_duplicate_message_ids_is_refused(tmp_path: Path) -> None:
    async with JSONSession(tmp_path) as store:
        await store.save_state("s", _state_with_duplicate_ids())
        with pytest.raises(StateError):
            await store.load("s", ReActAgent("a", "sys", ScriptedModel([])))


# -- item 19: RecursionError ----------------------------------------------------------------
DEEP = 5000


def _deep_json(depth: int) -> str:
    return '{"x": ' + "[" * depth + "]" * depth + "}"


async def test_deeply_nested_tool_arguments_from_the_wire_become_an_error_result(
    tmp_path: Path,
) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(lambda x=None: "ran", name="t")
    async with WireServer() as server:
        server.script(
            Reply(json=openai_completion(tool_calls=[("c1", "t", _deep_json(DEEP))])),
            Reply(json=openai_completion(text="gave up")),
        )
        model = OpenAIChatModel("m", api_key="k", base_url=server.openai_url, stream=False)
        agent = ReActAgent("a", "sys", model, toolkit)
        reply = await agent("go")
        await model.aclose()
    assert reply.get_text() == "gave up"
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    result = memory[-2].get_blocks("tool_result")[0]
    assert result.get("is_error") and "not a valid JSON object" in str(result["output"])
    async with JSONSession(tmp_path) as store:
        await store.save("s", agent)


def test_deeply_nested_block_input_is_a_validation_error() -> None:
    value: Any = []
    for _ in range(DEEP):
        value = [value]
    with pytest.raises(AgentkitError):
        Msg("a", [{"type": "tool_use", "id": "c", "name": "t", "input": {"x": value}}], "assistant")


async def test_deeply_nested_session_json_is_a_state_error(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    store.path_for("s").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(StateError):
        await store.load("s", ReActAgent("a", "sys", ScriptedModel([])))


# -- item 19: storage errors ------------------------------------------------------------
async def test_corrupt_sqlite_database_is_a_session_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    db.write_bytes(b"this is not a database" * 100)
    store = SQLiteSession(db)
    with pytest.raises(SessionError) as caught:
        await store.load("s", ReActAgent("a", "sys", ScriptedModel([])))
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    with pytest.raises(SessionError):
        await store.save("s", ReActAgent("a", "sys", ScriptedModel([])))


async def test_session_path_that_is_a_folder_is_a_session_error(tmp_path: Path) -> None:
    store = JSONSession(tmp_path)
    store.path_for("s").mkdir()
    agent = ReActAgent("a", "sys", ScriptedModel([]))
    with pytest.raises(SessionError) as caught:
        await store.load("s", agent)
    assert isinstance(caught.value.__cause__, OSError)
    with pytest.raises(SessionError):
        await store.save("s", agent)
    with pytest.raises(SessionError):
        await SQLiteSession(tmp_path).save("s", agent)  # the database path is a folder


# -- item 19: MessageValidationError from deep inside -------------------------------------
async def test_tool_returning_a_malformed_block_is_an_error_result(tmp_path: Path) -> None:
    toolkit = Toolkit()
    bad = {"type": "image", "source": {"type": "ftp", "where": "x"}}
    toolkit.register_tool_function(lambda: bad, name="t")
    agent = ReActAgent("a", "sys", ScriptedModel([[_call()], "done"]), toolkit)
    reply = await agent("go")
    assert reply.get_text() == "done"
    memory = await agent.memory.get_memory()
    check_memory_invariant(memory)
    result = memory[-2].get_blocks("tool_result")[0]
    assert result.get("is_error") and "source" in json.dumps(result["output"])

"""Loading an agent's state parses its memory's messages twice, not three times (#34).

Once to check the state before anything changes (the tool-call invariant), once by the
memory that keeps them; the agent's own check before its toolkit's part is the first one.
"""

from __future__ import annotations

import asyncio

import pytest

from agentkit import Msg, ReActAgent, Toolkit
from agentkit.exceptions import StateError
from agentkit.testing import ScriptedModel


def _agent() -> ReActAgent:
    return ReActAgent("a", "sys", ScriptedModel(["one", "two"]), Toolkit(), print_hint=False)


def test_a_load_parses_each_message_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    source = _agent()
    asyncio.run(source("hi"))
    state = source.state_dict()
    n = len(state["memory"]["messages"])  # type: ignore[index, arg-type]
    calls: list[object] = []
    real = Msg.from_dict

    def counting(data: object) -> Msg:
        calls.append(data)
        return real(data)  # type: ignore[arg-type]

    monkeypatch.setattr(Msg, "from_dict", staticmethod(counting))
    target = _agent()
    target.load_state_dict(state)
    assert len(calls) == 2 * n
    assert target.memory.state_dict() == source.memory.state_dict()


def test_a_corrupt_state_still_changes_nothing() -> None:
    source = _agent()
    asyncio.run(source("hi"))
    state = source.state_dict()
    target = _agent()
    asyncio.run(target("hello"))
    before = target.state_dict()
    state["memory"]["messages"][0]["role"] = "nobody"  # type: ignore[index]
    with pytest.raises(StateError):
        target.load_state_dict(state)
    assert target.state_dict() == before

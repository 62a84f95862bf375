"""Subprocess half of the cross-process session test (run by test_session_cross_process.py).

Usage: python tests/_session_worker.py (start|resume|again) DB COUNTER SESSION_ID

* start:  the agent asks for an approval-gated tool; the reply pauses; save; exit.
* resume: a fresh process loads the session, approves the call, finishes; save; exit.
* again:  a third process loads the finished session and checks nothing is pending.

Prints one JSON line describing what happened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from agentkit.agent import ReActAgent
from agentkit.memory import check_memory_invariant
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit


def build(counter: Path, script: list[object]) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool(requires_approval=True)
    def bump(amount: int) -> str:
        """Append to the counter file (one line per run).

        Args:
            amount: How much to add.
        """
        with counter.open("a") as handle:
            handle.write(f"{amount}\n")
        return f"bumped by {amount}"

    model = ScriptedModel(script)  # type: ignore[arg-type]
    return ReActAgent("worker", "You bump counters.", model, toolkit, print_hint=False)


async def main(phase: str, db: Path, counter: Path, session_id: str) -> dict[str, object]:
    session = SQLiteSession(db)
    if phase == "start":
        agent = build(counter, [[tool_use("bump", "call-1", amount=7)], "unused"])
        reply = await agent("Bump the counter by 7.")
        await session.save(session_id, agent)
        pending = (reply.metadata or {}).get("pending_tool_calls", [])
        return {"pending": pending, "counter_exists": counter.exists()}
    if phase == "resume":
        agent = build(counter, ["Counter bumped."])
        found = await session.load(session_id, agent)
        pending_ids = [c["id"] for c in agent.pending_tool_calls]
        reply = await agent.resume(approvals={pending_ids[0]: True})
        await session.save(session_id, agent)
        memory = await agent.memory.get_memory()
        check_memory_invariant(memory)
        request = agent.model.requests[0].messages  # type: ignore[attr-defined]
        return {
            "found": found,
            "pending_ids": pending_ids,
            "reply": reply.get_text(),
            "model_saw_result": any(m.has_blocks("tool_result") for m in request),
            "roles": [m.role for m in memory],
        }
    agent = build(counter, [])
    found = await session.load(session_id, agent)
    try:
        await agent.resume(approvals={"call-1": True})
        double = "resumed twice"
    except ValueError as exc:
        double = str(exc)
    return {"found": found, "pending": agent.pending_tool_calls, "double": double}


if __name__ == "__main__":
    phase, db, counter, sid = sys.argv[1:5]
    result = anyio.run(main, phase, Path(db), Path(counter), sid)
    print(json.dumps(result))

"""Worker process A of the cross-worker interrupt test and benchmark.

Usage: python tests/_control_worker.py KIND LOCATION SESSION_ID COUNT

Runs COUNT replies of one agent, each holding the session while it runs. Each reply calls a
tool that never returns; once the tool has started the worker prints ``running I`` and waits
to be interrupted from another process. After each reply it prints one JSON line: whether it
was interrupted, when it ended (``time.monotonic()``, comparable across processes on Linux),
and whether memory passes the invariant.
"""

from __future__ import annotations

import json
import sys
import time

import anyio

from agentkit.agent import ReActAgent
from agentkit.memory import check_memory_invariant
from agentkit.session import hold_session
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._session_conflict_worker import open_store


async def announce(started: anyio.Event, i: int) -> None:
    await started.wait()
    print(f"running {i}", flush=True)


async def main(kind: str, location: str, sid: str, count: int) -> None:
    toolkit = Toolkit()
    started = anyio.Event()

    @toolkit.tool
    async def wait_forever() -> str:
        """Block until interrupted."""
        started.set()
        await anyio.sleep_forever()
        return "unreachable"

    script = [[tool_use("wait_forever", f"call-{i}")] for i in range(count)]
    model = ScriptedModel(script)  # type: ignore[arg-type]
    agent = ReActAgent("worker", "You wait.", model, toolkit, print_hint=False)
    async with open_store(kind, location) as store:
        for i in range(count):
            started = anyio.Event()
            async with hold_session(store, sid, agent), anyio.create_task_group() as tg:
                tg.start_soon(announce, started, i)
                reply = await agent(f"request {i}")
                ended = time.monotonic()
            memory = await agent.memory.get_memory()
            check_memory_invariant(memory)
            meta = reply.metadata or {}
            print(
                json.dumps(
                    {
                        "i": i,
                        "interrupted": bool(meta.get("interrupted")),
                        "ended": ended,
                        "invariant_ok": True,
                        "last_result": memory[-1].role,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))

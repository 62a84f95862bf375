"""The holder process of the cross-process ``steer_session`` test.

Usage: python tests/_steer_worker.py SQLITE_PATH SESSION_ID

Holds the session while one reply runs; the reply's tool prints ``running`` and waits until
a steer is queued. Then prints one JSON line: the text of the last message of the second
model request, the reply's text, and whether memory passes the invariant.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from agentkit.agent import ReActAgent
from agentkit.memory import check_memory_invariant
from agentkit.messages import Msg
from agentkit.session import SQLiteSession, hold_session
from agentkit.testing import FunctionModel, RequestInfo, tool_use
from agentkit.tools import Toolkit


async def main(path: str, sid: str) -> None:
    steered = anyio.Event()
    seen: list[str] = []

    class SteerAware(ReActAgent[Any, Any]):
        async def steer(self, msg: Any) -> Any:
            steered.set()  # the tool wakes once this task awaits: queued by then
            return await super().steer(msg)

    def answer(messages: list[Msg], info: RequestInfo) -> Any:
        seen.append(messages[-1].get_text())
        return tool_use("wait", "c1") if len(seen) == 1 else "done"

    toolkit = Toolkit()

    async def wait() -> str:
        """Wait for a steer.

        Returns:
            A fixed answer.
        """
        print("running", flush=True)
        with anyio.fail_after(30):
            await steered.wait()
        return "waited"

    toolkit.register_tool_function(wait)
    agent = SteerAware("worker", "sys", FunctionModel(answer), toolkit)
    async with SQLiteSession(path) as store, hold_session(store, sid, agent):
        reply = await agent("go")
    check_memory_invariant(await agent.memory.get_memory())
    print(json.dumps({"second": seen[-1], "reply": reply.get_text(), "ok": True}), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])

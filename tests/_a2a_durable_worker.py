"""A durable run that asks a remote A2A agent (as a tool), then hands off to it.

Usage: python tests/_a2a_durable_worker.py MODE DB_URL REMOTE_URL (tests/test_a2a_durable.py)

* ``start``: launch DBOS (executor ``a2a-worker``) and start the run ``a2a-run``; the test
  kills the process while the handoff's remote task runs.
* ``resume``: launch DBOS under the same executor id (DBOS recovers the run at launch),
  wait for the run and print its reply, last agent and step names as JSON.
"""

from __future__ import annotations

import json
import sys

import anyio
from dbos import DBOS, DBOSPortableJSONSerializer

from agentkit import ReActAgent, Toolkit, handoff
from agentkit.a2a import A2AAgent
from agentkit.durable import DBOSAgent
from agentkit.testing import ScriptedModel, tool_use


def build(url: str) -> DBOSAgent:
    toolkit = Toolkit()
    toolkit.register_tool(A2AAgent(url, name="geo").as_tool(name="ask_geo"))
    model = ScriptedModel(
        [
            [tool_use("ask_geo", "c1", task="capital of France?")],
            [tool_use("transfer_to_geo", "c2")],
        ]
    )
    target = A2AAgent(url, name="geo")
    agent = ReActAgent(
        "triage", "You route.", model, toolkit, handoffs=[handoff(target)], print_hint=False
    )
    return DBOSAgent(agent, name="a2a-crash")


async def main(mode: str, db_url: str, url: str) -> None:
    durable = build(url)
    DBOS(
        config={
            "name": "agentkit-a2a-durable",
            "system_database_url": db_url,
            "executor_id": "a2a-worker",
            "application_version": "a2a-1",
            "serializer": DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    try:
        if mode == "start":
            await durable.run("Where is Paris?", workflow_id="a2a-run")
            return
        handle = await DBOS.retrieve_workflow_async("a2a-run")
        result = DBOSAgent.result(await handle.get_result(), "a2a-run")
        steps = await DBOS.list_workflow_steps_async("a2a-run")
        names = [s["function_name"] for s in steps if not s["function_name"].startswith("DBOS.")]
        report = {"text": result.text, "last_agent": result.last_agent, "steps": names}
        print(json.dumps(report), flush=True)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])

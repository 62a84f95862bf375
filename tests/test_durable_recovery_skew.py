"""Recovery across code changes and corrupt records, on real DBOS with SQLite.

A run's completed record is set back to PENDING in the system database (as a crash
leaves it) and handed back with ``recover_executor``; this process's worker then executes it
again, under the agent configuration the test gives the ``DBOSAgent`` at that point.
"""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit.agent import ReActAgent  # noqa: E402
from agentkit.cli import _durable_cmd  # noqa: E402
from agentkit.durable import DBOSAgent, pending_runs, recover_executor  # noqa: E402
from agentkit.durable._versions import code_version, describe  # noqa: E402
from agentkit.testing import ScriptedModel, tool_use  # noqa: E402
from agentkit.tools import Toolkit  # noqa: E402

DBOS = dbos.DBOS


def toolkit(*extra: str) -> Toolkit:
    tools = Toolkit()

    @tools.tool
    def work(name: str) -> str:
        """Do some work.

        Args:
            name: What to do.
        """
        return f"{name} done"

    if extra:

        @tools.tool
        def refund(order: str) -> str:
            """Refund an order.

            Args:
                order: The order.
            """
            return order

    return tools


def template(*extra: str) -> ReActAgent[Any, Any]:
    return ReActAgent("skew", "You work.", ScriptedModel([]), toolkit(*extra), print_hint=False)


class Env:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.url = f"sqlite:///{db}"
        self.durable = DBOSAgent(template(), name="skew")

    def script(self, agent: ReActAgent[Any, Any]) -> None:
        agent.model = ScriptedModel([[tool_use("work", "c1", name="x")], "done"] * 4)
        self.durable.template = agent

    async def completed(self, workflow_id: str) -> None:
        self.script(template())
        result = await self.durable.run("go", workflow_id=workflow_id)
        assert result.output == "done"

    def sql(self, statement: str, *params: object) -> None:
        with sqlite3.connect(self.db) as con:
            con.execute(statement, params)

    def crash(self, *ids: str) -> None:
        """Leave the runs as a SIGKILL would: PENDING, their steps recorded."""
        for workflow_id in ids:
            self.sql(
                "update workflow_status set status='PENDING' where workflow_uuid=?", workflow_id
            )

    async def outcome(self, workflow_id: str) -> Any:
        handle = await DBOS.retrieve_workflow_async(workflow_id)
        with anyio.fail_after(20):
            try:
                return await handle.get_result()
            except Exception as exc:  # the recorded error of the workflow
                return exc


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("dbos-skew")
    DBOS(
        config={
            "name": "agentkit-durable-skew",
            "system_database_url": f"sqlite:///{tmp / 'dbos.sqlite'}",
            "executor_id": "skew-worker",
            "application_version": "skew-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "CRITICAL",
        }
    )
    environment = Env(tmp / "dbos.sqlite")
    DBOS.launch()
    yield environment
    DBOS.destroy(destroy_registry=True)


async def test_a_run_recovered_under_the_same_configuration_resumes(env: Env) -> None:
    await env.completed("same-1")
    env.crash("same-1")
    env.script(template())  # a restart on the same code
    assert recover_executor(env.url, "skew-worker") == ["same-1"]
    output = await env.outcome("same-1")
    assert isinstance(output, dict) and output["stop_reason"] == "final"
    assert output["reply"]["content"][0]["text"] == "done"


async def test_a_run_recovered_under_another_configuration_is_refused_naming_both(
    env: Env,
) -> None:
    await env.completed("skew-1")
    recorded = describe(code_version(template()))
    env.crash("skew-1")
    changed = template("refund")  # the deploy added a tool
    env.script(changed)
    current = describe(code_version(changed))
    assert recorded != current
    recover_executor(env.url, "skew-worker")
    error = await env.outcome("skew-1")
    assert isinstance(error, Exception)
    assert recorded in str(error) and current in str(error)
    assert "refusing to finish" in str(error)


async def test_dry_run_reports_skew_and_changes_nothing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    await env.completed("dry-1")
    env.crash("dry-1")
    env.script(template("refund"))  # the new code's agent (one DBOSAgent per name)
    runs = {r.workflow_id: r for r in pending_runs(env.url, "skew-worker", agents=[env.durable])}
    assert runs["dry-1"].code == code_version(template())
    assert runs["dry-1"].skew is not None and "refuses to finish" in runs["dry-1"].skew
    parser = argparse.ArgumentParser()
    _durable_cmd.add_arguments(parser)
    args = parser.parse_args(
        [
            "recover",
            "--executor",
            "skew-worker",
            "--db",
            env.url,
            "--dry-run",
            "--application-version",
            "skew-2",
        ]
    )
    assert _durable_cmd.run(args) == 1
    out = capsys.readouterr().out
    assert "dry-1" in out and "SKEW" in out and "'skew-1'" in out and "'skew-2'" in out
    assert describe(code_version(template())) in out
    # Nothing changed: the run is still pending, and still reported.
    assert "dry-1" in {r.workflow_id for r in pending_runs(env.url, "skew-worker")}
    env.sql("update workflow_status set status='CANCELLED' where workflow_uuid='dry-1'")


async def test_a_corrupt_record_fails_only_its_own_run(env: Env) -> None:
    for workflow_id in ("bad-step", "bad-input", "good"):
        await env.completed(workflow_id)
    env.sql(
        "update operation_outputs set output='{\"x\": 1}' "
        "where workflow_uuid='bad-step' and function_id=1"
    )
    env.sql(
        "update workflow_input set inputs=? where workflow_uuid='bad-input'",
        '{"namedArgs":{},"positionalArgs":[{"input":5,"state":"no"}]}',
    )
    env.crash("bad-step", "bad-input", "good")
    env.script(template())
    assert sorted(recover_executor(env.url, "skew-worker")) == ["bad-input", "bad-step", "good"]
    good = await env.outcome("good")
    assert isinstance(good, dict) and good["stop_reason"] == "final"
    step = await env.outcome("bad-step")
    assert isinstance(step, Exception)
    assert "step 'model:scripted' of durable run 'bad-step' does not decode" in str(step)
    bad_input = await env.outcome("bad-input")
    assert isinstance(bad_input, Exception)
    assert "recorded input of durable run 'bad-input' does not decode" in str(bad_input)
    # The worker lives on: a new run completes.
    await env.completed("after")

"""Typed durable runs: deps, output types and usage limits through DBOS workflows.

A fork of a finished workflow (``DBOS.fork_workflow``) is a re-execution from the top with
the steps before the fork point replayed from the log and without the caller's in-process
deps: the in-process stand-in for a recovery after a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")

from agentkit import UsageError, UsageLimits, check_memory_invariant  # noqa: E402
from agentkit.agent import ReActAgent  # noqa: E402
from agentkit.durable import DBOSAgent, DurableRunResult  # noqa: E402
from agentkit.exceptions import StateError  # noqa: E402
from agentkit.messages import Msg  # noqa: E402
from agentkit.session import SQLiteSession  # noqa: E402
from agentkit.testing import ScriptedModel, tool_use  # noqa: E402
from agentkit.tools import ToolContext, Toolkit  # noqa: E402

DBOS = dbos.DBOS
SECRET = "s3cr3t-connection-string"


class Ticket(BaseModel):
    title: str
    priority: int


@dataclass
class Deps:
    user: str
    secret: str = SECRET


class Env:
    """The durable agents of this module (DBOS is one per process)."""

    def __init__(self, tmp: Path) -> None:
        self.sessions = SQLiteSession(tmp / "sessions.db")
        self.seen: list[Any] = []  # the deps each lookup call saw
        self.factory_calls: list[tuple[str, str | None]] = []
        tools = Toolkit()

        @tools.tool
        def lookup(ctx: ToolContext[Deps], order: int) -> str:
            """Look an order up for the current user.

            Args:
                order: The order number.
            """
            self.seen.append(ctx.deps)
            user = ctx.deps.user if ctx.deps is not None else "nobody"
            return f"order {order} of {user}"

        def factory(workflow_id: str, session_id: str | None) -> Deps:
            self.factory_calls.append((workflow_id, session_id))
            return Deps(user="rebuilt")

        self.model = ScriptedModel([])
        template = ReActAgent("typed", "You file tickets.", self.model, tools, print_hint=False)
        self.template = template
        self.with_factory = DBOSAgent(
            template, name="typed-factory", sessions=self.sessions, deps_factory=factory
        )
        self.without_factory = DBOSAgent(template, name="typed-plain", sessions=self.sessions)
        self.durable_inside: list[BaseException] = []

        @DBOS.workflow(name="typed-test.run-sync-inside")
        async def calls_run_sync() -> str:
            try:
                self.without_factory.run_sync("hi")
            except UsageError as exc:
                self.durable_inside.append(exc)
            return "done"

        self.calls_run_sync = calls_run_sync

    def script(self, replies: list[Any]) -> None:
        self.model = self.template.model = ScriptedModel(replies)
        self.seen.clear()
        self.factory_calls.clear()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("dbos-typed")
    DBOS(
        config={
            "name": "agentkit-durable-typed",
            "system_database_url": f"sqlite:///{tmp / 'dbos.sqlite'}",
            "executor_id": "typed-worker",
            "application_version": "typed-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    environment = Env(tmp)
    DBOS.launch()
    yield environment
    DBOS.destroy(destroy_registry=True)


def ticket_turn(title: str = "Refund", priority: int = 2) -> list[Any]:
    return [tool_use("generate_response", "f1", title=title, priority=priority)]


async def _recorded(workflow_id: str) -> Any:
    """A finished workflow's output, read back from DBOS."""
    handle = await DBOS.retrieve_workflow_async(workflow_id)
    return await handle.get_result()


async def _inputs(workflow_id: str) -> str:
    (status,) = await DBOS.list_workflows_async(workflow_ids=[workflow_id], load_input=True)
    return json.dumps(status.input, default=repr)


async def test_a_typed_run_gets_its_deps_output_type_and_session(env: Env) -> None:
    env.script([[tool_use("lookup", "l1", order=42)], ticket_turn()])
    deps = Deps(user="ada-lovelace-7")
    result = await env.without_factory.run(
        "file it", deps=deps, output_type=Ticket, session_id="typed-1"
    )
    assert isinstance(result, DurableRunResult)
    ticket: Ticket = result.output  # typed: DurableRunResult[Ticket]
    assert ticket == Ticket(title="Refund", priority=2)
    assert env.seen == [deps] and env.seen[0] is deps  # the very object, in process
    assert result.stop_reason == "final" and result.session_version == 1
    inputs = await _inputs(result.workflow_id)
    assert SECRET not in inputs and "ada-lovelace-7" not in inputs  # deps are never recorded
    assert f"{Ticket.__module__}:Ticket" in inputs  # the output type is, by name
    saved = await env.sessions.load_state("typed-1")
    assert saved is not None
    check_memory_invariant([Msg.from_dict(m) for m in saved["memory"]["messages"]])
    # The result read again from the workflow's record is validated again.
    again = DBOSAgent.result(await _recorded(result.workflow_id))
    assert again.output == ticket and isinstance(again.output, Ticket)


async def test_a_recovered_run_gets_deps_from_the_factory(env: Env) -> None:
    env.script([[tool_use("lookup", "l1", order=7)], ticket_turn("First", 1)])
    first = await env.with_factory.run("file it", deps=Deps(user="ada"), output_type=Ticket)
    assert first.output.title == "First" and env.factory_calls == []
    # Re-execute from the tool call on: the model's first answer is replayed from the log,
    # the call in flight runs again, this time with the factory's deps.
    env.script([ticket_turn("Second", 3)])
    fork = await DBOS.fork_workflow_async(first.workflow_id, 2)
    with anyio.fail_after(30):
        output = await fork.get_result()
    recovered = DBOSAgent.result(output, fork.get_workflow_id())
    assert recovered.output == Ticket(title="Second", priority=3)  # found again by name
    assert [d.user for d in env.seen] == ["rebuilt"]
    assert env.factory_calls == [(fork.get_workflow_id(), None)]  # (workflow id, session id)
    assert len(env.model.requests) == 1  # only the request after the re-run call was sent


async def test_a_recovered_run_without_a_factory_fails_before_running_anything(env: Env) -> None:
    env.script([[tool_use("lookup", "l1", order=9)], "done"])
    first = await env.without_factory.run("look", deps=Deps(user="ada"))
    assert first.output == "done"
    env.script([])
    fork = await DBOS.fork_workflow_async(first.workflow_id, 2)
    with anyio.fail_after(30), pytest.raises(Exception, match="deps_factory"):
        await fork.get_result()
    assert env.seen == [] and env.model.requests == []  # no tool ran with deps None


async def test_a_run_without_deps_recovers_without_them(env: Env) -> None:
    env.script([[tool_use("lookup", "l1", order=5)], "done"])
    first = await env.without_factory.run("look")
    assert env.seen == [None]
    env.script(["done again"])
    fork = await DBOS.fork_workflow_async(first.workflow_id, 2)
    with anyio.fail_after(30):
        recovered = DBOSAgent.result(await fork.get_result())
    assert recovered.output == "done again" and env.seen == [None]


async def test_usage_limits_are_recorded_and_stop_the_run(env: Env) -> None:
    env.script([[tool_use("lookup", "l1", order=1)], "never"])
    result = await env.without_factory.run(
        "look", usage_limits=UsageLimits(max_requests=1), output_type=Ticket
    )
    assert result.stop_reason == "usage_limit" and result.usage_limit == "max_requests"
    with pytest.raises(StateError):
        _ = result.output  # stopped before a valid ticket
    assert '"max_requests": 1' in await _inputs(result.workflow_id)
    check_memory_invariant([Msg.from_dict(m) for m in result.state["memory"]["messages"]])


async def test_a_recorded_output_that_no_longer_validates_is_refused(env: Env) -> None:
    env.script([ticket_turn("Old", 1)])
    result = await env.without_factory.run("file", output_type=Ticket)
    output = await _recorded(result.workflow_id)

    class Stricter(BaseModel):
        title: str
        priority: int
        owner: str  # added after the run was recorded

    with pytest.raises(StateError, match="not a valid"):
        DBOSAgent.result(output, result.workflow_id, output_type=Stricter)


async def test_an_unknown_recorded_output_type_is_named(env: Env) -> None:
    env.script([ticket_turn()])
    result = await env.without_factory.run("file", output_type=Ticket)
    output = dict(await _recorded(result.workflow_id))
    output["output_type"] = "not_imported_anywhere:Ticket"
    with pytest.raises(UsageError, match="not_imported_anywhere:Ticket"):
        DBOSAgent.result(output)  # type: ignore[call-overload]


async def test_entry_points_that_would_not_be_durable_are_refused(env: Env) -> None:
    with pytest.raises(UsageError, match="cannot stream"):
        env.without_factory.stream("hi")
    handle = await DBOS.start_workflow_async(env.calls_run_sync)
    assert await handle.get_result() == "done"
    (refused,) = env.durable_inside
    assert "inside a DBOS workflow" in str(refused)


def test_run_sync_outside_a_workflow_runs_durably(env: Env) -> None:
    env.script(["synchronously"])
    result = env.without_factory.run_sync("hi")
    assert result.output == "synchronously" and result.workflow_id

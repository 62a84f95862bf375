"""Self-healing MCP sessions: a call interrupted by a dropped connection is sent again only
when a repeat is harmless (``readOnlyHint`` / ``idempotentHint``), else it is a typed error.

Real servers (``tests/mcp_servers/flaky_server.py``) over stdio and over streamable HTTP on
127.0.0.1: killed (and restarted) while a call runs, or forgetting the session the call runs
in (its resumed stream is answered 404), in a plain client and in a durable agent run
(whose step log records the retry). The server appends every run of a tool to a file that
outlives its processes, so the tests count real runs: never a silent second one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentkit.exceptions import MCPCallInterrupted
from agentkit.mcp import HttpServer, MCPClient, StdioServer, register_mcp_client
from agentkit.testing import tool_use
from agentkit.tools import Toolkit, ToolResponse
from tests._mcp_helpers import ROOT, free_port
from tests._waiting import eventually, listening

FLAKY = str(ROOT / "tests" / "mcp_servers" / "flaky_server.py")
pytestmark = pytest.mark.anyio


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "runs.log"
    path.touch()
    return path


def runs(log: Path, tool: str) -> int:
    return log.read_text().split().count(tool)


def stdio(log: Path) -> StdioServer:
    return StdioServer(sys.executable, [FLAKY, "stdio"], env={**os.environ, "FLAKY_LOG": str(log)})


class HttpFlaky:
    """flaky_server over streamable HTTP on one port, restartable at the same address."""

    def __init__(self, log: Path, *options: str) -> None:
        self.log = log
        self.port = free_port()
        self.argv = [sys.executable, FLAKY, "http", str(self.port), *options]
        self.env = {**os.environ, "FLAKY_LOG": str(log)}
        self.proc: subprocess.Popen[bytes] | None = None
        self.config = HttpServer(f"http://127.0.0.1:{self.port}/mcp")

    def spawn(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    async def start(self) -> None:
        self.spawn()
        await eventually(lambda: listening(self.port), "the flaky server to listen", timeout=30)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def http_flaky(log: Path) -> Iterator[Any]:
    servers: list[HttpFlaky] = []

    def make(*options: str) -> HttpFlaky:
        servers.append(HttpFlaky(log, *options))
        return servers[-1]

    yield make
    for server in servers:
        server.kill()


@pytest.fixture(scope="module")
def forgetful_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpFlaky]:
    """One flaky server in ``forget`` mode for the module: each start is a Python process
    importing ``mcp``, and these tests need a fresh run log, not a fresh process."""
    server = HttpFlaky(tmp_path_factory.mktemp("forget") / "runs.log", "forget")
    server.spawn()
    anyio.run(lambda: eventually(lambda: listening(server.port), "the server", timeout=30))
    yield server
    server.kill()


async def _forget_everyone(server: HttpFlaky) -> None:
    async with MCPClient("sweeper", server.config, protocol="legacy") as sweeper:
        await sweeper.call_tool("forget_others")


@pytest.fixture
def forgetful(forgetful_server: HttpFlaky) -> HttpFlaky:
    """The module's ``forget`` server as if new: an empty run log (it reads the log per
    call) and no session left over from an earlier test (``forget_others`` counts them)."""
    forgetful_server.log.write_text("")
    anyio.run(_forget_everyone, forgetful_server)
    return forgetful_server


async def call_while(
    client: MCPClient, tool: str, arguments: dict[str, object], log: Path, then: Any
) -> ToolResponse | BaseException:
    """Call ``tool``; once its run is logged on the server, run ``then()``. The outcome."""
    outcome: list[ToolResponse | BaseException] = []

    async def call() -> None:
        try:
            outcome.append(await client.call_tool(tool, arguments))
        except MCPCallInterrupted as exc:
            outcome.append(exc)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await eventually(lambda: runs(log, tool) >= 1, f"{tool} to run on the server")
            await then()
    return outcome[0]


async def test_session_forgotten_under_a_running_call(forgetful: HttpFlaky) -> None:
    # The server forgets the session while the call runs: the call's stream ends, the SDK
    # resumes it with Last-Event-ID and gets 404. That 404 does not mean "never ran".
    server, log = forgetful, forgetful.log
    async with MCPClient("flaky", server.config, protocol="legacy", timeout=30) as client:
        await client.list_tools()
        with anyio.fail_after(60), pytest.raises(MCPCallInterrupted) as interrupted:
            await client.call_tool("charge", {"amount": 5, "hang": True})
        assert (interrupted.value.server, interrupted.value.tool) == ("flaky", "charge")
        assert "may or may not have run" in str(interrupted.value)
        assert runs(log, "charge") == 1
        with anyio.fail_after(60):  # healed: a new session, and the read-only call again
            result = await client.call_tool("lookup", {"key": "k", "hang": True})
        assert not result.is_error and result.get_text() == "lookup ran 2 times"
        retried = (result.metadata or {})["mcp_retried"]
        assert isinstance(retried, dict)
        assert (retried["reason"], retried["safe_because"]) == ("connection_lost", "readOnlyHint")
    cautious = MCPClient("flaky", server.config, protocol="legacy", retry_interrupted=False)
    async with cautious:
        await cautious.list_tools()
        with anyio.fail_after(60), pytest.raises(MCPCallInterrupted):
            await cautious.call_tool("put", {"key": "k", "value": "v", "hang": True})
        assert runs(log, "put") == 1


async def test_call_refused_for_a_forgotten_session_runs_exactly_once(
    forgetful: HttpFlaky,
) -> None:
    server, log = forgetful, forgetful.log
    client = MCPClient("flaky", server.config, protocol="legacy")
    other = MCPClient("other", server.config, protocol="legacy")
    async with client, other:
        await client.list_tools()
        forgotten = await other.call_tool("forget_others")  # the server expires our session
        assert forgotten.get_text() == "1"
        result = await client.call_tool("charge", {"amount": 5})
        assert not result.is_error, result.get_text()
        assert runs(log, "charge") == 1
        retried = (result.metadata or {}).get("mcp_retried")
        # The 404 reached the call itself (it never ran, so any tool is sent again), unless
        # the client's listening stream met the 404 first and a new session was started
        # before the call went out.
        assert retried is None or retried == {
            "reason": "session_lost",
            "safe_because": "not_run",
            "detail": retried["detail"],  # type: ignore[index]
        }


async def test_idempotent_call_survives_an_http_server_restart(log: Path, http_flaky: Any) -> None:
    server = http_flaky()
    await server.start()
    client = MCPClient("flaky", server.config, protocol="legacy", timeout=30, max_reconnects=30)
    chunks: list[ToolResponse] = []

    async def call() -> None:
        arguments: dict[str, object] = {"key": "k", "value": "v", "hang": True}
        async for chunk in client.call_tool_stream("put", arguments):
            chunks.append(chunk)

    async with client:
        await client.list_tools()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await eventually(lambda: runs(log, "put") >= 1, "put to run on the server")
                server.kill()
                await server.start()  # same address, new process
    *progress, final = chunks
    assert not final.is_error and final.get_text() == "put ran 2 times"
    assert (final.metadata or {})["mcp_retried"]["safe_because"] == "idempotentHint"  # type: ignore[index]
    notes = [p.metadata["mcp_retry"] for p in progress if p.metadata and "mcp_retry" in p.metadata]
    assert [n["reason"] for n in notes] == ["connection_lost"]  # type: ignore[index]


async def test_durable_run_records_the_retry_and_names_the_interrupted_call(
    log: Path, tmp_path: Path
) -> None:
    # Through an agent's (durable) toolkit: the MCP tool turns the unmarked call's
    # MCPCallInterrupted into its error result, and the step log keeps both outcomes.
    dbos = pytest.importorskip("dbos", reason="the optional 'dbos' package is not installed")
    from agentkit import ReActAgent
    from agentkit.durable import DBOSAgent
    from agentkit.session import SQLiteSession
    from agentkit.testing import ScriptedModel

    DBOS = dbos.DBOS
    DBOS(
        config={
            "name": "agentkit-mcp-retry",
            "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
            "executor_id": "test-worker",
            "application_version": "test-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    try:
        toolkit = Toolkit()
        async with MCPClient("flaky", stdio(log)) as client:
            await register_mcp_client(toolkit, client, enable_funcs=["put", "charge"])
            pid = int((await client.call_tool("pid")).get_text())
            charge_and_put = [
                tool_use("charge", "call-charge", amount=5, hang=True),
                tool_use("put", "call-put", key="k", value="v", hang=True),
            ]
            model = ScriptedModel([list(charge_and_put), "ok"])
            agent = ReActAgent("a", "sys", model, toolkit, print_hint=False)
            durable = DBOSAgent(agent, name="mcp-retry", sessions=SQLiteSession(tmp_path / "s.db"))
            DBOS.launch()
            done: list[Any] = []

            async def run() -> None:
                done.append(await durable.run("charge and store"))

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(run)
                    await eventually(
                        lambda: runs(log, "charge") and runs(log, "put"), "both calls to run"
                    )
                    os.kill(pid, signal.SIGKILL)
        steps = await DBOS.list_workflow_steps_async(done[0].workflow_id)
        outputs = {
            s["function_name"]: json.loads(json.dumps(s["output"]))
            for s in steps
            if s["function_name"].startswith("tool:")
        }
    finally:
        DBOS.destroy(destroy_registry=True)
    charge, put = outputs["tool:charge"], outputs["tool:put"]
    assert charge["is_error"]
    text = charge["content"][-1]["text"]
    assert "call call-charge" in text and "Check whether it took effect" in text
    assert charge["metadata"]["error"] == "mcp_call_interrupted"
    assert charge["metadata"]["call_id"] == "call-charge"
    assert runs(log, "charge") == 1
    assert not put["is_error"] and put["content"][0]["text"] == "put ran 2 times"
    assert put["metadata"]["mcp_retried"]["safe_because"] == "idempotentHint"

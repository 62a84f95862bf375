"""Logging hygiene: tool failures are results for the model, not tracebacks on stderr."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from agentkit import ReActAgent, Toolkit
from agentkit.exceptions import MCPConnectionError
from agentkit.testing import ScriptedModel, tool_use

_SCRIPT = textwrap.dedent(
    """
    import anyio
    from agentkit import ReActAgent, Toolkit
    from agentkit.testing import ScriptedModel, tool_use

    def boom(x: int) -> int:
        '''Fail always.

        Args:
            x: A number.
        '''
        raise RuntimeError("kaput")

    async def main():
        tk = Toolkit()
        tk.register_tool_function(boom)
        model = ScriptedModel([[tool_use("boom", x=1)], "done"])
        agent = ReActAgent("a", "sys", model, tk, print_hint=False)
        reply = await agent("go")
        results = [b for m in await agent.memory.get_memory()
                   for b in m.get_content_blocks() if b["type"] == "tool_result"]
        assert results and results[0].get("is_error"), results
        assert "kaput" in str(results[0]["output"])
        print("OK", reply.get_text())

    anyio.run(main)
    """
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=50
    )


def test_failing_tool_without_logging_config_prints_nothing_on_stderr() -> None:
    proc = _run(_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK")
    assert proc.stderr == ""


def test_failing_tool_with_basic_config_is_an_info_record_not_a_warning() -> None:
    # An application that configures logging at the default WARNING level sees nothing
    # either: a tool failure is the model's business, recorded at INFO for developers.
    proc = _run("import logging; logging.basicConfig()\n" + _SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_library_loggers_have_a_null_handler() -> None:
    import agentkit  # noqa: F401

    handlers = logging.getLogger("agentkit").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


async def test_failure_is_recorded_at_info_with_traceback_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom() -> str:
        """Fail."""
        raise RuntimeError("kaput")

    tk = Toolkit()
    tk.register_tool_function(boom)
    agent = ReActAgent("a", "s", ScriptedModel([[tool_use("boom")], "ok"]), tk, print_hint=False)
    with caplog.at_level(logging.INFO, logger="agentkit"):
        await agent("go")
    records = [r for r in caplog.records if "boom" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.INFO]
    assert records[0].exc_info is None  # no traceback unless DEBUG is on
    caplog.clear()
    agent = ReActAgent("a", "s", ScriptedModel([[tool_use("boom")], "ok"]), tk, print_hint=False)
    with caplog.at_level(logging.DEBUG, logger="agentkit"):
        await agent("go")
    records = [r for r in caplog.records if "boom" in r.getMessage()]
    assert records and records[0].exc_info is not None


async def test_connection_failure_does_not_blame_the_arguments() -> None:
    async def remote() -> str:
        """Call a remote server."""
        raise MCPConnectionError("MCP server 'x' is down and 3 reconnects failed")

    def parse(value: str) -> int:
        """Parse a number.

        Args:
            value: Digits.
        """
        return int(value)

    tk = Toolkit()
    tk.register_tool_function(remote)
    tk.register_tool_function(parse)
    model = ScriptedModel([[tool_use("remote"), tool_use("parse", value="x1")], "ok"])
    agent = ReActAgent("a", "s", model, tk, print_hint=False)
    await agent("go")
    msgs = await agent.memory.get_memory()
    outputs = {
        b["name"]: str(b["output"])
        for m in msgs
        for b in m.get_content_blocks()
        if b["type"] == "tool_result"
    }
    assert "check the arguments" not in outputs["remote"].lower()
    assert "not caused by your arguments" in outputs["remote"]
    assert "connection" in outputs["remote"].lower()
    # A ValueError from the tool's own parsing still points at the arguments.
    assert "check the arguments" in outputs["parse"].lower()


_MCP_SCRIPT = textwrap.dedent(
    """
    import anyio
    from agentkit import ReActAgent, Toolkit
    from agentkit.mcp import MCPClient, register_mcp_client
    from agentkit.testing import ScriptedModel, tool_use
    from tests._mcp_helpers import py_stdio

    async def main():
        client = MCPClient("py", py_stdio(), timeout=30)
        tk = Toolkit()
        async with client:
            await register_mcp_client(tk, client, enable_funcs=["fail", "crash"])
            model = ScriptedModel(
                [[tool_use("fail", message="bad input")], [tool_use("crash")], "done"]
            )
            agent = ReActAgent("a", "s", model, tk, print_hint=False)
            await agent("go")
            for m in await agent.memory.get_memory():
                for b in m.get_blocks("tool_result"):
                    print(b["name"], "|", str(b["output"]).replace(chr(10), " "))

    anyio.run(main)
    """
)


def test_failing_and_crashing_mcp_tools_print_nothing_on_stderr() -> None:
    proc = _run(_MCP_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    outputs = dict(line.split(" | ", 1) for line in proc.stdout.splitlines())
    assert "bad input" in outputs["fail"]
    crash = outputs["crash"].lower()
    assert "connection" in crash and "check the arguments" not in crash

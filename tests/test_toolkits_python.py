"""toolkits.python: a subprocess per snippet, isolated cwd and env, timeouts, limits, MCP."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests._toolkits_helpers import assert_same_over_mcp, call, stdio_client
from toolkits import python
from toolkits.python import PythonRunner


async def test_prints_and_exit_code() -> None:
    runner = PythonRunner()
    assert await runner.run_python("print(6 * 7)") == "42\n[exit code: 0]"
    failed = await runner.run_python("raise SystemExit(3)")
    assert failed == "(no output)\n[exit code: 3]"
    error = await runner.run_python("1 / 0")
    assert "ZeroDivisionError: division by zero" in error
    assert error.endswith("[exit code: 1]")


async def test_runs_out_of_process_in_a_fresh_temp_dir() -> None:
    runner = PythonRunner()
    code = "import os, sys; print(os.getpid()); print(os.getcwd()); print(os.listdir('.'))"
    first = (await runner.run_python(code)).splitlines()
    assert int(first[0]) != os.getpid()
    workdir = Path(first[1])
    assert workdir.name.startswith("agentkit-python-")
    assert first[2] == "['snippet.py']"
    assert not workdir.exists()  # removed afterwards
    second = (await runner.run_python(code)).splitlines()
    assert second[1] != first[1]


async def test_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = await PythonRunner().run_python("import os; print(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in result
    custom = await PythonRunner(env={"X": "1"}).run_python("import os; print(os.environ['X'])")
    assert custom.startswith("1\n")


async def test_timeout_kills_the_program() -> None:
    runner = PythonRunner(default_timeout=3)
    started = time.monotonic()
    result = await runner.run_python("import time\nprint('start', flush=True)\nwhile True: pass")
    assert time.monotonic() - started < 15
    assert result.startswith("start\n")
    assert result.endswith("[timed out after 3 s; the command and its children were killed]")
    capped = await PythonRunner(max_timeout=0.5).run_python("import time; time.sleep(60)", 100)
    assert "timed out after 0.5 s" in capped


async def test_huge_and_non_utf8_output() -> None:
    runner = PythonRunner(max_output_bytes=2000)
    huge = await runner.run_python("print('A' * 10_000_000)")
    assert "bytes of output truncated" in huge
    assert len(huge) < 2200
    raw = await runner.run_python("import sys; sys.stdout.buffer.write(b'\\xff\\xfeok\\n')")
    assert raw == "\ufffd\ufffdok\n[exit code: 0]"


async def test_stdin_is_closed_and_code_limit() -> None:
    result = await PythonRunner().run_python("input()", timeout=10)
    assert "EOFError" in result
    with pytest.raises(ValueError, match="limit"):
        await PythonRunner(max_code_bytes=10).run_python("print('way too long')")


async def test_toolkit_requires_approval_by_default() -> None:
    assert python.toolkit().tools["run_python"].requires_approval
    assert not python.toolkit(requires_approval=False).tools["run_python"].requires_approval
    result = await call(python.toolkit(), "run_python", code="print('hi')")
    assert result.get_text() == "hi\n[exit code: 0]"


async def test_same_results_locally_and_over_mcp_stdio() -> None:
    calls = [
        ("run_python", {"code": "print(sum(range(10)))"}),
        ("run_python", {"code": "import sys; print('x', file=sys.stderr); sys.exit(4)"}),
        ("run_python", {"code": "while True: pass", "timeout": 0.5}),
    ]
    async with stdio_client("python") as client:
        await assert_same_over_mcp(python.toolkit(), client, calls)

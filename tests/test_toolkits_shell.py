"""toolkits.shell: no shell by default, confinement, allow-list, timeouts that kill the group,
cancellation that leaves no process, output limits, non-UTF-8 output, MCP."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import anyio
import psutil
import pytest

from tests._toolkits_helpers import assert_same_over_mcp, call, stdio_client
from toolkits import shell
from toolkits.shell import Shell


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "hello.txt").write_text("hi\n")
    (tmp_path / "outside").mkdir()
    return root


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def wait_gone(pid: int, within: float = 5.0) -> bool:
    with anyio.move_on_after(within):
        while not gone(pid):
            await anyio.sleep(0.02)
    return gone(pid)


async def test_string_and_argv_commands(root: Path) -> None:
    sh = Shell(root)
    assert await sh.run_command("cat hello.txt") == "hi\n[exit code: 0]"
    assert await sh.run_command(["echo", "a b", "$HOME"]) == "a b $HOME\n[exit code: 0]"
    # No shell: the metacharacters are plain arguments.
    assert await sh.run_command("echo 'a  b' ; ls > x") == "a  b ; ls > x\n[exit code: 0]"
    assert not (root / "x").exists()
    assert (await sh.run_command("ls missing")).endswith("[exit code: 2]")
    assert await sh.run_command("true") == "(no output)\n[exit code: 0]"


async def test_bad_commands(root: Path) -> None:
    sh = Shell(root)
    with pytest.raises(ValueError, match="cannot parse"):
        await sh.run_command("echo 'unbalanced")
    with pytest.raises(ValueError, match="empty"):
        await sh.run_command("   ")
    with pytest.raises(ValueError, match="empty"):
        await sh.run_command([])
    with pytest.raises(FileNotFoundError, match="command not found"):
        await sh.run_command("no-such-program-xyz")
    with pytest.raises(ValueError, match="timeout"):
        await sh.run_command("true", timeout=0)


async def test_allow_shell_opt_in(root: Path) -> None:
    sh = Shell(root, allow_shell=True)
    assert await sh.run_command("echo a | tr a b > out.txt; cat out.txt") == "b\n[exit code: 0]"
    with pytest.raises(ValueError, match="choose one"):
        Shell(root, allow_shell=True, allowed_executables=["ls"])


async def test_cwd_is_confined(root: Path) -> None:
    sh = Shell(root)
    assert (await sh.run_command("pwd", cwd="sub")).startswith(str(root / "sub"))
    for cwd in ("..", "../outside", "/", "/tmp"):
        with pytest.raises(PermissionError, match="outside the allowed root"):
            await sh.run_command("pwd", cwd=cwd)
    (root / "escape").symlink_to(root.parent / "outside")
    with pytest.raises(PermissionError):
        await sh.run_command("pwd", cwd="escape")
    with pytest.raises(NotADirectoryError):
        await sh.run_command("pwd", cwd="hello.txt")


async def test_allow_list(root: Path) -> None:
    sh = Shell(root, allowed_executables=["ls", "echo"])
    assert (await sh.run_command("ls")).startswith("hello.txt\nsub\n")
    assert (await sh.run_command([shutil.which("echo") or "", "abs"])).startswith("abs")
    with pytest.raises(PermissionError, match="not an allowed executable"):
        await sh.run_command("cat hello.txt")
    with pytest.raises(PermissionError, match="not an allowed executable"):
        await sh.run_command("rm -rf .")
    # A look-alike program named like an allowed one is not the allowed one.
    fake = root / "ls"
    fake.write_text("#!/bin/sh\necho pwned\n")
    fake.chmod(0o755)
    with pytest.raises(PermissionError):
        await sh.run_command("./ls")
    with pytest.raises(FileNotFoundError, match="not found on PATH"):
        Shell(root, allowed_executables=["no-such-program-xyz"])


async def test_timeout_kills_the_whole_process_group(root: Path) -> None:
    sh = Shell(root, allow_shell=True)
    started = time.monotonic()
    # The shell starts a background sleeper, reports its pid, then waits forever.
    result = await sh.run_command("sleep 300 & echo $!; wait", timeout=2)
    assert time.monotonic() - started < 15
    assert "[timed out after 2 s; the command and its children were killed]" in result
    assert await wait_gone(int(result.split()[0]))


async def test_background_job_does_not_outlive_the_command(root: Path) -> None:
    sh = Shell(root, allow_shell=True)
    started = time.monotonic()
    result = await sh.run_command("sleep 300 > /dev/null 2>&1 & echo $!")
    assert time.monotonic() - started < 10
    assert result.endswith("[exit code: 0]")
    assert await wait_gone(int(result.split()[0]))


async def test_cancelling_a_call_kills_the_child(root: Path) -> None:
    tk = shell.toolkit(root, allow_shell=True)
    pidfile = root / "pid"
    block = {
        "type": "tool_use",
        "id": "c1",
        "name": "run_command",
        "input": {"command": f"echo $$ > {pidfile}; exec sleep 300"},
    }

    async def run() -> None:
        async for _ in tk.call_tool_function(block):  # type: ignore[arg-type]
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            while not pidfile.exists() or not pidfile.read_text().strip():
                await anyio.sleep(0.02)
        pid = int(pidfile.read_text())
        assert not gone(pid)
        tg.cancel_scope.cancel()
    assert await wait_gone(pid)


async def test_huge_output_is_truncated_in_the_middle(root: Path) -> None:
    sh = Shell(root, max_output_bytes=3000)
    code = "import sys; sys.stdout.write('HEAD' + 'x' * 5_000_000 + 'TAIL')"
    result = await sh.run_command([sys.executable, "-c", code])
    assert result.startswith("HEAD")
    assert "TAIL\n[exit code: 0]" in result
    assert "bytes of output truncated" in result
    assert len(result) < 3200


async def test_non_utf8_output_and_stderr(root: Path) -> None:
    sh = Shell(root)
    code = "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe\\n'); sys.stderr.write('err\\n')"
    result = await sh.run_command([sys.executable, "-c", code])
    assert "ok \ufffd\ufffd\n" in result
    assert "err\n" in result
    killed = await sh.run_command([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"])
    assert killed.endswith("[killed by signal SIGKILL]")


async def test_stdin_is_closed(root: Path) -> None:
    # `cat` with no file reads stdin: with /dev/null it ends at once instead of hanging.
    assert await Shell(root).run_command("cat", timeout=10) == "(no output)\n[exit code: 0]"


async def test_toolkit_requires_approval_by_default(root: Path) -> None:
    assert shell.toolkit(root).tools["run_command"].requires_approval
    assert not shell.toolkit(root, requires_approval=False).tools["run_command"].requires_approval
    result = await call(shell.toolkit(root), "run_command", command="ls", cwd="..")
    assert result.is_error
    assert "outside the allowed root" in result.get_text()


async def test_same_results_locally_and_over_mcp_stdio(root: Path) -> None:
    local = shell.toolkit(root, allowed_executables=["ls", "cat"])
    calls = [
        ("run_command", {"command": "ls"}),
        ("run_command", {"command": ["cat", "hello.txt"]}),
        ("run_command", {"command": "cat missing"}),
        ("run_command", {"command": "rm hello.txt"}),
        ("run_command", {"command": "ls", "cwd": "../outside"}),
    ]
    args = ("--root", str(root), "--allow", "ls", "--allow", "cat")
    async with stdio_client("shell", *args) as client:
        await assert_same_over_mcp(local, client, calls)
    assert (root / "hello.txt").exists()


async def test_cancelled_mcp_call_kills_the_child(root: Path) -> None:
    pidfile = root / "pid"
    command = ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 300"]
    async with stdio_client("shell", "--root", str(root)) as client:
        with anyio.move_on_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "run_command", {"command": command})
                while not pidfile.exists() or not pidfile.read_text().strip():
                    await anyio.sleep(0.02)
                pid = int(pidfile.read_text())
                assert not gone(pid)
                tg.cancel_scope.cancel()  # the client sends notifications/cancelled
        assert await wait_gone(pid, within=10)
        # The server is still healthy afterwards.
        assert (await client.call_tool("run_command", {"command": "ls"})).get_text()


async def test_output_streams_live_as_progress(root: Path) -> None:
    tk = shell.toolkit(root, max_output_bytes=1000)
    assert "ctx" not in tk.get_tool_definitions()[0].parameters["properties"]
    code = "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.2)"
    block = {
        "type": "tool_use",
        "id": "c1",
        "name": "run_command",
        "input": {"command": [sys.executable, "-c", code]},
    }
    chunks = [c async for c in tk.call_tool_function(block)]  # type: ignore[arg-type]
    progress = "".join(c.get_text() for c in chunks[:-1])
    assert progress == "line 0\nline 1\nline 2\n"
    assert len(chunks) >= 2  # progress arrived before the final chunk
    assert chunks[-1].get_text() == "line 0\nline 1\nline 2\n[exit code: 0]"
    # Progress stops at the output limit; the final result is cut in the middle instead.
    block["input"] = {"command": [sys.executable, "-c", "print('z' * 100_000)"]}
    chunks = [c async for c in tk.call_tool_function(block)]  # type: ignore[arg-type]
    assert sum(len(c.get_text()) for c in chunks[:-1]) == 1000
    assert "truncated" in chunks[-1].get_text()


async def test_output_streams_as_mcp_progress(root: Path) -> None:
    code = "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.2)"
    async with stdio_client("shell", "--root", str(root)) as client:
        stream = client.call_tool_stream("run_command", {"command": [sys.executable, "-c", code]})
        chunks = [c async for c in stream]
    messages = "".join((c.metadata or {}).get("message") or "" for c in chunks[:-1])
    assert messages == "tick 0\ntick 1\ntick 2\n"
    assert chunks[-1].get_text() == "tick 0\ntick 1\ntick 2\n[exit code: 0]"

"""toolkits.shell / toolkits.python: nothing a command started outlives the call."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import anyio
import psutil
import pytest

from tests._child_process import REPO, kill_all, tagged_processes
from toolkits.python import PythonRunner
from toolkits.shell import Shell


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def _tagged_env() -> tuple[str, dict[str, str]]:
    tag = uuid.uuid4().hex
    return tag, {"PATH": os.environ.get("PATH", os.defpath), "AGENTKIT_TEST_TAG": tag}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- item 5: an interrupt at any moment (the start included) leaves nothing running ----------


async def test_interrupt_fuzz_leaves_no_process_behind(root: Path) -> None:
    tag, env = _tagged_env()
    sh = Shell(root, allow_shell=True, env=env)
    rng = random.Random(1305)
    interrupted = 0
    for _ in range(300):
        with anyio.move_on_after(rng.uniform(0, 0.03)) as scope:
            await sh.run_command("sleep 30 & sleep 30 & (sleep 30; true) & wait")
        interrupted += scope.cancelled_caught
    left = tagged_processes(tag)
    kill_all(left)
    assert interrupted == 300
    assert not left, f"{len(left)} processes left behind after 300 interrupts"


# -- item 16: jobs that leave the process group are reaped too --------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER")
@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'set -m; sleep 300 > /dev/null 2>&1 & echo $!'",
        "setsid sleep 300 > /dev/null 2>&1 & echo $!",
        # A classic daemon: double fork, new session, output closed, parents gone. The
        # middle process prints the daemon's pid before it exits, and the first waits for it,
        # so the pid is in the output before the command ends (the daemon printing it itself
        # raced the end of the command under load).
        f"{sys.executable} -c 'import os,sys,time\n"
        "p = os.fork()\n"
        "if p: os.waitpid(p, 0); sys.exit(0)\n"
        "os.setsid()\n"
        "g = os.fork()\n"
        "if g: print(g, flush=True); sys.exit(0)\n"
        "os.close(1); os.close(2); time.sleep(300)'",
    ],
    ids=["set-m", "setsid", "double-fork-daemon"],
)
async def test_jobs_that_leave_the_group_do_not_outlive_the_call(root: Path, command: str) -> None:
    tag, env = _tagged_env()
    result = await Shell(root, allow_shell=True, env=env).run_command(command)
    pid = int(result.split()[0])
    left = tagged_processes(tag)
    kill_all(left)
    assert _gone(pid), result
    assert left == []


# -- item 6: SIGTERM (or death) of the process that runs the command kills the command -------

_AGENT = """
import sys, anyio
from toolkits.shell import Shell

async def main(root: str) -> None:
    await Shell(root, allow_shell=True).run_command("sleep 300 & echo $! > job.pid; wait")

anyio.run(main, sys.argv[1])
"""


def _wait_for(path: Path) -> int:
    for _ in range(400):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        threading.Event().wait(0.05)
    raise AssertionError(f"{path} never appeared")


def _assert_gone_soon(pid: int) -> None:
    try:
        psutil.Process(pid).wait(timeout=20)  # hang guard only
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"process {pid} outlived the process that ran it") from None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_sigterm_to_a_running_agent_kills_its_command(root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    agent = subprocess.Popen([sys.executable, "-c", _AGENT, str(root)], env=env)
    try:
        job = _wait_for(root / "job.pid")
        agent.send_signal(signal.SIGTERM)  # Python's default: die at once, no cleanup
        assert agent.wait(timeout=20) == -signal.SIGTERM
        _assert_gone_soon(job)
    finally:
        agent.kill()
        agent.wait()


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def test_sigterm_to_served_shell_server_kills_the_command(root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "toolkits.shell", "--root", str(root), "--allow-shell"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _rpc(
            server,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )
        assert server.stdout is not None and b'"id":1' in server.stdout.readline()
        _rpc(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        command = "sleep 300 & echo $! > job.pid; wait"
        arguments = {"command": command, "timeout": 600}
        _rpc(
            server,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "run_command", "arguments": arguments},
            },
        )
        job = _wait_for(root / "job.pid")
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=20) is not None  # hang guard: it stops
        _assert_gone_soon(job)
    finally:
        server.kill()
        server.wait()
        for stream in (server.stdin, server.stdout):
            if stream is not None:
                stream.close()


# -- item 15: run_python deletes its folder off the event loop --------------------------------


async def test_run_python_removes_its_folder_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_rmtree = shutil.rmtree
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}
    loop_thread = threading.get_ident()

    def slow_rmtree(path: str, *args: object, **kwargs: object) -> None:
        seen["path"] = path
        seen["on_loop_thread"] = threading.get_ident() == loop_thread
        entered.set()
        # Released by a task on the event loop: that task can only run if this call is not
        # blocking the loop. The wait bound is a hang guard only.
        seen["released"] = release.wait(20)
        real_rmtree(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "rmtree", slow_rmtree)

    async def releaser() -> None:
        while not entered.is_set():
            await anyio.sleep(0.01)
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(releaser)
        out = await PythonRunner().run_python("print('hi')")
    assert out.startswith("hi\n")
    assert seen["released"] is True and seen["on_loop_thread"] is False
    assert not Path(str(seen["path"])).exists()


# -- item 9: the allow-list refuses known escape hatches; the sandbox is the boundary ----------


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_git_alias_escape_is_refused(root: Path) -> None:
    sh = Shell(root, allowed_executables=["git", "ls"])
    pwned = root / "pwned"
    escapes = [
        ["git", "-c", f"alias.x=!touch {pwned}", "x"],
        ["git", f"-calias.x=!touch {pwned}", "x"],
        ["git", "--config-env=alias.x=HOME", "x"],
        ["git", "-C", "/", "status"],
        ["git", "ls-remote", f"--upload-pack=touch {pwned}", "."],
        ["git", "clone", "-u", f"touch {pwned}", ".", "copy"],
    ]
    for argv in escapes:
        with pytest.raises(PermissionError, match="refused by the allow-list guard"):
            await sh.run_command(argv)
    # An alias defined in the repository's own config is refused as "not a built-in".
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "alias.y", f"!touch {pwned}"], check=True)
    with pytest.raises(PermissionError, match="not a known built-in"):
        await sh.run_command(["git", "y"])
    assert not pwned.exists()
    assert "[exit code: 0]" in await sh.run_command("git status --short")


async def test_find_exec_and_launchers_are_refused(root: Path) -> None:
    sh = Shell(root, allowed_executables=["find"])
    with pytest.raises(PermissionError, match="find -exec"):
        await sh.run_command(["find", ".", "-exec", "touch", "x", ";"])
    with pytest.raises(ValueError, match="allow_launchers=True"):
        Shell(root, allowed_executables=["ls", "env"])
    Shell(root, allowed_executables=["env"], allow_launchers=True)  # when one insists


def test_sandbox_errors_clearly_when_bubblewrap_is_absent(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(root))  # nothing on PATH
    with pytest.raises(FileNotFoundError, match="needs bubblewrap"):
        Shell(root, sandbox="bwrap")
    with pytest.raises(ValueError, match="unknown sandbox"):
        Shell(root, sandbox="docker")


def _bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--", "true"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap not installed or not permitted")
async def test_bwrap_sandbox_confines_writes_and_reads(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("SECRET")
    sh = Shell(root, allow_shell=True, sandbox="bwrap")
    out = await sh.run_command(f"echo ok > inside.txt; cat {secret}; touch {tmp_path}/x; true")
    assert (root / "inside.txt").read_text() == "ok\n"
    assert "SECRET" not in out
    assert not (tmp_path / "x").exists()
    net = await sh.run_command("cat /proc/net/dev")
    assert "eth" not in net  # a fresh network namespace: loopback only

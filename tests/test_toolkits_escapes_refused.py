"""The ready-made toolkits refuse escapes: private addresses, symlinks out of the root, jobs and forks outliving a call."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import psutil
import pytest

from toolkits.filesystem import FileSystem
from toolkits.python import PythonRunner
from toolkits.shell import Shell
from toolkits.web import FetchError, WebFetcher

MARK = "4243"  # sleep duration used to find stray processes


def strays() -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.cmdline()[:2] == ["sleep", MARK]:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def assert_no_strays() -> None:
    deadline = time.monotonic() + 5
    while strays() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = strays()
    for pid in left:
        os.kill(pid, 9)
    assert not left


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",  # 127.0.0.1 as one decimal number
        "http://0x7f000001/",
        "http://127.1/",
        "http://0/",
        "http://[::ffff:a9fe:a9fe]/",  # 169.254.169.254, IPv4-mapped
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "http://[0:0:0:0:0:0:0:1]/",
    ],
)
async def test_numeric_spellings_of_private_addresses_are_refused(url: str) -> None:
    with pytest.raises(FetchError, match="refusing to fetch"):
        await WebFetcher(timeout=5).fetch_url(url)


async def test_symlinks_out_of_the_root_are_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    (root / "link").symlink_to(outside / "secret.txt")
    (root / "dir").symlink_to(outside)
    (root / "dangling").symlink_to(outside / "new.txt")
    (root / "rel").symlink_to("../outside")
    fs = FileSystem(root)
    for attempt in (
        fs.read_file("link"),
        fs.read_file("dir/secret.txt"),
        fs.write_file("dangling", "x"),
        fs.write_file("rel/new.txt", "x"),
        fs.edit_file("link", "SECRET", "x"),
        fs.read_file("/proc/self/root" + str(outside / "secret.txt")),
    ):
        with pytest.raises(PermissionError):
            await attempt
    assert (await fs.grep("SECRET")).startswith("No matches")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "SECRET"


async def test_shell_background_jobs_do_not_outlive_the_call(tmp_path: Path) -> None:
    shell = Shell(tmp_path, allow_shell=True, default_timeout=20)
    started = time.monotonic()
    out = await shell.run_command(f"sleep {MARK} & echo started")
    assert out.startswith("started") and time.monotonic() - started < 10
    out = await shell.run_command(f"sleep {MARK} >/dev/null 2>&1 & echo quiet")
    assert out.startswith("quiet")
    assert_no_strays()


async def test_python_forks_are_killed_and_binary_output_is_text() -> None:
    runner = PythonRunner(default_timeout=20)
    code = (
        "import os, subprocess\n"
        f"subprocess.Popen(['sleep', '{MARK}'])\n"
        "if os.fork() == 0:\n"
        "    import time; time.sleep(100)\n"
        "print('parent done')"
    )
    assert (await runner.run_python(code)).startswith("parent done")
    assert_no_strays()
    out = await runner.run_python("import sys; sys.stdout.buffer.write(bytes(range(256)))")
    assert "\ufffd" in out and out.endswith("[exit code: 0]")
    with anyio.fail_after(30):
        big = await runner.run_python("print('x' * 10_000_000)")
    assert len(big) < 40_000 and "truncated" in big

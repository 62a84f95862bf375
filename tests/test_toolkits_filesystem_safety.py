"""toolkits.filesystem stays safe: linear-time patterns, no root escapes by races, per-file locks, byte caps, escaped names, umask."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests._child_process import run_child
from tests._toolkits_helpers import call, stdio_client
from toolkits import filesystem
from toolkits.filesystem import FileSystem


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("line 1\nline 2\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    return root


# -- item 2: patterns run in linear time; the event loop stays responsive ----------------------

_RESPONSIVE = """
    import sys, anyio
    from toolkits.filesystem import FileSystem

    async def main(root: str, tool: str, pattern: str) -> None:
        fs = FileSystem(root)
        ticks = 0
        result = None

        async def search() -> None:
            nonlocal result
            result = await getattr(fs, tool)(pattern)

        async with anyio.create_task_group() as tg:
            tg.start_soon(search)
            # The loop must keep running while the search does: tick, then interrupt it.
            for _ in range(3):
                await anyio.sleep(0.01)
                ticks += 1
            tg.cancel_scope.cancel()
        # Interrupted or finished: either way the loop was never frozen.
        print(ticks, "finished" if result is not None else "interrupted", repr(result))

    anyio.run(main, *sys.argv[1:])
"""


def test_grep_redos_pattern_keeps_the_loop_responsive(tmp_path: Path) -> None:
    # The repro: ^(a+)+$ on a 29-character line held the GIL for 10 s on `re`;
    # 34 characters would take minutes. RE2 answers at once.
    (tmp_path / "bad.txt").write_text("a" * 33 + "!\n")
    out = run_child(_RESPONSIVE, str(tmp_path), "grep", "^(a+)+$")
    assert out.startswith("3 ")


def test_glob_with_many_stars_keeps_the_loop_responsive(tmp_path: Path) -> None:
    # The repro: *a*a*a*a*a*a*b against one 90-character name stalled for 17 s.
    (tmp_path / ("a" * 90)).write_text("x")
    out = run_child(_RESPONSIVE, str(tmp_path), "glob", "*a*a*a*a*a*a*a*a*b")
    assert out.startswith("3 ")


async def test_grep_redos_pattern_answers(tree: Path) -> None:
    (tree / "bad.txt").write_text("a" * 40 + "!\n" + "a" * 12 + "\n")
    result = await FileSystem(tree).grep("^(a+)+$")
    assert result == "bad.txt:2: " + "a" * 12


@pytest.mark.parametrize(
    ("pattern", "why"),
    [(r"(a)\1", "backreferences"), (r"foo(?=bar)", "lookaround"), (r"(?<!x)y", "lookaround")],
)
async def test_grep_unsupported_syntax_is_a_clear_error(tree: Path, pattern: str, why: str) -> None:
    tk = filesystem.toolkit(tree)
    result = await call(tk, "grep", pattern=pattern)
    assert result.is_error
    text = result.get_text()
    assert "RE2" in text and why in text and repr(pattern) in text


async def test_grep_include_and_glob_still_match(tree: Path) -> None:
    (tree / "src").mkdir()
    (tree / "src" / "a.py").write_text("needle\n")
    (tree / "src" / "b.txt").write_text("needle\n")
    fs = FileSystem(tree)
    assert await fs.grep("needle", include="*.py") == "src/a.py:1: needle"
    assert await fs.glob("**/[ab].p?") == "src/a.py"
    assert await fs.glob("src/[!a]*") == "src/b.txt"
    assert await fs.grep("NEEDLE", ignore_case=True, include="*.txt") == "src/b.txt:1: needle"


# -- item 7: concurrent edits of one file lose nothing --------------------------------------


async def test_parallel_edits_of_one_file_all_apply(tree: Path) -> None:
    markers = [f"<m{i}>" for i in range(40)]
    (tree / "f.txt").write_text("\n".join(markers) + "\n")
    tk = filesystem.toolkit(tree)

    async def edit(i: int) -> None:
        result = await call(tk, "edit_file", path="f.txt", old_string=f"<m{i}>", new_string=f"E{i}")
        assert not result.is_error, result.get_text()

    async with anyio.create_task_group() as tg:
        for i in range(len(markers)):
            tg.start_soon(edit, i)
    text = (tree / "f.txt").read_text()
    assert text == "\n".join(f"E{i}" for i in range(len(markers))) + "\n"


def test_mutating_file_tools_are_sequential(tree: Path) -> None:
    tk = filesystem.toolkit(tree)
    assert tk.get_tool("write_file").sequential
    assert tk.get_tool("edit_file").sequential
    assert not tk.get_tool("read_file").sequential


# -- item 8: a directory swapped for a symlink mid-call never leads outside -------------------


_SWAPPER = """
import ctypes, os, sys
# renameat2(RENAME_EXCHANGE): d/ and the symlink trade places atomically, so d always exists.
libc = ctypes.CDLL(None, use_errno=True)
root, outside = sys.argv[1], sys.argv[2]
real, link = os.path.join(root, "d").encode(), os.path.join(root, "dlink").encode()
os.symlink(outside, link)
print("ready", flush=True)
while True:
    if libc.renameat2(-100, real, -100, link, 2) != 0:
        raise SystemExit(f"renameat2 failed: errno {ctypes.get_errno()}")
"""


async def test_symlink_swap_race_never_escapes(tree: Path) -> None:
    outside = tree.parent / "outside"
    (tree / "d").mkdir()
    (tree / "d" / "secret.txt").write_text("inside\n")
    fs = FileSystem(tree)
    # The attacker is another process (as it would be), swapping d/ for a symlink to outside/.
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(tree), str(outside)], stdout=subprocess.PIPE
    )
    assert swapper.stdout is not None and swapper.stdout.readline() == b"ready\n"
    leaks = tries = 0
    try:
        for i in range(1000):
            with contextlib.suppress(OSError):
                leaks += "TOP SECRET" in await fs.read_file("d/secret.txt")
                tries += 1
            with contextlib.suppress(OSError):
                await fs.write_file(f"d/new{i}.txt", "x")
            with contextlib.suppress(OSError):
                leaks += "TOP SECRET" in await fs.grep("TOP", path="d")
    finally:
        swapper.kill()
        swapper.wait()
        swapper.stdout.close()
    assert leaks == 0
    assert tries > 0  # the race did not make every read fail
    assert swapper.returncode == -9  # killed by us, still swapping (renameat2 worked)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


# -- item 14: read_file caps bytes, not only lines ------------------------------------------


def _bytes_read() -> int:
    with open("/proc/self/io") as fh:
        return int(next(line for line in fh if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/self/io (Linux)")
async def test_read_file_limit_one_does_not_read_a_huge_second_line(tree: Path) -> None:
    big = tree / "big.txt"
    with big.open("wb") as fh:  # sparse: 4 GiB on disk costs nothing
        fh.write(b"first line\n" + b"x" * 10_000)
        fh.truncate(4 << 30)
    fs = FileSystem(tree)
    before = _bytes_read()
    assert await fs.read_file("big.txt", limit=1) == (
        "first line\n[... more lines follow; call read_file with offset=2 to continue]"
    )
    assert _bytes_read() - before < 1 << 20
    # An offset far away stops at the scan budget instead of reading 4 GiB.
    before = _bytes_read()
    result = await FileSystem(tree, max_scan_bytes=8 << 20).read_file("big.txt", offset=3)
    assert result.startswith("[stopped after reading 8388608 bytes of big.txt")
    assert _bytes_read() - before < 32 << 20


# -- item 21: umask, names shown escaped, link targets outside not revealed -------------------


async def test_write_file_respects_umask(tree: Path) -> None:
    fs = FileSystem(tree)
    old = os.umask(0o022)
    try:
        await fs.write_file("a.txt", "x")
        os.umask(0o077)
        await fs.write_file("b.txt", "x")
        (tree / "c.txt").write_text("old")
        (tree / "c.txt").chmod(0o640)
        await fs.write_file("c.txt", "new")
        await fs.edit_file("c.txt", "new", "newer")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tree / "a.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tree / "b.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((tree / "c.txt").stat().st_mode) == 0o640
    assert not [p for p in tree.iterdir() if p.name.endswith(".tmp")]


_ODD_NAMES = {
    "two\nlines.txt": "two\\nlines.txt",
    "evil\u202etxt.exe": "evil\\u202etxt.exe",
    "esc\x1b[31mred": "esc\\x1b[31mred",
    "sep\u2028x": "sep\\u2028x",
}


async def test_listings_escape_control_and_bidi_characters(tree: Path) -> None:
    for name in _ODD_NAMES:
        (tree / name).write_text("needle\n")
    fs = FileSystem(tree)
    listing = await fs.list_directory()
    found = await fs.glob("*")
    grepped = await fs.grep("needle")
    for raw, shown in _ODD_NAMES.items():
        assert shown in listing and shown in found and f"{shown}:1: needle" in grepped
        assert raw not in listing + found + grepped
    assert len(listing.splitlines()) == 1 + 1 + len(_ODD_NAMES)  # header + notes.txt + names


async def test_symlink_targets_outside_the_root_are_not_revealed(tree: Path) -> None:
    outside = tree.parent / "outside"
    (tree / "out").symlink_to(outside / "secret.txt")
    (tree / "in").symlink_to(tree / "notes.txt")
    listing = await FileSystem(tree).list_directory()
    assert str(outside) not in listing and "secret" not in listing
    assert "out -> (outside the root, or broken)" in listing
    assert "in -> notes.txt" in listing


# -- item 1: undecodable names come out as valid Unicode, locally and over MCP ---------------


def _undecodable(root: Path) -> None:
    os.mkdir(os.fsencode(root) + b"/dir\xff")
    with open(os.fsencode(root) + b"/dir\xff/caf\xe9.txt", "wb") as fh:
        fh.write(b"needle\n")


async def test_undecodable_names_are_escaped(tree: Path) -> None:
    _undecodable(tree)
    fs = FileSystem(tree)
    outputs = [await fs.list_directory(), await fs.glob("**/*"), await fs.grep("needle")]
    for out in outputs:
        out.encode("utf-8")  # strict: no lone surrogate left
        json.dumps(out, ensure_ascii=False).encode("utf-8")
    assert "dir\\xff/" in outputs[0]
    assert "dir\\xff/caf\\xe9.txt" in outputs[1]
    assert "dir\\xff/caf\\xe9.txt:1: needle" in outputs[2]


async def test_served_filesystem_survives_undecodable_names(tree: Path) -> None:
    _undecodable(tree)
    # Positional root (item 26), as the reference filesystem server takes it.
    async with stdio_client("filesystem", str(tree)) as client:
        listing = await client.call_tool("list_directory", {"path": "."})
        found = await client.call_tool("glob", {"pattern": "**/*"})
        after = await client.call_tool("read_file", {"path": "notes.txt"})
    assert not listing.is_error and "dir\\xff/" in listing.get_text()
    assert not found.is_error and "dir\\xff/caf\\xe9.txt" in found.get_text()
    assert after.get_text() == "line 1\nline 2\n"  # the server is still alive


# -- item 26: the root positionally or with --root, never both ---------------------------------


def test_root_positional_and_flag_usage(tree: Path) -> None:
    both = subprocess.run(
        [sys.executable, "-m", "toolkits.filesystem", str(tree), "--root", str(tree.parent)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert both.returncode == 2 and "give the root directory once" in both.stderr
    neither = subprocess.run(
        [sys.executable, "-m", "toolkits.filesystem"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert neither.returncode == 2 and "root directory is required" in neither.stderr


async def test_root_flag_still_works(tree: Path) -> None:
    async with stdio_client("filesystem", "--root", str(tree)) as client:
        result = await client.call_tool("read_file", {"path": "notes.txt"})
    assert result.get_text() == "line 1\nline 2\n"

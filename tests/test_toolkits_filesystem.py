"""toolkits.filesystem: root confinement (../, absolute, symlinks), limits, binary, MCP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agentkit.mcp import HttpServer, MCPClient
from tests._toolkits_helpers import assert_same_over_mcp, call, stdio_client
from toolkits import filesystem
from toolkits.filesystem import FileSystem


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ (the toolkit's root) next to outside/ (a secret the model must never reach)."""
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import os\nprint('hello')\n")
    (root / "src" / "pkg" / "util.py").write_text("def util():\n    return 42\n")
    (root / "notes.txt").write_text("line 1\nline 2\nline 3\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    return root


@pytest.fixture
def fs(tree: Path) -> FileSystem:
    return FileSystem(tree)


# -- confinement ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "src/../../outside/secret.txt", "..", "/etc/passwd", "/"],
)
async def test_paths_outside_root_are_refused(fs: FileSystem, path: str) -> None:
    with pytest.raises(PermissionError, match="outside the allowed root"):
        await fs.read_file(path)
    with pytest.raises(PermissionError, match="outside the allowed root"):
        await fs.write_file(path, "pwned")
    with pytest.raises(PermissionError, match="outside the allowed root"):
        await fs.list_directory(path)


async def test_absolute_path_inside_root_is_allowed(fs: FileSystem, tree: Path) -> None:
    assert await fs.read_file(str(tree / "notes.txt")) == "line 1\nline 2\nline 3\n"
    assert "outside" not in await fs.list_directory(str(tree))


async def test_symlink_escapes_are_refused(fs: FileSystem, tree: Path) -> None:
    outside = tree.parent / "outside"
    (tree / "link_file").symlink_to(outside / "secret.txt")
    (tree / "link_dir").symlink_to(outside)
    for path in ("link_file", "link_dir/secret.txt"):
        with pytest.raises(PermissionError):
            await fs.read_file(path)
    with pytest.raises(PermissionError):
        await fs.write_file("link_dir/new.txt", "x")
    with pytest.raises(PermissionError):
        await fs.write_file("link_file", "overwrite the secret")
    with pytest.raises(PermissionError):
        await fs.edit_file("link_file", "TOP", "NO")
    with pytest.raises(PermissionError):
        await fs.list_directory("link_dir")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not (outside / "new.txt").exists()
    # Search tools neither follow the directory link nor read the file link.
    assert await fs.grep("TOP SEC") == "No matches for 'TOP SEC'"
    assert "secret" not in await fs.glob("**/*")
    with pytest.raises(PermissionError):
        await fs.grep("SECRET", path="link_dir")


async def test_symlink_inside_root_is_followed(fs: FileSystem, tree: Path) -> None:
    (tree / "alias.txt").symlink_to(tree / "notes.txt")
    assert (await fs.read_file("alias.txt")).startswith("line 1")
    assert "alias.txt -> " in await fs.list_directory()
    assert "alias.txt:2: line 2" in await fs.grep("line 2")


async def test_nul_byte_and_empty_path(fs: FileSystem) -> None:
    with pytest.raises(ValueError, match="NUL"):
        await fs.read_file("notes.txt\x00.png")
    assert "notes.txt" in await fs.list_directory("")


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        FileSystem(tmp_path / "missing")


# -- read_file ------------------------------------------------------------------------------


async def test_read_file_offset_and_limit(fs: FileSystem) -> None:
    assert await fs.read_file("notes.txt", offset=2, limit=1) == (
        "line 2\n[... more lines follow; call read_file with offset=3 to continue]"
    )
    assert await fs.read_file("notes.txt", offset=3) == "line 3\n"
    assert "past the end" in await fs.read_file("notes.txt", offset=10)
    with pytest.raises(ValueError, match="offset"):
        await fs.read_file("notes.txt", offset=0)


async def test_read_file_size_limit_pages(tree: Path) -> None:
    (tree / "big.txt").write_text("".join(f"{i:09d}\n" for i in range(10_000)))
    fs = FileSystem(tree, max_read_bytes=1000)
    first = await fs.read_file("big.txt", limit=100_000)
    assert first.count("\n") == 100  # 100 lines of 10 bytes fit in 1000 bytes
    assert "offset=101" in first
    second = await fs.read_file("big.txt", offset=101, limit=100_000)
    assert second.startswith("000000100\n")


async def test_read_file_always_makes_progress(tree: Path) -> None:
    (tree / "wide.txt").write_text("a" * 500 + "\n" + "b" * 500 + "\n")
    fs = FileSystem(tree, max_read_bytes=100)  # less than one line
    first = await fs.read_file("wide.txt")
    assert first.startswith("a" * 500 + "\n")
    assert "offset=2" in first
    assert (await fs.read_file("wide.txt", offset=2)) == "b" * 500 + "\n"


async def test_read_file_huge_single_line_is_bounded(tree: Path) -> None:
    (tree / "minified.js").write_bytes(b"x" * 20_000_000 + b"\nsecond line\n")
    fs = FileSystem(tree, max_line_chars=100)
    text = await fs.read_file("minified.js")
    assert text.startswith("x" * 100 + " [... line truncated]\n")
    assert text.endswith("second line\n")
    assert len(text) < 300


async def test_read_file_binary_and_non_utf8(fs: FileSystem, tree: Path) -> None:
    (tree / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
    with pytest.raises(ValueError, match="binary file"):
        await fs.read_file("image.png")
    (tree / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    assert await fs.read_file("latin1.txt") == "caf\ufffd\n"
    (tree / "empty.txt").write_bytes(b"")
    assert "empty" in await fs.read_file("empty.txt")


async def test_read_file_errors(fs: FileSystem) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.txt does not exist"):
        await fs.read_file("missing.txt")
    with pytest.raises(IsADirectoryError, match="list_directory"):
        await fs.read_file("src")


async def test_fifo_does_not_block(fs: FileSystem, tree: Path) -> None:
    os.mkfifo(tree / "pipe")
    with anyio.fail_after(5):
        with pytest.raises(ValueError, match="not a regular file"):
            await fs.read_file("pipe")
        with pytest.raises(ValueError, match="not a regular file"):
            await fs.edit_file("pipe", "a", "b")
        assert "No matches" in await fs.grep("x")


# -- write_file / edit_file -----------------------------------------------------------------


async def test_write_file_creates_and_overwrites(fs: FileSystem, tree: Path) -> None:
    assert await fs.write_file("new/dir/a.txt", "héllo\n") == "Created new/dir/a.txt (7 bytes)"
    assert (tree / "new/dir/a.txt").read_text() == "héllo\n"
    (tree / "script.sh").write_text("old")
    (tree / "script.sh").chmod(0o755)
    assert (await fs.write_file("script.sh", "new")).startswith("Overwrote")
    assert (tree / "script.sh").stat().st_mode & 0o777 == 0o755  # mode kept
    assert not [p for p in tree.iterdir() if p.name.endswith(".tmp")]


async def test_write_file_limits(tree: Path) -> None:
    fs = FileSystem(tree, max_write_bytes=10)
    with pytest.raises(ValueError, match="limit is 10 bytes"):
        await fs.write_file("a.txt", "x" * 11)
    with pytest.raises(IsADirectoryError):
        await fs.write_file("src", "x")
    with pytest.raises(IsADirectoryError):
        await fs.write_file(".", "x")


async def test_edit_file(fs: FileSystem, tree: Path) -> None:
    assert await fs.edit_file("src/main.py", "'hello'", "'bye'") == (
        "Replaced 1 occurrence(s) in src/main.py"
    )
    assert (tree / "src/main.py").read_text() == "import os\nprint('bye')\n"
    with pytest.raises(ValueError, match="not found"):
        await fs.edit_file("src/main.py", "'hello'", "x")
    with pytest.raises(ValueError, match="occurs 3 times"):
        await fs.edit_file("notes.txt", "line", "row")
    assert await fs.edit_file("notes.txt", "line", "row", replace_all=True) == (
        "Replaced 3 occurrence(s) in notes.txt"
    )
    with pytest.raises(ValueError, match="empty"):
        await fs.edit_file("notes.txt", "", "x")
    with pytest.raises(ValueError, match="identical"):
        await fs.edit_file("notes.txt", "row", "row")


async def test_edit_file_refuses_non_utf8(fs: FileSystem, tree: Path) -> None:
    (tree / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not valid UTF-8"):
        await fs.edit_file("latin1.txt", "caf", "cof")
    assert (tree / "latin1.txt").read_bytes() == "café\n".encode("latin-1")


# -- list_directory / glob / grep -----------------------------------------------------------


async def test_list_directory(fs: FileSystem, tree: Path) -> None:
    listing = await fs.list_directory()
    assert listing.splitlines() == ["./ (2 entries)", "notes.txt  (21 bytes)", "src/"]
    for i in range(5):
        (tree / f"f{i}").touch()
    small = FileSystem(tree, max_entries=3)
    assert "[... 4 more entries not shown]" in await small.list_directory()
    with pytest.raises(NotADirectoryError):
        await fs.list_directory("notes.txt")


async def test_glob(fs: FileSystem, tree: Path) -> None:
    assert (await fs.glob("**/*.py")).splitlines() == ["src/main.py", "src/pkg/util.py"]
    assert (await fs.glob("*.py", path="src")).splitlines() == ["src/main.py"]
    assert (await fs.glob("src/*/u?il.[a-z]y")).splitlines() == ["src/pkg/util.py"]
    assert "No files match" in await fs.glob("*.rs")
    with pytest.raises(PermissionError):
        await fs.glob("../outside/*")
    with pytest.raises(PermissionError):
        await fs.glob("/etc/*")
    (tree / ".git").mkdir()
    (tree / ".git" / "config.py").write_text("")
    assert ".git" not in await fs.glob("**/*.py")


async def test_grep(fs: FileSystem, tree: Path) -> None:
    assert await fs.grep(r"return \d+") == "src/pkg/util.py:2:     return 42"
    assert await fs.grep("IMPORT", ignore_case=True, include="*.py") == "src/main.py:1: import os"
    assert await fs.grep("line", path="notes.txt", max_matches=2) == (
        "notes.txt:1: line 1\nnotes.txt:2: line 2\n[stopped at 2 matches]"
    )
    assert "No matches" in await fs.grep("nothing here")
    with pytest.raises(ValueError, match="invalid regular expression"):
        await fs.grep("(unclosed")
    (tree / "blob.bin").write_bytes(b"line\x00binary")
    assert "blob.bin" not in await fs.grep("line")


async def test_grep_limits_matches_on_huge_input(tree: Path) -> None:
    (tree / "huge.txt").write_text("match\n" * 100_000)
    fs = FileSystem(tree, max_matches=50)
    result = await fs.grep("match", max_matches=10_000)
    assert result.count("\n") == 50
    assert result.endswith("[stopped at 50 matches]")


# -- Toolkit registration and MCP -----------------------------------------------------------


async def test_toolkit_registration(tree: Path) -> None:
    tk = filesystem.toolkit(tree)
    assert set(tk.tools) == {
        "read_file",
        "write_file",
        "edit_file",
        "list_directory",
        "glob",
        "grep",
    }
    assert not any(t.requires_approval for t in tk.tools.values())
    ro = filesystem.toolkit(tree, read_only=True)
    assert set(ro.tools) == {"read_file", "list_directory", "glob", "grep"}
    approving = filesystem.toolkit(tree, approve_writes=True)
    assert approving.tools["write_file"].requires_approval
    assert not approving.tools["read_file"].requires_approval
    result = await call(tk, "read_file", path="../outside/secret.txt")
    assert result.is_error
    assert "outside the allowed root" in result.get_text()
    assert "TOP SECRET" not in result.get_text()
    result = await call(tk, "read_file", path="notes.txt", offset="two")
    assert result.is_error  # schema validation by the Toolkit


def test_factories_can_share_one_toolkit(tree: Path) -> None:
    from toolkits import python, shell, web

    tk = filesystem.toolkit(tree, read_only=True)
    assert shell.toolkit(tree, into=tk) is tk
    assert python.toolkit(into=tk, group="code") is tk
    assert web.toolkit(into=tk) is tk
    names = {d.name for d in tk.get_tool_definitions()}
    assert names == {"read_file", "list_directory", "glob", "grep", "run_command", "fetch_url"}
    assert tk.tools["run_python"].group == "code"  # a new group, inactive until activated
    tk.update_tool_groups(["code"], active=True)
    assert "run_python" in {d.name for d in tk.get_tool_definitions()}


async def test_same_results_locally_and_over_mcp_stdio(tree: Path) -> None:
    local = filesystem.toolkit(tree)
    (tree / "link").symlink_to(tree.parent / "outside")
    calls = [
        ("read_file", {"path": "notes.txt", "offset": 2}),
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("read_file", {"path": str(tree.parent / "outside" / "secret.txt")}),
        ("list_directory", {"path": "src"}),
        ("glob", {"pattern": "**/*.py"}),
        ("grep", {"pattern": "def "}),
        ("edit_file", {"path": "notes.txt", "old_string": "line", "new_string": "x"}),
    ]
    async with stdio_client("filesystem", "--root", str(tree)) as client:
        await assert_same_over_mcp(local, client, calls)
        written = await client.call_tool("write_file", {"path": "remote.txt", "content": "hi"})
        assert not written.is_error
        assert (tree / "remote.txt").read_text() == "hi"
    assert os.listdir(tree.parent / "outside") == ["secret.txt"]


async def test_read_only_server_has_no_write_tools(tree: Path) -> None:
    async with stdio_client("filesystem", "--root", str(tree), "--read-only") as client:
        names = {t.name for t in await client.list_tools()}
        assert names == {"read_file", "list_directory", "glob", "grep"}
        result = await client.call_tool("write_file", {"path": "x.txt", "content": "x"})
        assert result.is_error
    assert not (tree / "x.txt").exists()


def test_command_line_rejects_a_bad_root(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolkits.filesystem", "--root", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "is not a directory" in out.stderr


async def test_served_over_streamable_http(tree: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["--root", str(tree), "--transport", "streamable_http", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkits.filesystem", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        async with MCPClient("fs", HttpServer(url), timeout=30) as client:
            result = await client.call_tool("read_file", {"path": "notes.txt", "limit": 1})
            assert result.get_text().startswith("line 1\n")
            refused = await client.call_tool("read_file", {"path": "../outside/secret.txt"})
            assert refused.is_error
    finally:
        proc.terminate()
        proc.wait(10)

"""Fuzz (issue 13, item 1): whatever bytes or code points go in, tool output is valid Unicode.

File names and contents are arbitrary bytes (not UTF-8, control and bidi characters
included), tool arguments arbitrary code points (lone surrogates included). Every result of
the filesystem and shell toolkits must encode as UTF-8 strictly and serialize as JSON, so it
can enter memory, a model request and a session file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.tools import Toolkit
from tests._toolkits_helpers import call
from toolkits import filesystem, shell

_NAMES = st.binary(min_size=1, max_size=24).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")
)
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


def _assert_clean(toolkit: Toolkit, name: str, **arguments: Any) -> str:
    result = anyio.run(_call, toolkit, name, arguments)
    text = result.get_text()
    text.encode("utf-8")  # strict: a lone surrogate raises here
    json.dumps([result.content, result.metadata], ensure_ascii=False).encode("utf-8")
    return text


async def _call(toolkit: Toolkit, name: str, arguments: dict[str, Any]) -> Any:
    return await call(toolkit, name, **arguments)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(_NAMES, min_size=1, max_size=4, unique=True), content=st.binary(max_size=300))
def test_filesystem_output_is_valid_unicode(names: list[bytes], content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = os.fsencode(tmp)
        os.mkdir(root + b"/sub\xff")
        for name in names:
            with open(root + b"/sub\xff/" + name, "wb") as fh:
                fh.write(content)
        tk = filesystem.toolkit(tmp)
        _assert_clean(tk, "list_directory", path="sub\udcff")
        _assert_clean(tk, "list_directory", path=".")
        _assert_clean(tk, "glob", pattern="**/*")
        _assert_clean(tk, "grep", pattern=".")
        for name in names:
            _assert_clean(tk, "read_file", path="sub\udcff/" + os.fsdecode(name))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=_TEXT, content=_TEXT, pattern=_TEXT)
def test_filesystem_arguments_with_any_code_points(path: str, content: str, pattern: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "a.txt").write_text("hello\n")
        tk = filesystem.toolkit(tmp)
        _assert_clean(tk, "read_file", path=path or "a.txt")
        _assert_clean(tk, "write_file", path=path or "b.txt", content=content)
        _assert_clean(tk, "edit_file", path="a.txt", old_string="hello", new_string=content)
        _assert_clean(tk, "grep", pattern=pattern or "x")
        _assert_clean(tk, "glob", pattern=pattern or "*")
        _assert_clean(tk, "list_directory", path=path or ".")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_NAMES, content=st.binary(max_size=300), argument=_TEXT)
def test_shell_output_is_valid_unicode(name: bytes, content: bytes, argument: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.fsencode(tmp) + b"/" + name, "wb") as fh:
            fh.write(content)
        tk = shell.toolkit(tmp, requires_approval=False)
        _assert_clean(tk, "run_command", command=["cat", os.fsdecode(name)])
        _assert_clean(tk, "run_command", command=["ls", "-b", "."])
        _assert_clean(tk, "run_command", command=["ls", "."])  # raw names on stdout
        _assert_clean(tk, "run_command", command=[sys.executable, "-c", "pass", argument])
        _assert_clean(tk, "run_command", command=argument or "true")

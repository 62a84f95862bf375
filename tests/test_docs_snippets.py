"""Every ```python snippet of README.md and docs/*.md type-checks with ``mypy --strict``.

The idioms the docs teach must type-check in user code. Snippets are written to a temporary
package, one module each, and checked by ONE mypy run together with a deliberately wrong
module (the generic agent's ``deps_type`` errors): fast, and it reuses the mypy cache that the
``mypy`` step of ``scripts/test`` leaves. A snippet that is deliberately not valid on its own
(a fragment, a shell transcript) is marked with ``<!-- no-typecheck -->`` on the line right
before its fence; use it sparingly.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"(?P<mark><!-- no-typecheck -->\n)?```python\n(?P<code>.*?)```", re.S)
# A snippet shows one idea, not a whole script: the names it uses without defining them
# (an agent, a toolkit, a model...) are declared here with their types, and a snippet
# with top-level ``await``/``async with``/``async for`` runs inside an async function.
PRELUDE = """\
# ruff: noqa
from __future__ import annotations
import json, os
from collections.abc import AsyncIterator, Callable
from typing import Any
import anyio
from pydantic import BaseModel
from agentkit import *
from agentkit.events import *
from agentkit.mcp import HttpServer, MCPClient, StdioServer
from agentkit.models import AnthropicChatModel, ChatModel, ChatResponse, OpenAIChatModel
from agentkit.models import RetryPolicy, from_string
from agentkit.session import JSONSession

agent: ReActAgent
other: ReActAgent[Any, Any]
toolkit: Toolkit
model: ChatModel
messages: list[Msg]
client: MCPClient
session: JSONSession
user: UserAgent
writer: ReActAgent[Any, Any]
editor: ReActAgent[Any, Any]
proofreader: ReActAgent[Any, Any]
researcher: ReActAgent[Any, Any]
security_reviewer: ReActAgent[Any, Any]
perf_reviewer: ReActAgent[Any, Any]
style_reviewer: ReActAgent[Any, Any]
alice: ReActAgent[Any, Any]
bob: ReActAgent[Any, Any]
judge: ReActAgent[Any, Any]
boss: ReActAgent[Any, Any]
research_tools: Toolkit
diff_msg: Msg
chat_id: str
ticket_id: str
call_id: str
fetch_page: Callable[..., Any]
def build_agent() -> ReActAgent[Any, Any]:
    raise NotImplementedError
"""
TOP_LEVEL_ASYNC = re.compile(r"^(await |async with |async for )", re.M)


def _module(code: str) -> str:
    if not TOP_LEVEL_ASYNC.search(code):
        return PRELUDE + code
    body = "".join(f"    {line}" if line.strip() else line for line in code.splitlines(True))
    return PRELUDE + "\n\nasync def _snippet() -> None:\n" + body


def snippets() -> list[tuple[str, str]]:
    """``(name, code)`` for every type-checked snippet."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for i, match in enumerate(FENCE.finditer(text)):
            if match.group("mark"):
                continue
            found.append((f"{page.stem.lower()}_{i}", match.group("code")))
    return found


def test_snippets_are_found() -> None:
    names = [name for name, _ in snippets()]
    assert len(names) >= 40  # a broken pattern would silently check nothing
    assert any(name.startswith("readme_") for name in names)


# A deliberately wrong module (checked in the same mypy run as the snippets): each line
# mypy must reject ends with a ``# line X`` marker.
WRONG_DEPS = PRELUDE + (
    "from dataclasses import dataclass\n"
    "@dataclass\n"
    "class Deps:\n"
    "    user_id: int\n"
    "class Ticket(BaseModel):\n"
    "    id: int\n"
    "typed = ReActAgent('a', 'sys', model, deps_type=Deps, output_type=Ticket)\n"
    "async def ok() -> Ticket:\n"
    "    result = await typed.run('q', deps=Deps(user_id=7))\n"
    "    return result.output\n"
    "async def wrong() -> None:\n"
    "    await typed.run('q', deps='7')  # line A\n"
    "async def wrong_output() -> str:\n"
    "    result = await typed.run('q', deps=Deps(user_id=7))\n"
    "    return result.output  # line B\n"
    "async def no_deps() -> None:\n"
    "    await agent.run('q', deps=Deps(user_id=7))  # line C\n"
)
# Snippets may show a bare top-level ``x = await ...`` and a ``# type: ignore`` that is not
# needed in isolation. The codes are switched off per file (inline config), not on the command
# line: a command-line ``--disable-error-code`` changes the options of every module, so mypy's
# cache of agentkit and its dependencies (written by the ``mypy`` run of ``scripts/test``)
# would not match and everything would be checked again from scratch.
SNIPPET_HEADER = '# mypy: disable-error-code="top-level-await, unused-ignore"\n'


# ``path:line: error: ...`` in mypy's output.
ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: .*$", re.M)


@pytest.mark.timeout(300)
def test_docs_snippets_type_check_with_mypy_strict(tmp_path: pathlib.Path) -> None:
    """Every snippet type-checks, and the wrong-deps module fails exactly where it should.

    ONE mypy run checks both (a second run would start mypy and load its cache again): the
    generic agent, ``ReActAgent(..., deps_type=D)``, rejects ``deps=`` of another type, an
    ``output_type`` other than the declared return type, and ``deps=`` on an agent without
    ``deps_type`` (the ``# line X`` markers of ``WRONG_DEPS``).
    """
    package = tmp_path / "doc_snippets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, code in snippets():
        (package / f"s_{name}.py").write_text(SNIPPET_HEADER + _module(code))
    (package / "wrong_deps.py").write_text(WRONG_DEPS)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--hide-error-context",
            str(package),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    # Paths relative to the package. Not by replacing ``str(package)``: an error mypy replays
    # from its cache can name the file where an identical module was checked before.
    output = re.sub(r"^\S*/doc_snippets/", "", result.stdout, flags=re.M)
    # Exit status 1 is the wrong-deps module's expected errors; 2 is mypy failing to run.
    assert result.returncode in (0, 1), f"mypy failed:\n{output}{result.stderr}"
    errors = list(ERROR.finditer(output))
    wrong_deps = [e for e in errors if e["path"] == "wrong_deps.py"]
    snippet_errors = [e[0] for e in errors if e["path"] != "wrong_deps.py"]
    assert not snippet_errors, "doc snippets fail mypy --strict:\n" + "\n".join(snippet_errors)
    lines = WRONG_DEPS.splitlines()
    rejected = {lines[int(e["line"]) - 1].rsplit("# ", 1)[-1] for e in wrong_deps}
    assert rejected == {"line A", "line B", "line C"}, f"wrong_deps.py:\n{output}"

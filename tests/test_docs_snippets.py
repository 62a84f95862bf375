"""Every ```python snippet of README.md and docs/*.md type-checks with ``mypy --strict``.

The idioms the docs teach must type-check in user code. Snippets are written to a temporary
package, one module each, and checked by ONE mypy run (fast, and it reuses the repository's
mypy cache). A snippet that is deliberately not valid on its own (a fragment, a shell
transcript) is marked with ``<!-- no-typecheck -->`` on the line right before its fence;
use it sparingly.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import subprocess
import sys

import pytest

# One mypy run serves the module's tests: keep them on one xdist worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("docs_mypy")

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


# The deliberately wrong module of ``test_a_wrong_deps_type_is_a_mypy_error``: each line
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


@dataclasses.dataclass(frozen=True)
class MypyRun:
    """One ``mypy --strict`` run over the snippet package: its exit status and output."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory: pytest.TempPathFactory) -> MypyRun:
    """ONE mypy run checks every doc snippet and the wrong-deps module (one start, one cache).

    The module's tests are one ``xdist_group``, so under ``--dist loadgroup`` they share this
    run on one worker.
    """
    package = tmp_path_factory.mktemp("mypy") / "doc_snippets"
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
    stdout = result.stdout.replace(str(package) + "/", "")
    return MypyRun(result.returncode, stdout, result.stderr)


@pytest.mark.timeout(300)
def test_docs_snippets_type_check_with_mypy_strict(mypy_run: MypyRun) -> None:
    # Exit status 1 is the wrong-deps module's expected errors; 2 is mypy failing to run.
    assert mypy_run.returncode in (0, 1), f"mypy failed:\n{mypy_run.stdout}{mypy_run.stderr}"
    errors = [
        line
        for line in mypy_run.stdout.splitlines()
        if ": error:" in line and not line.startswith("wrong_deps.py:")
    ]
    assert not errors, "doc snippets fail mypy --strict:\n" + "\n".join(errors)


@pytest.mark.timeout(300)
def test_a_wrong_deps_type_is_a_mypy_error(mypy_run: MypyRun) -> None:
    """The generic agent: ``ReActAgent(..., deps_type=D)`` rejects ``deps=`` of another type."""
    lines = WRONG_DEPS.splitlines()
    errors = {
        lines[int(m.group(1)) - 1].rsplit("# ", 1)[-1]
        for m in re.finditer(r"^wrong_deps.py:(\d+): error", mypy_run.stdout, re.M)
    }
    assert errors == {"line A", "line B", "line C"}, mypy_run.stdout

"""Control sequences from outside are never printed raw (issue 13, item 17).

A model answer, a tool's output or an MCP server's text may carry terminal escape
sequences: OSC 52 writes the clipboard, CSI moves the cursor over what was printed (hiding
an approval prompt's real arguments), a lone CR overwrites a line. Every printer shows them
as visible text instead.
"""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys

import pytest

from agentkit._text import terminal_safe
from agentkit.agent._printer import ConsolePrinter
from agentkit.cli._console import EventRenderer
from agentkit.events import (
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)
from agentkit.tools import ToolResponse

ROOT = pathlib.Path(__file__).resolve().parent.parent
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # sets the clipboard to "rm -rf ~"
HOSTILE = f"ok{OSC52}\x1b[2K\x1b[1A\rfake line\x9b31m \u202eevil"
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


def _events() -> list[object]:
    call = {"type": "tool_use", "id": "c1", "name": "t", "input": {"q": HOSTILE}}
    result = {"type": "tool_result", "id": "c1", "name": "t", "output": HOSTILE}
    return [
        TextDelta(HOSTILE),
        ThinkingDelta(HOSTILE),
        ToolCallStarted(call),  # type: ignore[arg-type]
        ToolProgress("c1", ToolResponse.text(HOSTILE, is_last=False)),
        ToolResult("c1", result),  # type: ignore[arg-type]
    ]


def _assert_neutral(text: str) -> None:
    for control in CONTROLS:
        assert control not in text
    assert "\rfake" not in text
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in text  # shown, not executed


def test_terminal_safe_keeps_text_and_layout() -> None:
    assert terminal_safe("plain text\nnext\tcol 😀 é") == "plain text\nnext\tcol 😀 é"
    assert terminal_safe("a\r\nb") == "a\r\nb"
    assert terminal_safe("a\rb") == "a\\x0db"
    _assert_neutral(terminal_safe(HOSTILE))


@pytest.mark.parametrize("printer", [ConsolePrinter, EventRenderer])
def test_printers_neutralize_control_sequences(printer: type) -> None:
    out = io.StringIO()
    render = printer("agent", out)
    for event in _events():
        render(event)
    _assert_neutral(out.getvalue())


def test_mcp_call_neutralizes_server_text() -> None:
    server = f"{sys.executable} {ROOT / 'tests/mcp_servers/py_server.py'}"
    args = json.dumps({"text": HOSTILE})
    out = subprocess.run(
        [sys.executable, "-m", "agentkit", "mcp", "call", "echo", args, "--stdio", server],
        capture_output=True,
        text=True,
        timeout=45,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    _assert_neutral(out.stdout)
    as_json = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "mcp",
            "call",
            "echo",
            args,
            "--json",
            "--stdio",
            server,
        ],
        capture_output=True,
        text=True,
        timeout=45,
        cwd=ROOT,
    )
    assert as_json.returncode == 0, as_json.stderr
    for control in CONTROLS:
        assert control not in as_json.stdout
    assert json.loads(as_json.stdout)["content"][0]["text"] == HOSTILE  # the data is intact

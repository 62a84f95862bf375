"""Console output of a reply, fed by the same event objects as ``agent.stream()``."""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from typing import TextIO

from agentkit._text import progress_counter, terminal_safe
from agentkit.events import (
    AgentEvent,
    ApprovalRequested,
    Interrupted,
    ReplyFinished,
    ReplyStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)

__all__ = ["ConsolePrinter", "printed_on_console"]

_MAX_SHOWN = 300

# Ids of the replies ConsolePrinters streamed to this process's stdout, newest last (bounded),
# so that a UserAgent showing messages on that same console does not print one again.
_PRINTED: OrderedDict[str, None] = OrderedDict()
_PRINTED_MAX = 256


def printed_on_console(msg_id: str) -> bool:
    """Whether a ``ConsolePrinter`` already streamed the reply ``msg_id`` to stdout."""
    return msg_id in _PRINTED


def _remember_printed(msg_id: str) -> None:
    _PRINTED[msg_id] = None
    _PRINTED.move_to_end(msg_id)
    while len(_PRINTED) > _PRINTED_MAX:
        _PRINTED.popitem(last=False)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "…"


def _progress_text(event: ToolProgress) -> str:
    """A progress chunk on one line: its text, else its ``progress/total`` counter."""
    return " ".join(event.chunk.get_text().split()) or progress_counter(event.chunk.metadata)


class ConsolePrinter:
    """Writes an agent's events as readable text.

    Args:
        name: The agent's name (printed before its answer).
        out: Where to write (``sys.stdout`` by default, looked up at each write).
    """

    __slots__ = ("_at_line_start", "_mode", "_tools", "name", "out")

    def __init__(self, name: str, out: TextIO | None = None) -> None:
        self.name = name
        self.out = out
        self._mode = ""  # "text" / "thinking" while streaming one of them
        self._at_line_start = True
        self._tools: dict[str, str] = {}  # call id -> tool name, for progress lines

    def _write(self, text: str) -> None:
        out = self.out or sys.stdout
        out.write(terminal_safe(text))  # model and tool text may carry escape sequences
        if text:
            self._at_line_start = text.endswith("\n")
        out.flush()

    def _line(self, text: str) -> None:
        self._mode = ""
        self._write(("" if self._at_line_start else "\n") + text + "\n")

    def __call__(self, event: AgentEvent) -> None:
        """Print one event."""
        if isinstance(event, TextDelta):
            if self._mode != "text":
                self._write(("" if self._at_line_start else "\n") + f"{self.name}: ")
                self._mode = "text"
            self._write(event.delta)
        elif isinstance(event, ThinkingDelta):
            if self._mode != "thinking":
                self._write(("" if self._at_line_start else "\n") + f"{self.name} (thinking): ")
                self._mode = "thinking"
            self._write(event.delta)
        elif isinstance(event, ToolCallStarted):
            call = event.tool_call
            args = _short(json.dumps(call["input"], ensure_ascii=False))
            self._tools[call["id"]] = call["name"]
            self._line(f"-> {call['name']}({args})")
        elif isinstance(event, ToolProgress):
            shown = _progress_text(event)
            if shown:
                name = self._tools.get(event.tool_call_id, "tool")
                self._line(f"   {name}: {_short(shown)}")
        elif isinstance(event, ToolResult):
            block = event.result
            output = block["output"]
            shown = output if isinstance(output, str) else f"<{len(output)} blocks>"
            mark = "error" if block.get("is_error") else "ok"
            self._line(f"<- {block['name']} [{mark}]: {_short(shown)}")
        elif isinstance(event, ApprovalRequested):
            names = ", ".join(f"{c['name']} ({c['id']})" for c in event.calls)
            self._line(f"[approval required] {names}")
        elif isinstance(event, Interrupted):
            self._line("[interrupted]")
        elif isinstance(event, ReplyFinished):
            if not self._at_line_start:
                self._write("\n")
            self._mode = ""
            self._tools.clear()
            if self.out is None:
                _remember_printed(event.reply.id)
        elif isinstance(event, ReplyStarted):
            self._mode = ""

"""The tools and agents of the saved-state corpus, shared by its generator and its test.

A state names its tools only by name, so the test rebuilds agents with the same tool names
and signatures as the generator used: that is what a user restarting their program does.
Keep these definitions as they are: the corpus was written with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from agentkit import Capability, ReActAgent
from agentkit.messages import Msg
from agentkit.testing import RequestInfo, ScriptItem, text, tool_use
from agentkit.tools import Toolkit, ToolResponse

# The smallest valid PNG (1x1, transparent), as stored in image blocks.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


class Trip(BaseModel):
    """The structured output of the corpus's structured runs."""

    city: str
    days: int


class Calls:
    """What the corpus tools were called with, and an event the blocking tool sets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.waiting = anyio.Event()


def corpus_toolkit(calls: Calls | None = None) -> Toolkit:
    """The corpus's tools: plain, failing, image-returning, approval-gated, blocking, grouped."""
    record = calls or Calls()
    toolkit = Toolkit()

    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        record.calls.append(("add", {"a": a, "b": b}))
        return a + b

    def fail(reason: str) -> str:
        """Always fails.

        Args:
            reason: Why.
        """
        record.calls.append(("fail", {"reason": reason}))
        raise RuntimeError(f"failed on purpose: {reason}")

    def snapshot(label: str) -> ToolResponse:
        """Take a picture.

        Args:
            label: What to photograph.
        """
        record.calls.append(("snapshot", {"label": label}))
        return ToolResponse(
            content=[
                {"type": "text", "text": f"a picture of {label}"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1},
                },
            ]
        )

    def delete_files(pattern: str) -> str:
        """Delete files matching a pattern (needs approval).

        Args:
            pattern: A glob.
        """
        record.calls.append(("delete_files", {"pattern": pattern}))
        return f"deleted files matching {pattern}"

    async def wait_here(label: str) -> str:
        """Block until interrupted.

        Args:
            label: A label.
        """
        record.calls.append(("wait_here", {"label": label}))
        record.waiting.set()
        await anyio.sleep_forever()
        return "never"

    def admin_reset(target: str) -> str:
        """Reset something (in the "admin" group).

        Args:
            target: What to reset.
        """
        record.calls.append(("admin_reset", {"target": target}))
        return f"reset {target}"

    toolkit.register_tool_function(add)
    toolkit.register_tool_function(fail)
    toolkit.register_tool_function(snapshot)
    toolkit.register_tool_function(delete_files, requires_approval=True)
    toolkit.register_tool_function(wait_here)
    toolkit.create_tool_group("admin", "Administration tools.")
    toolkit.register_tool_function(admin_reset, group="admin")
    return toolkit


def corpus_agent(
    model: Any,
    calls: Calls | None = None,
    name: str = "bot",
    capabilities: Sequence[Capability[Any]] = (),
) -> ReActAgent:
    """An agent with the corpus toolkit (the instructions are configuration, not state)."""
    return ReActAgent(
        name, "You help.", model, corpus_toolkit(calls), print_hint=False, capabilities=capabilities
    )


def served_model_answer(messages: list[Msg], info: RequestInfo) -> ScriptItem:
    """The served agent's model: ``add A B`` / ``delete P`` call a tool, then it answers."""
    last = messages[-1]
    if last.role == "user" and isinstance(last.content, list):
        results = [b for b in last.content if b["type"] == "tool_result"]
        if results:
            return f"Done: {results[-1].get('output')}"
    words = last.get_text().split()
    call_id = f"call_{len(messages)}"
    if words[:1] == ["add"] and len(words) == 3:
        return [text("Adding."), tool_use("add", call_id, a=int(words[1]), b=int(words[2]))]
    if words[:1] == ["delete"] and len(words) == 2:
        return [
            text("Deleting needs approval."),
            tool_use("delete_files", call_id, pattern=words[1]),
        ]
    return f"You said: {last.get_text()}"

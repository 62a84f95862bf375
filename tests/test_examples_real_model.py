"""The examples switch to a real model from the environment (here: a local mock provider).

A mock OpenAI/Anthropic server on 127.0.0.1 (``benchmarks.mock_server``) stands in for the
provider, so the "API key set" code path of the examples and of ``agentkit chat`` runs
offline: the real SDK adapters, streaming, tool calls, no scripted model.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
mock_server = pytest.importorskip("benchmarks.mock_server")


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with mock_server.MockServerProcess() as server:
        yield server.url


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.pop("AGENTKIT_MODEL", None)
    env.update(extra)
    return env


@pytest.mark.parametrize("example", ["quickstart", "parallel_tools", "interrupt_resume"])
def test_example_uses_the_model_from_the_environment(provider: str, example: str) -> None:
    env = _env(
        AGENTKIT_MODEL="openai:parallel-3",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=provider + "/v1",
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{example}.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    if example != "interrupt_resume":
        assert "openai:parallel-3" in out.stdout
    assert "scripted" not in out.stdout


def test_openai_key_alone_selects_openai(provider: str) -> None:
    env = _env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=provider + "/v1")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    # The mock answers any model name; the default one is reported.
    assert out.returncode == 0, out.stdout + out.stderr
    assert "model: openai:gpt-4.1-mini" in out.stdout


def test_chat_with_an_anthropic_model(provider: str) -> None:
    env = _env(ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=provider)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "chat",
            "--model",
            "anthropic:parallel-2",
            "--demo-tools",
        ],
        input="weather in Paris\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "model: anthropic:parallel-2" in out.stdout
    assert out.stdout.count("-> get_weather(") == 2  # two parallel calls from the provider

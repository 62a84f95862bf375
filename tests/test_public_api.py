"""The public API contract (DESIGN.md section 3): names, __all__ order, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys

import agentkit

# Grows with each public capability; a missing name fails the test.
EXPECTED = {
    "AgentkitError",
    "AudioBlock",
    "ImageBlock",
    "Msg",
    "TextBlock",
    "ThinkingBlock",
    "ToolResponse",
    "ToolResultBlock",
    "ToolUseBlock",
    "ReActAgent",
    "Toolkit",
    "ToolContext",
    "UserAgent",
    "MsgHub",
    "sequential_pipeline",
    "fanout_pipeline",
    "InMemoryMemory",
}


def test_public_names_are_exported() -> None:
    missing = EXPECTED - set(agentkit.__all__)
    assert not missing, f"missing from agentkit.__all__: {sorted(missing)}"
    for name in agentkit.__all__:
        assert hasattr(agentkit, name), name


def test_all_is_sorted() -> None:
    assert list(agentkit.__all__) == sorted(agentkit.__all__)


def test_models_and_testing_names() -> None:
    from agentkit.mcp import HttpServer, MCPClient, StdioServer  # noqa: F401
    from agentkit.models import (  # noqa: F401
        AnthropicChatModel,
        ChatModel,
        ChatResponse,
        ChatUsage,
        OpenAIChatModel,
        from_string,
    )
    from agentkit.session import JSONSession, RedisSession, SQLiteSession  # noqa: F401
    from agentkit.testing import FunctionModel, ScriptedModel  # noqa: F401


def test_import_does_not_load_heavy_sdks() -> None:
    code = (
        "import sys, json, agentkit, agentkit.testing, agentkit.models, agentkit.mcp, agentkit.session;"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('openai', 'anthropic', 'mcp', 'httpx2', 'jsonschema'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []

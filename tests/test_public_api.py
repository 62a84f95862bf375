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
    import agentkit.mcp
    import agentkit.models
    import agentkit.session
    import agentkit.testing

    public = {
        agentkit.mcp: {"HttpServer", "MCPClient", "StdioServer"},
        agentkit.models: {
            "AnthropicChatModel",
            "ChatModel",
            "ChatResponse",
            "ChatUsage",
            "OpenAIChatModel",
            "from_string",
        },
        agentkit.session: {"JSONSession", "RedisSession", "SQLiteSession"},
        agentkit.testing: {"FunctionModel", "ScriptedModel", "TestModel"},
    }
    for module, names in public.items():
        assert names <= set(module.__all__), (module.__name__, names - set(module.__all__))
        assert all(hasattr(module, name) for name in names), module.__name__


def test_import_does_not_load_heavy_sdks() -> None:
    code = (
        "import sys, json, agentkit, agentkit.testing, agentkit.models, agentkit.mcp, agentkit.session;"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('openai', 'anthropic', 'mcp', 'httpx2', 'jsonschema'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []

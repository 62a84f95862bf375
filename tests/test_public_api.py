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


# The modules users import from: each package's ``__init__`` plus these top-level modules.
PUBLIC_MODULES = ("events", "exceptions", "memory", "messages", "testing")


def _package_faces() -> list[str]:
    from pathlib import Path

    root = Path(agentkit.__file__).parent
    return sorted(
        ".".join(("agentkit", *init.parent.relative_to(root).parts))
        for init in root.rglob("__init__.py")
    )


def test_implementation_modules_are_private() -> None:
    from pathlib import Path

    root = Path(agentkit.__file__).parent
    public = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if path.name in {"__init__.py", "__main__.py"} or path.name.startswith("_"):
            continue
        if len(rel.parts) == 1 and path.stem in PUBLIC_MODULES:
            continue
        public.append(str(rel))
    assert not public, f"implementation modules without a leading underscore: {sorted(public)}"


def test_every_public_name_of_every_face_resolves() -> None:
    import importlib

    for name in [*_package_faces(), *(f"agentkit.{m}" for m in PUBLIC_MODULES)]:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        assert exported is not None, f"{name} has no __all__"
        for attr in exported:
            assert getattr(module, attr) is not None, f"{name}.{attr}"
        # dir() lists the public names, lazy ones included.
        assert set(exported) <= set(dir(module)), name


def test_unknown_names_raise_attribute_error() -> None:
    import importlib

    import pytest

    for name in _package_faces():
        module = importlib.import_module(name)
        with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
            _ = module.no_such_name

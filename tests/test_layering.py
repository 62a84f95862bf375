"""Imports go one way between agentkit's packages: a test that reads every module's imports.

The order, bottom first (a package may import from its own layer and the ones below)::

    exceptions, _text, _lazy, _formats, _console     (helpers)
    messages
    models, memory
    tools                (it offers ToolDefinitions, from models)
    mcp, events
    agent
    session, pipelines, serve, durable, observability, cli, testing
    agentkit (the root face), __main__

Every import counts: top-level, ``TYPE_CHECKING``-only, function-level, and the module names
given to ``importlib.import_module``, looked up in ``sys.modules`` or given to
``lazy_exports``. An upward edge is allowed only in ``ALLOWED`` (at most 3, each with its
reason); ``KNOWN`` lists the upward edges of today that issue #26 removes: it may only
shrink (an edge that is gone must leave the list, so it cannot come back unnoticed).
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parent.parent / "agentkit"

LAYERS: list[set[str]] = [
    {"exceptions", "_text", "_lazy", "_formats", "_console"},
    {"messages"},
    {"models", "memory"},
    {"tools"},
    {"mcp", "events"},
    {"agent"},
    {"session", "pipelines", "serve", "durable", "observability", "cli", "testing"},
    {"agentkit"},
    {"__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}

ALLOWED: dict[tuple[str, str], str] = {
    ("agent", "observability"): (
        "observability/_seams.py is the loop's instrumentation interface (no-ops until an "
        "adapter installs itself): the agent calls it, the adapters above implement it"
    ),
}

KNOWN: dict[tuple[str, str], str] = {
    ("agent", "pipelines"): "ReActAgent.as_tool imports agent_as_tool (agent/_react.py)",
    ("tools", "mcp"): "the Toolkit finds MCP through sys.modules/importlib (tools/_toolkit.py)",
    ("models", "observability"): "FallbackModel records its fallbacks (models/_fallback.py)",
    ("mcp", "agentkit"): "__version__ read from the root face (mcp/_app_handlers.py, _client.py)",
    ("mcp", "observability"): "served tool calls open a span (mcp/_served_tools.py)",
    ("cli", "agentkit"): "__version__ read from the root face (cli/__init__.py, function-level)",
    ("observability", "agentkit"): "__version__ read from the root face (observability/_otel.py)",
}


def _package(module: str) -> str:
    """``agentkit.agent._loop`` -> ``agent``; ``agentkit`` -> ``agentkit``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agentkit"


def _module_name(path: pathlib.Path) -> tuple[str, bool]:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _is_sys_modules(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "modules"


def _named_modules(node: ast.Call) -> list[str]:
    """Module names given as strings: ``import_module("agentkit.x")``, ``lazy_exports``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name == "import_module" or (name == "get" and _is_sys_modules(getattr(func, "value", None))):
        args = node.args[:1]
    elif name == "lazy_exports":
        args = [v for a in node.args[2:3] if isinstance(a, ast.Dict) for v in a.values if v]
    else:
        return []
    return [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def _imports(path: pathlib.Path) -> set[str]:
    """Every agentkit module ``path`` imports, in any form."""
    module, is_package = _module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                found.add(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                found.add(node.module)
        elif isinstance(node, ast.Call):
            found.update(_named_modules(node))
        elif (
            isinstance(node, ast.Subscript)
            and _is_sys_modules(node.value)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            found.add(node.slice.value)  # sys.modules["agentkit.x"]
    return {m for m in found if m == "agentkit" or m.startswith("agentkit.")}


def upward_edges() -> dict[tuple[str, str], set[str]]:
    """``{(importer, imported): files}`` for every import into a higher layer."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in sorted(ROOT.rglob("*.py")):
        module, _ = _module_name(path)
        source = _package(module)
        for target in _imports(path):
            imported = _package(target)
            if imported != source and RANK[imported] > RANK[source]:
                edges[(source, imported)].add(str(path.relative_to(ROOT.parent)))
    return dict(edges)


def test_every_package_has_a_layer() -> None:
    packages = {_package(_module_name(p)[0]) for p in ROOT.rglob("*.py")}
    assert packages <= set(RANK), f"place these in LAYERS: {sorted(packages - set(RANK))}"


def test_no_import_goes_up_a_layer() -> None:
    edges = upward_edges()
    new = {edge: sorted(files) for edge, files in edges.items() if edge not in {**ALLOWED, **KNOWN}}
    assert not new, f"imports into a higher layer: {new}"


def test_the_known_upward_edges_only_shrink() -> None:
    gone = set(KNOWN) - set(upward_edges())
    assert not gone, f"these edges are gone: remove them from KNOWN: {sorted(gone)}"


def test_the_allow_list_is_short_and_explained() -> None:
    assert len(ALLOWED) <= 3
    assert all(len(reason) > 20 for reason in ALLOWED.values())

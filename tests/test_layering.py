"""Imports run one way: a package never imports one above it (type-only imports included).

The layers, bottom first (DESIGN.md section 2): the root's own modules (messages,
exceptions, ...) <- models <- tools <- mcp; {models, tools, mcp, memory, events} <- agent
<- {session, pipelines, observability, skills} <- {durable, a2a} <- serve (durable served
turns run on ``DBOSAgent``) <- testing (its contract suite drives agents, durable runs and
served apps) <- cli. An import counts
wherever it is: at the top, under ``TYPE_CHECKING``, inside a function, or as a string given
to ``importlib.import_module`` / ``sys.modules``. The package face ``agentkit`` (its
``__init__``) is for users: no module of the library imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentkit

ROOT = Path(agentkit.__file__).parent

# Higher imports lower. Root-level modules are named by their file; packages by folder.
LAYER = {
    "_text": 0,
    "_ids": 0,
    "_lazy": 0,
    "_version": 0,
    "exceptions": 1,
    "_formats": 2,
    "messages": 2,
    "_console": 3,
    "_seams": 3,
    "models": 4,
    "memory": 4,
    "tools": 5,
    "events": 6,
    "mcp": 7,
    "agent": 8,
    "pipelines": 9,
    "session": 9,
    "observability": 9,
    "skills": 9,
    "durable": 10,
    "serve": 11,
    "a2a": 10,
    "testing": 12,
    "cli": 13,
}

# (importer, imported, why): each an upward edge the design has not removed yet.
ALLOWED = {
    (
        "agent",
        "pipelines",
        "ReActAgent.as_tool() is sugar for agentkit.pipelines.agent_as_tool (imported when "
        "called); the agent-as-tool wrapper needs the agent, so it lives above it",
    ),
}


def _unit(module: str) -> str | None:
    """The layer unit of a dotted agentkit module name (None: the face, or not agentkit)."""
    parts = module.split(".")
    if parts[0] != "agentkit":
        return None
    if len(parts) == 1:
        return "<face>"
    return parts[1]


def _unit_of_file(path: Path) -> str | None:
    rel = path.relative_to(ROOT)
    if len(rel.parts) == 1:
        return None if rel.stem in {"__init__", "__main__"} else rel.stem
    return rel.parts[0]


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "agentkit":  # from agentkit import _seams: a module, or the face
                for alias in node.names:
                    is_module = (ROOT / f"{alias.name}.py").exists() or (ROOT / alias.name).is_dir()
                    found.append(
                        (f"agentkit.{alias.name}" if is_module else "agentkit", node.lineno)
                    )
            else:
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.Call) and node.args:  # import_module("agentkit.x"), sys.modules
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in {"import_module", "get"} and first.value.startswith("agentkit."):
                    found.append((first.value, node.lineno))
    return found


def edges() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        src = _unit_of_file(path)
        if src is None:
            continue
        for module, line in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            dst = _unit(module)
            if dst is not None and dst != src:
                out.setdefault((src, dst), []).append(f"{path.relative_to(ROOT.parent)}:{line}")
    return out


def test_every_unit_has_a_layer() -> None:
    units = {_unit_of_file(p) for p in ROOT.rglob("*.py")} - {None}
    assert units <= set(LAYER), f"give these a layer: {sorted(units - set(LAYER))}"


def test_imports_run_one_way() -> None:
    allowed = {(a, b) for a, b, _ in ALLOWED}
    wrong = {
        edge: where
        for edge, where in edges().items()
        if (edge[1] == "<face>" or LAYER[edge[0]] <= LAYER[edge[1]]) and edge not in allowed
    }
    assert not wrong, "upward imports:\n" + "\n".join(
        f"  {a} -> {b}: {', '.join(w[:3])}" for (a, b), w in sorted(wrong.items())
    )


def test_the_allow_list_is_short_and_still_needed() -> None:
    assert len(ALLOWED) <= 3
    found = edges()
    stale = [(a, b) for a, b, _ in ALLOWED if (a, b) not in found]
    assert not stale, f"no longer imported, remove from ALLOWED: {stale}"

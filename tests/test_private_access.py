"""No module of agentkit reaches a private member of an object that is not its own.

A private name (``_x``, not a dunder) is an implementation detail of the class or module
that defines it: code elsewhere that reads or writes it breaks silently when that detail
changes, and hides a missing public (or package-internal) seam. So an attribute access
``value._x`` is allowed only where ``value`` is the name ``self`` or ``cls``, a call of
``super()``, a module bound by ``import`` (a private module's private helpers are its
package's business, checked by the layering test), or, inside a class, another instance's
slot that the class itself declares in its ``__slots__`` (private to the class, as in C++ or
Java: ``Msg.replace`` fills the packed id of the ``Msg`` it builds).
``getattr``/``setattr``/``hasattr``/``delattr`` with a literal private name count too: they
are the same access, spelled as a string.

The allow-list holds what agentkit cannot yet do otherwise, each with its reason.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import agentkit

ROOT = Path(agentkit.__file__).parent

_REFLECTION = {"getattr", "setattr", "hasattr", "delattr"}

# (file relative to agentkit/, the access as ast.unparse writes it): why it must stay.
ALLOWED: dict[tuple[str, str], str] = {
    (
        "mcp/_tasks.py",
        "sdk._stamp",
    ): "the mcp SDK (2.x) has no tasks/* requests and checks every tools/call answer as a "
    "CallToolResult: a task request is stamped (protocol envelope) as the SDK's own "
    "send_request does, then sent raw (mcp/_tasks.py module doc)",
    (
        "mcp/_tasks.py",
        "sdk._dispatcher",
    ): "the SDK's dispatcher is its only path that returns a raw JSON-RPC result (see above)",
    (
        "mcp/_tasks.py",
        "getattr(ctx.session, '_connection', None)",
    ): "the SDK's lowlevel request context reaches its per-connection state only through "
    "the session proxy's connection (the high-level Context.connection is the same object)",
    (
        "mcp/_connection.py",
        "getattr(session, '_dispatcher', None)",
    ): "the SDK exposes no 'transport closed' flag on a client session; its dispatcher's "
    "is the only sign that a stdio child exited",
    (
        "mcp/_connection.py",
        "getattr(dispatcher, '_closed', False)",
    ): "see the entry above: the dispatcher's closed flag",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_names(tree: ast.AST, wanted: set[str]) -> set[str]:
    """Those of ``wanted`` that an import anywhere in the module binds to a module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # ``from pkg import mod`` binds a module when ``pkg.mod`` is one (only the
            # names used with a private member are looked up: a lookup imports ``pkg``).
            for alias in node.names:
                bound = alias.asname or alias.name
                if bound in wanted and _is_module(f"{node.module}.{alias.name}"):
                    names.add(bound)
    return names & wanted


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module (agentkit's by its files: nothing is imported)."""
    parts = dotted.split(".")
    if parts[0] == "agentkit":
        base = ROOT.joinpath(*parts[1:])
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
    import importlib.util

    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):  # the parent is a module, not a package
        return False


def _own(value: ast.expr, modules: set[str]) -> bool:
    """Whether ``value`` is an object whose private members this code may use."""
    if isinstance(value, ast.Name):
        return value.id in {"self", "cls"} or value.id in modules
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _own_slots(tree: ast.AST) -> set[int]:
    """Ids of the attribute nodes, inside a class, that name a slot the class declares."""
    allowed: set[int] = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        slots: set[str] = set()
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets)
                and isinstance(stmt.value, (ast.Tuple, ast.List))
            ):
                slots |= {
                    e.value
                    for e in stmt.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
        allowed |= {
            id(node)
            for node in ast.walk(cls)
            if isinstance(node, ast.Attribute) and node.attr in slots
        }
    return allowed


def _reached(path: Path) -> list[tuple[int, str]]:
    """``(line, access)`` for each private member of another object that ``path`` uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    same_class = _own_slots(tree)
    owners = {
        node.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and _private(node.attr)
        and isinstance(node.value, ast.Name)
    }
    owners |= {
        node.args[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
    }
    modules = _module_names(tree, owners)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not _own(node.value, modules) and id(node) not in same_class:
                found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _REFLECTION
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and not _own(node.args[0], modules)
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


@functools.cache  # one walk of the package for both tests
def _all_reached() -> dict[tuple[str, str], list[int]]:
    reached: dict[tuple[str, str], list[int]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, access in _reached(path):
            reached.setdefault((rel, access), []).append(line)
    return reached


def test_no_private_member_of_another_object() -> None:
    reached = _all_reached()
    unexplained = [
        f"agentkit/{rel}:{lines[0]}: {access}"
        for (rel, access), lines in sorted(reached.items())
        if (rel, access) not in ALLOWED
    ]
    assert not unexplained, "private members reached from outside:\n" + "\n".join(unexplained)


def test_allow_list_is_current() -> None:
    """An entry whose access is gone is deleted with it."""
    reached = _all_reached()
    stale = sorted(key for key in ALLOWED if key not in reached)
    assert not stale, f"allowed accesses no longer in the code: {stale}"


def test_the_check_sees_the_forms_it_forbids(tmp_path: Path) -> None:
    """The walker flags another object's private member, and only that."""
    source = tmp_path / "probe.py"
    source.write_text(
        "import os\n"
        "from collections import abc\n"
        "class A:\n"
        "    def f(self, other):\n"
        "        self._x, os._exit, abc._check_methods, super()._y\n"
        "        other._x\n"
        "        getattr(other, '_z')\n"
        "        other.__dict__, getattr(self, '_w')\n"
        "class B:\n"
        "    __slots__ = ('_v',)\n"
        "    def g(self, other):\n"
        "        other._v, other._u\n",
        encoding="utf-8",
    )
    assert [access for _, access in _reached(source)] == [
        "other._x",
        "getattr(other, '_z')",
        "other._u",
    ]

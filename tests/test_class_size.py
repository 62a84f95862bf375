"""No class of agentkit has more than 20 public methods (#26).

A class with more public methods than that does several jobs: its users cannot tell which
methods belong together, and each job's changes touch the others'. The cure is to split a
responsibility out into a component the class has (``MCPClient.events``), not to rename
methods private or to cut by line count.

The count is of public methods (no leading underscore, so no dunders either) defined on the
class or inherited from another agentkit class; properties are state, not behaviour, and
are left out. The walk reads the source (``ast``): nothing is imported, so optional
dependencies and import side effects play no part, and the whole package is read in well
under a second.

The allow-list holds the classes that are not there yet, each with its reason; an entry whose
class has come down to the limit is stale and fails the test as well.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import agentkit

ROOT = Path(agentkit.__file__).parent
MAX_PUBLIC_METHODS = 20

# Class (as its package exports it) -> why it may have more for now.
ALLOWED: dict[str, str] = {}  # none today

_PROPERTIES = {"property", "cached_property"}
_ACCESSORS = {"setter", "getter", "deleter"}

ClassKey = tuple[str, str]  # (defining module, qualified name)


@dataclass
class _Module:
    """What one module defines and imports, as far as class lookups need."""

    classes: dict[str, ast.ClassDef] = field(default_factory=dict)  # qualname -> node
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # bound -> (module, name)
    modules: dict[str, str] = field(default_factory=dict)  # bound -> module imported


@dataclass
class _Package:
    modules: dict[str, _Module]

    def resolve(
        self, module: str, expr: ast.expr, seen: frozenset[str] = frozenset()
    ) -> ClassKey | None:
        """The package class that base expression ``expr`` in ``module`` names, if any."""
        if isinstance(expr, ast.Subscript):  # Generic[T], TypedRuns[DepsT, OutputT]
            return self.resolve(module, expr.value, seen)
        mod = self.modules.get(module)
        if mod is None:
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            target = mod.modules.get(expr.value.id)
            return self.lookup(target, expr.attr, seen) if target else None
        if isinstance(expr, ast.Name):
            return self.lookup(module, expr.id, seen)
        return None

    def lookup(self, module: str, name: str, seen: frozenset[str]) -> ClassKey | None:
        """Class ``name`` as seen from ``module``: defined there or imported (re-exports)."""
        where = f"{module}:{name}"
        mod = self.modules.get(module)
        if mod is None or where in seen:
            return None
        if name in mod.classes:
            return module, name
        if name in mod.names:
            source, original = mod.names[name]
            return self.lookup(source, original, seen | {where})
        return None


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at import, ``if TYPE_CHECKING:`` and ``try:`` blocks included.

    (Imports inside functions bind no name a class statement can use as a base.)
    """
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level(block)
            for handler in node.handlers:
                yield from _module_level(handler.body)


def _read(path: Path, module: str, package: str) -> _Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    mod = _Module()

    def collect(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                mod.classes[prefix + node.name] = node
                collect(node.body, f"{prefix}{node.name}.")

    collect(tree.body, "")
    is_package = path.name == "__init__.py"
    for node in _module_level(tree.body):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            if source.split(".")[0] != package:
                continue
            for alias in node.names:
                mod.names[alias.asname or alias.name] = (source, alias.name)
                mod.modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package and alias.asname:
                    mod.modules[alias.asname] = alias.name
    return mod


def _index(root: Path, package: str) -> _Package:
    return _Package(
        {
            (name := _module_name(path, root, package)): _read(path, name, package)
            for path in sorted(root.rglob("*.py"))
        }
    )


def _is_property(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Name) and decorator.id in _PROPERTIES:
            return True
        if isinstance(decorator, ast.Attribute) and (
            decorator.attr in _PROPERTIES or decorator.attr in _ACCESSORS
        ):
            return True
    return False


def _members(
    pkg: _Package, key: ClassKey, seen: frozenset[ClassKey] = frozenset()
) -> dict[str, bool]:
    """Public member name -> whether it is a method (not a property), bases first."""
    module, qualname = key
    node = pkg.modules[module].classes[qualname]
    members: dict[str, bool] = {}
    for base in reversed(node.bases):  # the first base wins, as in the MRO
        found = pkg.resolve(module, base)
        if found is not None and found not in seen:
            members.update(_members(pkg, found, seen | {key}))
    own: dict[str, bool] = {}
    for item in node.body:  # a property's setter shares its name; overloads share theirs
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and not item.name.startswith(
            "_"
        ):
            own[item.name] = own.get(item.name, True) and not _is_property(item)
    members.update(own)
    return members


def _public_names(pkg: _Package) -> dict[ClassKey, str]:
    """Each class's name as its home package exports it (``agentkit.agent.ReActAgent``).

    The nearest package above the defining module that imports the class names it; a class
    no package exports is named by its module (``agentkit.mcp._bridge.Registration``).
    """
    names: dict[ClassKey, str] = {}
    for module, mod in pkg.modules.items():
        for qualname in mod.classes:
            names[module, qualname] = f"{module}.{qualname}"
            parts = module.split(".")
            for depth in range(len(parts) - 1, 0, -1):
                face = ".".join(parts[:depth])
                exported = [
                    bound
                    for bound in pkg.modules[face].names
                    if not bound.startswith("_")
                    and pkg.lookup(face, bound, frozenset()) == (module, qualname)
                ]
                if exported:
                    names[module, qualname] = f"{face}.{exported[0]}"
                    break
    return names


def public_methods(root: Path, package: str) -> dict[str, list[str]]:
    """Class name -> its public methods (own and inherited from the package), sorted."""
    pkg = _index(root, package)
    names = _public_names(pkg)
    return {
        names[key]: sorted(name for name, method in _members(pkg, key).items() if method)
        for key in names
    }


@functools.cache
def _agentkit() -> dict[str, list[str]]:
    return public_methods(ROOT, "agentkit")


def test_no_class_has_more_than_20_public_methods() -> None:
    too_big = {
        name: methods
        for name, methods in _agentkit().items()
        if len(methods) > MAX_PUBLIC_METHODS and name not in ALLOWED
    }
    report = "\n".join(
        f"{name}: {len(methods)} public methods (at most {MAX_PUBLIC_METHODS}): "
        + ", ".join(methods)
        for name, methods in sorted(too_big.items())
    )
    assert not too_big, "split a responsibility out into a component the class has:\n" + report


def _stale(allowed: dict[str, str], found: dict[str, list[str]]) -> dict[str, int | None]:
    """Allowed class -> its count, for those at the limit or below (None: no such class)."""
    counts = {name: len(methods) for name, methods in found.items()}
    return {name: counts.get(name) for name in allowed if counts.get(name, 0) <= MAX_PUBLIC_METHODS}


def test_allow_list_is_current() -> None:
    """An allowed class that has come down to the limit (or is gone) leaves the list."""
    stale = _stale(ALLOWED, _agentkit())
    assert not stale, f"allow-list entries no longer needed (public methods now): {stale}"


def test_a_stale_allow_list_entry_is_reported() -> None:
    found = {"pkg.Big": [f"m{i}" for i in range(21)], "pkg.Small": ["m"]}
    allowed = {"pkg.Big": "why", "pkg.Small": "why", "pkg.Gone": "why"}
    assert _stale(allowed, found) == {"pkg.Small": 1, "pkg.Gone": None}


def test_the_count_takes_inherited_methods_and_leaves_out_properties(tmp_path: Path) -> None:
    """The walker counts what a user of the class can call, and only that."""
    root = tmp_path / "probe"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from probe.sub._impl import Child\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "_base.py").write_text(
        "from typing import Generic, TypeVar\n"
        "T = TypeVar('T')\n"
        "class Base(Generic[T]):\n"
        "    def inherited(self): ...\n"
        "    def overridden(self): ...\n"
        "    def _private(self): ...\n"
    )
    (root / "sub" / "_impl.py").write_text(
        "import functools\n"
        "from probe.sub._base import Base\n"
        "class Child(Base[int], Exception):\n"
        "    def __init__(self): ...\n"
        "    def overridden(self): ...\n"
        "    async def run(self): ...\n"
        "    @property\n"
        "    def state(self): ...\n"
        "    @state.setter\n"
        "    def state(self, value): ...\n"
        "    @functools.cached_property\n"
        "    def cached(self): ...\n"
        "    class Inner:\n"
        "        def inner(self): ...\n"
    )
    found = public_methods(root, "probe")
    assert found["probe.Child"] == ["inherited", "overridden", "run"]
    assert found["probe.sub._impl.Child.Inner"] == ["inner"]
    assert found["probe.sub._base.Base"] == ["inherited", "overridden"]

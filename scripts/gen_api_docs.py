#!/usr/bin/env python3
"""Generate docs/api.md from the public names (``__all__``) and their docstrings.

Usage: ``.venv/bin/python scripts/gen_api_docs.py [--check]``. ``--check`` exits 1 when
docs/api.md is out of date (for CI), without writing.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import pathlib
import re
import sys
import typing
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "api.md"

# The public modules that are not packages. Every package's ``__init__`` (its face) is found
# by walking agentkit/; implementation modules are not listed, so a module's own ``__all__``
# is documented only when the module is named here as part of the public API.
PUBLIC_MODULES = (
    "agentkit.events",
    "agentkit.exceptions",
    "agentkit.memory",
    "agentkit.messages",
    "agentkit.testing",
)


def packages() -> list[str]:
    """Every public package of agentkit (a folder with an ``__init__.py``, no ``_`` name)."""
    found = []
    for init in sorted((ROOT / "agentkit").rglob("__init__.py")):
        parts = init.parent.relative_to(ROOT).parts
        if not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return found


def public_modules() -> list[str]:
    """The modules the page documents: ``agentkit`` first, then the others by name."""
    names = sorted(set(packages()) | set(PUBLIC_MODULES))
    names.remove("agentkit")
    return ["agentkit", *names]


def _description(module_name: str) -> str:
    """The first line of the module's docstring."""
    doc = inspect.getdoc(importlib.import_module(module_name)) or ""
    return doc.splitlines()[0].strip() if doc else ""


def _own_doc(obj: Any) -> bool:
    """Whether ``obj`` has a docstring of its own (not its type's, as a Union alias has)."""
    return inspect.isclass(obj) or inspect.isroutine(obj) or isinstance(obj, property)


def _summary(obj: Any) -> str:
    doc = (inspect.getdoc(obj) or "") if _own_doc(obj) else ""
    if not doc or (inspect.isclass(obj) and doc == inspect.getdoc(type)):
        return ""
    paragraphs = doc.split("\n\n")
    return " ".join(paragraphs[0].split())


def _details(obj: Any) -> str:
    """The docstring after its summary (Args/Returns/Raises...), as a code block."""
    doc = (inspect.getdoc(obj) or "") if _own_doc(obj) else ""
    rest = doc.split("\n\n", 1)[1] if "\n\n" in doc else ""
    return f"\n```text\n{rest.strip()}\n```\n" if rest.strip() else ""


def _signature(obj: Any) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    # Postponed annotations are strings: show them unquoted (defaults keep their quotes).
    text = re.sub(r"(: |-> )'([^']*)'", r"\1\2", str(sig))
    text = re.sub(r'(: |-> )"([^"]*)"', r"\1\2", text)
    return text if len(text) <= 300 else text[:297] + "..."


def _is_typeddict(obj: Any) -> bool:
    return isinstance(obj, type) and typing.is_typeddict(obj)


def _class_section(name: str, cls: type) -> list[str]:
    lines: list[str] = []
    if _is_typeddict(cls):
        keys = ", ".join(f"`{k}`" for k in cls.__annotations__)
        lines.append(f"### `{name}` (TypedDict)\n\n{_summary(cls)}\n\nKeys: {keys}.\n")
        return lines
    kind = "dataclass" if dataclasses.is_dataclass(cls) else "class"
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    based = f"({', '.join(bases)})" if bases else ""
    lines.append(f"### `{name}{based}` ({kind})\n")
    lines.append(f"`{name}{_signature(cls)}`\n")
    lines.append(f"{_summary(cls)}\n{_details(cls)}")
    for attr, value in sorted(vars(cls).items()):
        if attr.startswith("_") and attr != "__call__":
            continue
        member = value.fget if isinstance(value, property) else value
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if not (inspect.isfunction(member) or isinstance(value, property)):
            continue
        sig = "" if isinstance(value, property) else _signature(member)
        label = "property " if isinstance(value, property) else ""
        lines.append(f"- {label}`{attr}{sig}`: {_summary(member)}")
    lines.append("")
    return lines


def _name_section(module: str, name: str, obj: Any) -> list[str]:
    if inspect.isclass(obj):
        return _class_section(name, obj)
    if callable(obj) and not isinstance(obj, typing.TypeVar):
        sig = _signature(obj)
        if sig or inspect.isfunction(obj):
            return [f"### `{name}{sig}`\n", f"{_summary(obj)}\n{_details(obj)}"]
    # Memory addresses in reprs (<function f at 0x...>) would make the page change on every run.
    shown = re.sub(r" at 0x[0-9a-f]+", "", repr(obj))
    shown = shown if len(shown) <= 200 else shown[:197] + "..."
    return [f"### `{name}`\n", f"`{shown}`\n"]


def _anchor(module: str) -> str:
    return module.replace(".", "")


def _homes(modules: list[str]) -> dict[int, str]:
    """Object id -> the most specific listed module exporting it (its documented home).

    The most specific is the deepest (``agentkit.agent._user`` over ``agentkit.agent`` over
    ``agentkit``); between equally deep ones, the first by name.
    """
    homes: dict[int, str] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if isinstance(obj, str | int | float | tuple | frozenset):
                continue  # constants are documented where they are listed
            current = homes.get(id(obj))
            if current is None or current.count(".") < module_name.count("."):
                homes[id(obj)] = module_name
    return homes


def generate() -> str:
    """The whole page."""
    modules = public_modules()
    homes = _homes(modules)
    out = [
        "# API reference\n",
        "Generated from the docstrings by `scripts/gen_api_docs.py`: do not edit by hand.",
        "Each public name (a module's `__all__`) is described once, under the most specific",
        "module that exports it; the others point there.\n",
    ]
    descriptions = {m: _description(m) for m in modules}
    out += [f"- [`{m}`](#{_anchor(m)}): {d}" for m, d in descriptions.items()]
    out.append("")
    for module_name, description in descriptions.items():
        module = importlib.import_module(module_name)
        out.append(f"## {module_name}\n\n{description}\n")
        pointers: list[str] = []
        for name in sorted(getattr(module, "__all__", [])):
            obj = getattr(module, name)
            home = homes.get(id(obj), module_name)
            if module_name == "agentkit" and isinstance(obj, str):
                out.append(f"- `{name}`: `{obj!r}`")
                continue
            if home != module_name and module_name == "agentkit":
                summary = _summary(obj) or "type alias"
                out.append(f"- [`{name}`](#{_anchor(home)}) (`{home}`): {summary}")
                continue
            if home != module_name:
                pointers.append(f"[`{name}`](#{_anchor(home)}) (`{home}`)")
                continue
            out += _name_section(module_name, name, obj)
        if pointers:
            out.append("Also exported here: " + ", ".join(pointers) + ".\n")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/api.md is stale")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    text = generate()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print("docs/api.md is out of date: run scripts/gen_api_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

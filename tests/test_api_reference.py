"""docs/api.md documents every public name, and is what scripts/gen_api_docs.py writes."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_api_docs", ROOT / "scripts" / "gen_api_docs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _sections() -> dict[str, str]:
    """Module name -> the text of its ``## module`` section of docs/api.md."""
    parts = re.split(r"^## (\S+)\n", API.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_checked_in_page_is_the_generators_output() -> None:
    assert API.read_text() == GEN.generate(), "docs/api.md is stale: run scripts/gen_api_docs.py"


def test_every_package_and_listed_module_has_a_section() -> None:
    modules = GEN.public_modules()
    for package in ("agentkit.durable", "agentkit.serve", "agentkit.observability"):
        assert package in modules
    assert set(GEN.PUBLIC_MODULES) <= set(modules)
    assert set(_sections()) == set(modules)


def _undocumented(sections: dict[str, str]) -> list[str]:
    """``module.name`` for each ``__all__`` name that its module's section does not show."""
    missing = []
    for module_name in GEN.public_modules():
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        assert exported, f"{module_name} is public but has no __all__"
        text = sections[module_name]
        # Described under a heading (### `name...`), listed (- `name`), or pointing to its home.
        missing += [
            f"{module_name}.{name}"
            for name in exported
            if f"### `{name}" not in text
            and f"[`{name}`]" not in text
            and f"- `{name}`" not in text
        ]
    return missing


def test_every_public_name_of_every_public_module_is_documented() -> None:
    missing = _undocumented(_sections())
    assert not missing, f"not in docs/api.md: {missing}"


def test_a_name_left_off_the_page_is_reported() -> None:
    sections = _sections()
    sections["agentkit.durable"] = sections["agentkit.durable"].replace("### `DBOSAgent", "### `X")
    assert _undocumented(sections) == ["agentkit.durable.DBOSAgent"]

"""The docs tie everything together: index links, API reference coverage, examples listed."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = {
    "getting_started.md",
    "concepts.md",
    "cli.md",
    "api.md",
    "migration_agentscope.md",
    "tools.md",
    "models.md",
    "mcp.md",
    "agent.md",
    "interrupt.md",
    "sessions.md",
    "multi_agent.md",
    "toolkits.md",
    "benchmarks.md",
    "testing.md",
    "messages.md",
}


def _links(page: str) -> set[str]:
    text = (DOCS / page).read_text()
    return set(re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text))


def test_index_links_every_page() -> None:
    links = _links("index.md")
    existing = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    missing = (PAGES | existing) - links
    assert not missing, f"docs/index.md does not link {sorted(missing)}"


def test_every_example_is_listed() -> None:
    listed = (DOCS / "index.md").read_text() + (DOCS / "getting_started.md").read_text()
    for example in (ROOT / "examples").glob("*.py"):
        if example.stem != "basics":
            assert example.stem in listed, example.name


def test_local_links_resolve() -> None:
    for page in ("index.md", "getting_started.md", "concepts.md", "cli.md"):
        for link in _links(page):
            if "://" in link:
                continue
            target = (DOCS / link).resolve()
            if target.name in PAGES and not target.exists():
                continue  # a page another engineer is still writing
            assert target.exists(), f"{page} links {link}, which does not exist"

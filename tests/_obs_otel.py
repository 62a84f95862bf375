"""Shared helpers of the observability tests: span export to memory/files, tree building."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

# Attributes whose values change from run to run (random ids, machine paths).
VOLATILE = {"gen_ai.response.id", "agentkit.mcp.server.command"}


class FileSpanExporter(SpanExporter):
    """Append finished spans as JSON lines (for a server process the test cannot reach)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as f:
            for span in spans:
                f.write(json.dumps(span_record(span)) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def span_record(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    assert ctx is not None
    return {
        "name": span.name,
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_id": format(span.parent.span_id, "016x") if span.parent else None,
        "attributes": dict(span.attributes or {}),
    }


def _node(span: ReadableSpan, children: list[dict[str, Any]]) -> dict[str, Any]:
    attributes = {
        k: ("<volatile>" if k in VOLATILE else (list(v) if isinstance(v, tuple) else v))
        for k, v in sorted((span.attributes or {}).items())
    }
    node: dict[str, Any] = {
        "name": span.name,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": attributes,
    }
    if span.status.description:
        node["status_description"] = span.status.description
    if span.events:
        node["events"] = [
            {"name": e.name, "attributes": dict(sorted((e.attributes or {}).items()))}
            for e in span.events
        ]
    if children:
        node["children"] = children
    return node


def span_tree(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    """Root spans with nested children, in start order (siblings ordered by name and id)."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.get_span_context().span_id for s in spans}  # type: ignore[union-attr]
    for span in spans:
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)

    def build(parent: int | None) -> list[dict[str, Any]]:
        group = by_parent.get(parent, [])
        group.sort(key=lambda s: s.start_time or 0)
        nodes = [_node(s, build(s.get_span_context().span_id)) for s in group]  # type: ignore[union-attr]
        if parent is not None:  # concurrent siblings: start order is not deterministic
            nodes.sort(key=lambda n: (n["name"], str(n["attributes"].get("gen_ai.tool.call.id"))))
        return nodes

    return build(None)


def load_or_update(path: Path, value: Any, update: bool) -> Any:
    """The checked-in fixture at ``path`` (rewritten from ``value`` when ``update``)."""
    if update:
        path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))
